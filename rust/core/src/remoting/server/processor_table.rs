//! RocketMQ's `registerProcessor(code, processor, executor)`: a server's request codes, each
//! mapped to the processor that answers it and the thread that runs it, with the server-side
//! RPC hook (the ACL check) and the answer to a code nobody registered in front of the table.
//!
//! A new request code is one registration line and, for a new concern, one processor file. The
//! broker and the name server build their tables at start; after that the table is read-only,
//! so a lookup takes no lock.
//!
//! Where RocketMQ gives each processor a thread pool, rocketha runs most on the event loop:
//! they answer from memory-mapped files and in-memory tables without blocking, and defer what
//! must wait (a SYNC_MASTER send, a held pull) to a [`Responder`]. A processor whose work can
//! take long (an operator's query over the index files, a table of 100,000 topics encoded as
//! JSON) runs on a [`Worker`] of its own, so the loop keeps serving sends and pulls meanwhile.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::processor::{not_supported, process_caught, RequestProcessor};
use super::responder::RequestContext;
use crate::remoting::codes::response_code;
use crate::remoting::command::RemotingCommand;
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// The server side of RocketMQ's `RPCHook.doBeforeRequest`: runs before any processor, so a
/// refused request changes nothing; the refusal is answered NO_PERMISSION with its reason.
pub(crate) trait ServerRpcHook: Send + Sync {
    fn before_request(&self, request: &RemotingCommand, remote: SocketAddr) -> Result<(), String>;
}

/// Which thread runs a registered processor.
#[derive(Clone)]
pub(crate) enum Executor {
    /// The event loop's own thread: the processor must not block.
    EventLoop,
    /// A named thread of its own, in arrival order (RocketMQ's single-purpose executors).
    Worker(Arc<Worker>),
}

struct Registered {
    processor: Arc<dyn RequestProcessor>,
    executor: Executor,
}

/// The code -> processor table, itself the server's one [`RequestProcessor`].
#[derive(Default)]
pub(crate) struct ProcessorTable {
    by_code: HashMap<i32, Registered>,
    /// Each processor once, in registration order, for [`RequestProcessor::on_close`].
    processors: Vec<Arc<dyn RequestProcessor>>,
    workers: Vec<Arc<Worker>>,
    hook: Option<Arc<dyn ServerRpcHook>>,
}

impl ProcessorTable {
    /// `codes` are answered by `processor` on `executor`. A code registered twice is a bug in
    /// the server's start-up, caught by its tests.
    pub(crate) fn register(
        &mut self,
        codes: &[i32],
        processor: Arc<dyn RequestProcessor>,
        executor: Executor,
    ) {
        for &code in codes {
            let previous = self.by_code.insert(
                code,
                Registered {
                    processor: processor.clone(),
                    executor: executor.clone(),
                },
            );
            debug_assert!(previous.is_none(), "request code {code} registered twice");
        }
        if !self.processors.iter().any(|p| Arc::ptr_eq(p, &processor)) {
            self.processors.push(processor);
        }
        if let Executor::Worker(worker) = executor {
            if !self.workers.iter().any(|w| Arc::ptr_eq(w, &worker)) {
                self.workers.push(worker);
            }
        }
    }

    /// Every request first passes `hook`.
    pub(crate) fn set_hook(&mut self, hook: Arc<dyn ServerRpcHook>) {
        self.hook = Some(hook);
    }

    /// The registered codes, for the tests that check what a server serves.
    #[cfg(test)]
    pub(crate) fn codes(&self) -> std::collections::BTreeSet<i32> {
        self.by_code.keys().copied().collect()
    }

    /// Ends the workers once what they hold is answered; the server has stopped reading.
    pub(crate) fn shutdown(&self) {
        for worker in &self.workers {
            worker.thread.shutdown();
        }
    }
}

impl RequestProcessor for ProcessorTable {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        if let Some(hook) = &self.hook {
            if let Err(why) = hook.before_request(&request, ctx.remote()) {
                return Some(RemotingCommand::response_to(
                    &request,
                    response_code::NO_PERMISSION,
                    Some(why),
                ));
            }
        }
        let Some(registered) = self.by_code.get(&request.code) else {
            return Some(not_supported(&request));
        };
        match &registered.executor {
            Executor::EventLoop => registered.processor.process(request, ctx),
            Executor::Worker(worker) => {
                worker.submit(registered.processor.clone(), request, ctx.clone())
            }
        }
    }

    fn on_close(&self, connection_id: u64, remote: SocketAddr) {
        for processor in &self.processors {
            processor.on_close(connection_id, remote);
        }
    }
}

/// A request waiting for its worker.
struct Job {
    processor: Arc<dyn RequestProcessor>,
    request: RemotingCommand,
    ctx: RequestContext,
}

/// Requests a worker holds for one connection at most; past it a request is answered
/// SYSTEM_BUSY at once, as RocketMQ's executors reject past their queue's capacity. A client
/// that pipelines thousands of slow requests and never reads the answers costs its own
/// connection, not the worker's other clients.
const MAX_PENDING_PER_CONNECTION: usize = 1024;

/// The requests a worker holds, by connection, taken in turn: one connection's burst waits
/// behind itself, while every other connection's next request is at most one request away.
#[derive(Default)]
struct Pending {
    /// Connections with requests waiting, each once, in turn order.
    turns: VecDeque<u64>,
    by_connection: HashMap<u64, VecDeque<Job>>,
}

impl Pending {
    /// Whether `connection` may queue another request.
    fn has_room(&self, connection: u64) -> bool {
        self.by_connection
            .get(&connection)
            .is_none_or(|queued| queued.len() < MAX_PENDING_PER_CONNECTION)
    }

    fn push(&mut self, job: Job) {
        let id = job.ctx.connection_id();
        let queued = self.by_connection.entry(id).or_default();
        if queued.is_empty() {
            self.turns.push_back(id);
        }
        queued.push_back(job);
    }

    /// The next connection's oldest request.
    fn pop(&mut self) -> Option<Job> {
        let id = self.turns.pop_front()?;
        let queued = self.by_connection.get_mut(&id)?;
        let job = queued.pop_front();
        if queued.is_empty() {
            self.by_connection.remove(&id);
        } else {
            self.turns.push_back(id);
        }
        job
    }
}

/// A thread that runs the requests handed to it, each connection's in order, and sends each
/// answer through the request's [`Responder`](super::Responder), as the loop would have.
pub(crate) struct Worker {
    name: &'static str,
    thread: ServiceThread,
    /// The loop pushes, the worker takes.
    pending: Arc<Mutex<Pending>>,
}

impl Worker {
    /// Starts the thread `rocketha-<name>`.
    pub(crate) fn start(name: &'static str) -> std::io::Result<Arc<Self>> {
        let worker = Arc::new(Self {
            name,
            thread: ServiceThread::new(name),
            pending: Arc::default(),
        });
        let pending = worker.pending.clone();
        worker
            .thread
            .start(move |waiter| Self::run(&pending, &waiter))?;
        Ok(worker)
    }

    /// Queues the request; SYSTEM_BUSY now when its connection has too many waiting.
    fn submit(
        &self,
        processor: Arc<dyn RequestProcessor>,
        request: RemotingCommand,
        ctx: RequestContext,
    ) -> Option<RemotingCommand> {
        let mut pending = lock(&self.pending);
        if !pending.has_room(ctx.connection_id()) {
            drop(pending);
            let remark = format!(
                "[REJECTREQUEST]system busy: {MAX_PENDING_PER_CONNECTION} requests of this \
                 connection already wait for the broker's {} thread",
                self.name
            );
            return Some(RemotingCommand::response_to(
                &request,
                response_code::SYSTEM_BUSY,
                Some(remark),
            ));
        }
        pending.push(Job {
            processor,
            request,
            ctx,
        });
        drop(pending);
        self.thread.wakeup();
        None
    }

    fn run(pending: &Mutex<Pending>, waiter: &ServiceWaiter) {
        loop {
            Self::drain(pending);
            if waiter.wait_for_running(None) == Woke::Stopped {
                break;
            }
        }
        // Stopped: what was queued before the server closed is still answered.
        Self::drain(pending);
    }

    /// Answers what is queued, taking one job at a time and answering it without the lock:
    /// the loop queues more meanwhile, and must never wait for a job to run.
    fn drain(pending: &Mutex<Pending>) {
        loop {
            let next = lock(pending).pop();
            let Some(job) = next else {
                return;
            };
            Self::answer(job);
        }
    }

    fn answer(job: Job) {
        let Job {
            processor,
            request,
            ctx,
        } = job;
        // Its client is gone: nobody would read the answer.
        if ctx.responder().is_closed() {
            return;
        }
        let oneway = request.is_oneway();
        let response = process_caught(&*processor, request, &ctx);
        if let Some(response) = response.filter(|_| !oneway) {
            ctx.responder().send(response);
        }
    }
}
