//! The multiplexed remoting client against the real RemotingServer over loopback: many
//! requests in flight on one connection, answered out of order, a timeout that fails one
//! request among many, a server that goes away failing every pending request, reconnects, and
//! a request that never left the process reported as not sent.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::remoting::codes::response_code;
use crate::remoting::{
    client::InvokeResult, ClientConfig, ClientError, NettyRemotingClient, RemotingCommand,
    RemotingServer, RequestContext, RequestProcessor, Responder, ServerConfig,
};

const ECHO: i32 = 1000;
const HOLD: i32 = 1001;
const TIMEOUT: Duration = Duration::from_secs(10);

/// A held request's body and the way to answer it.
type Held = (Vec<u8>, Responder);

/// Echoes at once, or holds (hands the request's body and its responder to the test).
struct Processor {
    held: Mutex<Sender<Held>>,
    connections: Mutex<HashSet<u64>>,
}

impl RequestProcessor for Processor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        self.connections.lock().unwrap().insert(ctx.connection_id());
        match request.code {
            ECHO => Some(answer(&request.body)),
            HOLD => {
                let held = (request.body, ctx.responder());
                let _ = self.held.lock().unwrap().send(held);
                None
            }
            _ => None,
        }
    }
}

fn answer(body: &[u8]) -> RemotingCommand {
    let mut response = RemotingCommand::request(0, 0);
    response.code = response_code::SUCCESS;
    response.body = body.to_vec();
    response
}

struct Fixture {
    server: RemotingServer,
    processor: Arc<Processor>,
    held: Receiver<Held>,
    addr: String,
}

fn serve(listen: SocketAddr, config: ServerConfig) -> Fixture {
    let (tx, held) = channel();
    let processor = Arc::new(Processor {
        held: Mutex::new(tx),
        connections: Mutex::default(),
    });
    let server = RemotingServer::start(listen, processor.clone(), config).unwrap();
    let addr = server.local_addr().to_string();
    Fixture {
        server,
        processor,
        held,
        addr,
    }
}

fn start() -> Fixture {
    serve("127.0.0.1:0".parse().unwrap(), ServerConfig::default())
}

fn client() -> NettyRemotingClient {
    NettyRemotingClient::start(ClientConfig::default()).unwrap()
}

fn request(code: i32, body: &[u8]) -> RemotingCommand {
    let mut r = RemotingCommand::request(code, 0);
    r.body = body.to_vec();
    r
}

/// Sends `HOLD` requests with bodies `0..n` (as text), each reporting `(i, result)` to the
/// returned channel; returns once the server holds all of them.
fn hold_many(
    f: &Fixture,
    c: &NettyRemotingClient,
    n: usize,
    timeout_of: impl Fn(usize) -> Duration,
) -> (Receiver<(usize, InvokeResult)>, Vec<Held>) {
    let (tx, rx) = channel();
    for i in 0..n {
        let tx = tx.clone();
        let body = i.to_string().into_bytes();
        c.invoke_async(&f.addr, request(HOLD, &body), timeout_of(i), move |r| {
            let _ = tx.send((i, r));
        })
        .unwrap();
    }
    let held = (0..n)
        .map(|_| f.held.recv_timeout(TIMEOUT).unwrap())
        .collect();
    (rx, held)
}

#[test]
fn many_threads_share_one_connection() {
    let f = start();
    let c = Arc::new(client());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (c, addr) = (c.clone(), f.addr.clone());
            std::thread::spawn(move || {
                for i in 0..50 {
                    let body = format!("{t}-{i}").into_bytes();
                    let response = c.invoke_sync(&addr, request(ECHO, &body), TIMEOUT).unwrap();
                    assert_eq!(response.body, body);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(f.processor.connections.lock().unwrap().len(), 1);
}

#[test]
fn responses_out_of_order_reach_their_own_requests() {
    let f = start();
    let c = client();
    let (done, mut held) = hold_many(&f, &c, 100, |_| TIMEOUT);
    held.reverse();
    for (body, responder) in held {
        responder.send(answer(&body));
    }
    let mut seen = HashSet::new();
    for _ in 0..100 {
        let (i, result) = done.recv_timeout(TIMEOUT).unwrap();
        assert_eq!(result.unwrap().body, i.to_string().into_bytes());
        seen.insert(i);
    }
    assert_eq!(seen.len(), 100);
    assert_eq!(f.processor.connections.lock().unwrap().len(), 1);
}

#[test]
fn a_timeout_fails_only_its_own_request() {
    let f = start();
    let c = client();
    let short = Duration::from_millis(100);
    let (done, held) = hold_many(&f, &c, 5, |i| if i == 2 { short } else { TIMEOUT });
    let (i, result) = done.recv_timeout(TIMEOUT).unwrap();
    assert_eq!(i, 2);
    let err = result.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    assert!(err.may_have_arrived(), "it was written: {err}");
    // The late answer is skipped; the others still get theirs, on the same connection.
    for (body, responder) in held {
        responder.send(answer(&body));
    }
    let mut rest: Vec<usize> = (0..4)
        .map(|_| {
            let (i, r) = done.recv_timeout(TIMEOUT).unwrap();
            assert_eq!(r.unwrap().body, i.to_string().into_bytes());
            i
        })
        .collect();
    rest.sort();
    assert_eq!(rest, vec![0, 1, 3, 4]);
    assert!(c.invoke_sync(&f.addr, request(ECHO, b"x"), TIMEOUT).is_ok());
    assert_eq!(f.processor.connections.lock().unwrap().len(), 1);
}

#[test]
fn a_server_that_goes_away_fails_every_pending_request_and_the_next_call_reconnects() {
    let f = start();
    let listen = f.server.local_addr();
    let c = client();
    let (done, _held) = hold_many(&f, &c, 10, |_| TIMEOUT);
    f.server.shutdown();
    for _ in 0..10 {
        let (_, result) = done.recv_timeout(TIMEOUT).unwrap();
        let err = result.unwrap_err();
        assert!(matches!(err, ClientError::Closed { .. }), "{err}");
        assert!(err.may_have_arrived(), "{err}");
    }
    drop(f);
    let again = serve(listen, ServerConfig::default());
    let response = c.invoke_sync(&again.addr, request(ECHO, b"back"), TIMEOUT);
    assert_eq!(response.unwrap().body, b"back");
}

#[test]
fn an_idle_close_by_the_server_fails_the_pending_and_the_next_call_reconnects() {
    let config = ServerConfig {
        idle_timeout: Some(Duration::from_millis(200)),
        ..ServerConfig::default()
    };
    let f = serve("127.0.0.1:0".parse().unwrap(), config);
    let c = client();
    let (done, _held) = hold_many(&f, &c, 3, |_| TIMEOUT);
    for _ in 0..3 {
        let err = done.recv_timeout(TIMEOUT).unwrap().1.unwrap_err();
        assert!(matches!(err, ClientError::Closed { .. }), "{err}");
    }
    assert!(c.invoke_sync(&f.addr, request(ECHO, b"y"), TIMEOUT).is_ok());
    assert_eq!(f.processor.connections.lock().unwrap().len(), 2);
}

#[test]
fn a_request_still_queued_at_its_deadline_is_reported_not_sent() {
    // A peer that accepts and never reads: the socket buffers fill, later requests stay queued.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let c = client();
    let (tx, rx) = channel();
    let big = vec![7u8; 4 << 20];
    for i in 0..16 {
        let tx = tx.clone();
        c.invoke_async(
            &addr,
            request(ECHO, &big),
            Duration::from_millis(300),
            move |r| {
                let _ = tx.send((i, r));
            },
        )
        .unwrap();
    }
    let (_peer, _) = listener.accept().unwrap();
    let mut results: Vec<(usize, ClientError)> = (0..16)
        .map(|_| {
            let (i, r) = rx.recv_timeout(TIMEOUT).unwrap();
            (i, r.unwrap_err())
        })
        .collect();
    results.sort_by_key(|(i, _)| *i);
    let (first, last) = (&results[0].1, &results[15].1);
    assert!(
        matches!(first, ClientError::Timeout { .. }),
        "partly written: {first}"
    );
    assert!(
        matches!(last, ClientError::NotSent { .. }) && !last.may_have_arrived(),
        "{last}"
    );
}

#[test]
fn calls_after_shutdown_fail_at_once() {
    let f = start();
    let c = client();
    let (done, _held) = hold_many(&f, &c, 2, |_| TIMEOUT);
    c.shutdown();
    for _ in 0..2 {
        let err = done.recv_timeout(TIMEOUT).unwrap().1.unwrap_err();
        assert!(matches!(err, ClientError::Shutdown), "{err}");
    }
    let err = c
        .invoke_sync(&f.addr, request(ECHO, b"z"), TIMEOUT)
        .unwrap_err();
    assert!(matches!(err, ClientError::Shutdown), "{err}");
}

#[test]
fn a_bad_address_names_itself() {
    let c = client();
    let err = c
        .invoke_sync("no-port-here", request(ECHO, b""), TIMEOUT)
        .unwrap_err();
    assert!(matches!(err, ClientError::BadAddress { .. }), "{err}");
    assert!(err.to_string().contains("no-port-here"), "{err}");
    assert!(!err.may_have_arrived());
}
