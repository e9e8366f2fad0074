//! The processor table in front of a real server: codes routed to their processor on the loop
//! or on a worker, the hook refusing before any processor runs, unregistered codes answered
//! REQUEST_CODE_NOT_SUPPORTED, and a closed connection told to every processor once.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

use crate::remoting::codes::response_code;
use crate::remoting::{
    Executor, ProcessorTable, RemotingClient, RemotingCommand, RemotingServer, RequestContext,
    RequestProcessor, ServerConfig, ServerRpcHook, Worker,
};

use super::fixture::TIMEOUT;

const ON_LOOP: i32 = 2000;
const ON_WORKER: i32 = 2001;
const ONEWAY_ON_WORKER: i32 = 2002;
const REFUSED: i32 = 2003;
const PANIC_ON_WORKER: i32 = 2004;

/// Answers with the name of the thread it ran on; tells `closed` of closed connections.
struct Named {
    closed: Mutex<Sender<u64>>,
    ran_oneway: Mutex<Sender<i32>>,
}

impl RequestProcessor for Named {
    fn process(&self, request: RemotingCommand, _ctx: &RequestContext) -> Option<RemotingCommand> {
        if request.code == PANIC_ON_WORKER {
            panic!("processor bug");
        }
        if request.is_oneway() {
            let _ = self.ran_oneway.lock().unwrap().send(request.code);
        }
        let mut r = RemotingCommand::response_to(&request, response_code::SUCCESS, None);
        r.body = std::thread::current()
            .name()
            .unwrap_or_default()
            .as_bytes()
            .to_vec();
        Some(r)
    }

    fn on_close(&self, connection_id: u64, _remote: SocketAddr) {
        let _ = self.closed.lock().unwrap().send(connection_id);
    }
}

struct RefuseOne;

impl ServerRpcHook for RefuseOne {
    fn before_request(&self, request: &RemotingCommand, _remote: SocketAddr) -> Result<(), String> {
        match request.code {
            REFUSED => Err("no access to code 2003".into()),
            _ => Ok(()),
        }
    }
}

/// `table` served on an OS-chosen port.
fn serve(table: ProcessorTable) -> (Arc<ProcessorTable>, RemotingServer) {
    let table = Arc::new(table);
    let server = RemotingServer::start(
        "127.0.0.1:0".parse().unwrap(),
        table.clone(),
        ServerConfig::default(),
    )
    .unwrap();
    (table, server)
}

#[test]
fn each_code_runs_where_it_is_registered_behind_the_hook() {
    let (closed_tx, closed) = channel();
    let (oneway_tx, oneway) = channel();
    let named = Arc::new(Named {
        closed: Mutex::new(closed_tx),
        ran_oneway: Mutex::new(oneway_tx),
    });
    let worker = Executor::Worker(Worker::start("test-worker").unwrap());
    let mut table = ProcessorTable::default();
    table.register(&[ON_LOOP, REFUSED], named.clone(), Executor::EventLoop);
    table.register(
        &[ON_WORKER, ONEWAY_ON_WORKER, PANIC_ON_WORKER],
        named,
        worker,
    );
    table.set_hook(Arc::new(RefuseOne));
    assert_eq!(
        table.codes(),
        BTreeSet::from([
            ON_LOOP,
            ON_WORKER,
            ONEWAY_ON_WORKER,
            REFUSED,
            PANIC_ON_WORKER
        ])
    );
    let (table, server) = serve(table);
    let mut c = RemotingClient::connect(server.local_addr(), TIMEOUT).unwrap();
    let ask = |c: &mut RemotingClient, code| {
        c.invoke(RemotingCommand::request(code, 0), TIMEOUT)
            .unwrap()
    };

    let on_loop = ask(&mut c, ON_LOOP);
    assert_eq!(on_loop.code, response_code::SUCCESS);
    assert_ne!(on_loop.body, b"rocketha-test-worker");
    let on_worker = ask(&mut c, ON_WORKER);
    assert_eq!(on_worker.code, response_code::SUCCESS);
    assert_eq!(on_worker.body, b"rocketha-test-worker");

    let refused = ask(&mut c, REFUSED);
    assert_eq!(refused.code, response_code::NO_PERMISSION);
    assert_eq!(refused.remark.as_deref(), Some("no access to code 2003"));

    let unknown = ask(&mut c, 2999);
    assert_eq!(unknown.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        unknown.remark.as_deref(),
        Some(" request type 2999 not supported")
    );

    // A panic on the worker is answered, and the worker goes on.
    let panicked = ask(&mut c, PANIC_ON_WORKER);
    assert_eq!(panicked.code, response_code::SYSTEM_ERROR);
    assert!(panicked.remark.unwrap().contains("panicked"));

    // A oneway request runs on the worker and is not answered: the next answer on the
    // connection is the next request's.
    c.invoke_oneway(RemotingCommand::request(ONEWAY_ON_WORKER, 0), TIMEOUT)
        .unwrap();
    assert_eq!(oneway.recv_timeout(TIMEOUT).unwrap(), ONEWAY_ON_WORKER);
    assert_eq!(ask(&mut c, ON_WORKER).body, b"rocketha-test-worker");

    // The same processor under two executors hears of a close once.
    drop(c);
    closed.recv_timeout(TIMEOUT).unwrap();
    server.shutdown();
    table.shutdown();
    assert!(closed.try_recv().is_err(), "on_close ran twice");
}

/// Runs one request at a time behind `gate`, recording whose it ran.
struct Gated {
    gate: Mutex<()>,
    ran: Mutex<Vec<String>>,
}

impl RequestProcessor for Gated {
    fn process(&self, request: RemotingCommand, _ctx: &RequestContext) -> Option<RemotingCommand> {
        let _open = self.gate.lock().unwrap();
        let who = request.ext_fields.get("who").cloned().unwrap_or_default();
        self.ran.lock().unwrap().push(who);
        Some(RemotingCommand::response_to(
            &request,
            response_code::SUCCESS,
            None,
        ))
    }
}

#[test]
fn a_connection_that_floods_a_worker_waits_behind_itself_and_is_told_busy() {
    use crate::remoting::{ClientConfig, NettyRemotingClient};
    let gated = Arc::new(Gated {
        gate: Mutex::new(()),
        ran: Mutex::new(Vec::new()),
    });
    let (closed_tx, _closed) = channel();
    let (oneway_tx, _oneway) = channel();
    let mut table = ProcessorTable::default();
    let worker = Executor::Worker(Worker::start("test-flooded").unwrap());
    table.register(&[ON_WORKER], gated.clone(), worker);
    let named = Named {
        closed: Mutex::new(closed_tx),
        ran_oneway: Mutex::new(oneway_tx),
    };
    table.register(&[ON_LOOP], Arc::new(named), Executor::EventLoop);
    let (table, server) = serve(table);
    let addr = server.local_addr().to_string();
    let request = |who: &str, code| {
        let mut r = RemotingCommand::request(code, 0);
        r.ext_fields.insert("who".into(), who.into());
        r
    };
    let flooder = NettyRemotingClient::start(ClientConfig::default()).unwrap();
    let polite = NettyRemotingClient::start(ClientConfig::default()).unwrap();
    let (answers_tx, answers) = channel();
    let held = gated.gate.lock().unwrap();
    const FLOOD: usize = 3000;
    for _ in 0..FLOOD {
        let tx = answers_tx.clone();
        flooder
            .invoke_async(&addr, request("flood", ON_WORKER), TIMEOUT, move |r| {
                let _ = tx.send(r.map(|r| r.code));
            })
            .unwrap();
    }
    // The flood past what the worker holds for one connection is refused at once.
    let busy = (0..FLOOD - 1025)
        .map(|_| answers.recv_timeout(TIMEOUT).unwrap().unwrap())
        .filter(|&code| code == response_code::SYSTEM_BUSY)
        .count();
    assert_eq!(busy, FLOOD - 1025);
    let (polite_tx, polite_answer) = channel();
    polite
        .invoke_async(&addr, request("polite", ON_WORKER), TIMEOUT, move |r| {
            let _ = polite_tx.send(r.map(|r| r.code));
        })
        .unwrap();
    // Answered by the loop after it queued the request before it on the same connection.
    polite
        .invoke_sync(&addr, request("polite", ON_LOOP), TIMEOUT)
        .unwrap();
    drop(held);
    assert_eq!(
        polite_answer.recv_timeout(TIMEOUT).unwrap().unwrap(),
        response_code::SUCCESS
    );
    let ran = gated.ran.lock().unwrap().clone();
    let turn = ran.iter().position(|w| w == "polite").unwrap();
    // One flooding request was running, and the flood had one more turn before it at most.
    assert!(
        turn <= 2,
        "the polite request ran after {turn} of the flood"
    );
    server.shutdown();
    table.shutdown();
}
