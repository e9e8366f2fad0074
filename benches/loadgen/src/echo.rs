//! The ceiling of the remoting benchmark: a server that does what any remoting server must (cut
//! frames, decode the header for its opaque, answer in the request's serialize type) and
//! nothing else, on one mio thread like the broker's remoting loop. What the generator reaches
//! against it is what this machine gives request/response over loopback at that connection
//! count, whatever the broker does.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{self, Write};
use std::net::SocketAddr;

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use rocketha_core::remoting::frame::{encode_frame, RawFrame};
use rocketha_core::remoting::{response_code, RemotingCommand};

use crate::link::{Link, MAX_FRAME_SIZE};

const LISTENER: Token = Token(0);

/// Prints `{"listen": ADDR}` and serves until killed.
pub(crate) fn serve(listen: SocketAddr) -> io::Result<Infallible> {
    let mut listener = TcpListener::bind(listen)?;
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "{}",
        serde_json::json!({"listen": listener.local_addr()?.to_string()})
    )?;
    out.flush()?;
    let mut events = Events::with_capacity(1024);
    let mut links: HashMap<usize, Link> = HashMap::new();
    let mut next = 1;
    let mut scratch = vec![0; 64 << 10];
    loop {
        match poll.poll(&mut events, None) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            done => done?,
        }
        for event in &events {
            if event.token() == LISTENER {
                while let Ok((mut stream, _)) = listener.accept() {
                    stream.set_nodelay(true)?;
                    poll.registry().register(
                        &mut stream,
                        Token(next),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    links.insert(next, Link::new(stream));
                    next += 1;
                }
                continue;
            }
            let Token(id) = event.token();
            let Some(link) = links.get_mut(&id) else {
                continue;
            };
            let mut result = Ok(());
            if event.is_writable() {
                result = link.flush();
            }
            if result.is_ok() && (event.is_readable() || event.is_read_closed()) {
                result = link.on_readable(&mut scratch, event.is_read_closed(), answer);
            }
            // A client that leaves (the generator at the end of its run) is routine.
            if result.is_err() {
                links.remove(&id);
            }
        }
    }
}

/// An empty SUCCESS with the request's opaque, in its serialize type; nothing for a oneway.
fn answer(frame: RawFrame<'_>, out: &mut Vec<u8>) -> io::Result<()> {
    let invalid = |e| io::Error::new(io::ErrorKind::InvalidData, e);
    let request =
        RemotingCommand::decode_header(frame.header, frame.serialize_type).map_err(invalid)?;
    if request.is_oneway() {
        return Ok(());
    }
    let response = RemotingCommand::response_to(&request, response_code::SUCCESS, None);
    let header = response.encode_header().map_err(invalid)?;
    encode_frame(frame.serialize_type, &header, &[], MAX_FRAME_SIZE, out)
        .map_err(|e| invalid(e.into()))
}
