//! The remoting tests' echoing server and its helpers, shared by the plain and the TLS tests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::remoting::codes::{response_code, SerializeType};
use crate::remoting::{
    not_supported, RemotingClient, RemotingCommand, RemotingServer, RequestContext,
    RequestProcessor, Responder, ServerConfig, ServerEvent, ServerEventKind,
};

pub const ECHO: i32 = 1000;
pub const DEFER: i32 = 1001;
pub const PANIC: i32 = 1002;
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Echoes, defers (hands the responder to the test), panics, or says not supported.
pub struct TestProcessor {
    pub deferred: Mutex<Sender<(u64, Responder)>>,
    pub closed: Mutex<Vec<u64>>,
}

impl RequestProcessor for TestProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        match request.code {
            ECHO => {
                let mut response =
                    RemotingCommand::response_to(&request, response_code::SUCCESS, None);
                response.ext_fields = request.ext_fields.clone();
                response.body = request.body;
                Some(response)
            }
            DEFER => {
                let _ = self
                    .deferred
                    .lock()
                    .unwrap()
                    .send((ctx.connection_id(), ctx.responder()));
                None
            }
            PANIC => panic!("processor bug"),
            _ => Some(not_supported(&request)),
        }
    }

    fn on_close(&self, connection_id: u64, _remote: SocketAddr) {
        self.closed.lock().unwrap().push(connection_id);
    }
}

pub struct Fixture {
    pub server: RemotingServer,
    pub processor: Arc<TestProcessor>,
    pub deferred: Receiver<(u64, Responder)>,
}

pub fn start(config: ServerConfig) -> Fixture {
    let (tx, rx) = channel();
    let processor = Arc::new(TestProcessor {
        deferred: Mutex::new(tx),
        closed: Mutex::new(Vec::new()),
    });
    let server =
        RemotingServer::start("127.0.0.1:0".parse().unwrap(), processor.clone(), config).unwrap();
    Fixture {
        server,
        processor,
        deferred: rx,
    }
}

pub fn client(server: &RemotingServer) -> RemotingClient {
    RemotingClient::connect(server.local_addr(), TIMEOUT).unwrap()
}

pub fn echo(body: &[u8], serialize_type: SerializeType) -> RemotingCommand {
    let mut request = RemotingCommand::request(ECHO, 0);
    request.serialize_type = serialize_type;
    request.ext_fields.insert("k".into(), "v".into());
    request.body = body.to_vec();
    request
}

/// Drains events until one matches, failing after `TIMEOUT`.
pub fn wait_event(
    server: &RemotingServer,
    what: &str,
    pred: impl Fn(&ServerEvent) -> bool,
) -> ServerEvent {
    let deadline = Instant::now() + TIMEOUT;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        for event in server.events().drain(Duration::from_millis(100)) {
            if pred(&event) {
                return event;
            }
            seen.push(event);
        }
    }
    panic!("no event {what}; saw {seen:?}");
}

pub fn closed_with(server: &RemotingServer, reason: &str) -> ServerEvent {
    wait_event(server, reason, |e| {
        e.kind == ServerEventKind::Closed && e.reason.contains(reason)
    })
}

/// Reads from a raw socket until the peer closes it, failing after `TIMEOUT`.
pub fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => got,
        // A reset (unread bytes in the server's buffer) is a close too.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => got,
        Err(e) => panic!("connection not closed: {e}"),
    }
}

/// Pipelines 64 KiB echo requests into `hog` without reading an answer, until the server
/// closes it. Kernel buffers take a few MiB before the server's queue grows; 256 MiB is far
/// beyond.
pub fn send_without_reading(hog: &mut impl Write) {
    let request = echo(&[1u8; 64 * 1024], SerializeType::Json)
        .encode(1 << 20)
        .unwrap();
    let mut wrote = 0usize;
    while wrote < 256 << 20 && hog.write_all(&request).is_ok() {
        wrote += request.len();
    }
}
