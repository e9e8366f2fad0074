//! The skeleton every network loop runs on: one thread sleeping in a mio `Poll`, a `Waker` that
//! interrupts it (bytes to send, a response from another thread, a new master address,
//! shutdown) and a stop flag it checks after every wake-up. The HA master's AcceptSocketService,
//! the slave's HAClient and the remoting server differ only in what they do between two polls.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::{Events, Poll, Registry, Token, Waker};

use crate::sync::lock;

/// The waker's token; sockets take tokens from 0 up.
pub(crate) const WAKER: Token = Token(usize::MAX);

/// What a loop's thread and its handle share.
pub(crate) struct Signal {
    stop: AtomicBool,
    waker: Waker,
}

impl Signal {
    /// Interrupts the loop's poll; harmless when it is not sleeping.
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// The thread's side: the poll it sleeps in.
pub(crate) struct EventLoop {
    poll: Poll,
    signal: Arc<Signal>,
}

impl EventLoop {
    pub(crate) fn new() -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        Ok(Self {
            poll,
            signal: Arc::new(Signal {
                stop: AtomicBool::new(false),
                waker,
            }),
        })
    }

    pub(crate) fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }

    pub(crate) fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    pub(crate) fn stopped(&self) -> bool {
        self.signal.stopped()
    }

    /// Sleeps until a socket event, a wake-up or `timeout`; an interrupted sleep is no error.
    pub(crate) fn poll(&mut self, events: &mut Events, timeout: Duration) -> io::Result<()> {
        match self.poll.poll(events, Some(timeout)) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            done => done,
        }
    }
}

/// The handle's side of a running loop.
pub(crate) struct LoopThread {
    signal: Arc<Signal>,
    /// Taken by the first `stop`: shutdown and then drop join the thread once.
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LoopThread {
    /// Runs `body`, which owns the loop `signal` belongs to, on a thread of its own.
    pub(crate) fn spawn(
        signal: &Arc<Signal>,
        name: &str,
        body: impl FnOnce() + Send + 'static,
    ) -> io::Result<Self> {
        let thread = std::thread::Builder::new().name(name.into()).spawn(body)?;
        Ok(Self {
            signal: signal.clone(),
            thread: Mutex::new(Some(thread)),
        })
    }

    pub(crate) fn signal(&self) -> &Signal {
        &self.signal
    }

    /// Raises the stop flag, interrupts the poll and joins the thread. Safe to call again once
    /// stopped.
    pub(crate) fn stop(&self) {
        self.signal.stop.store(true, Ordering::SeqCst);
        self.signal.wake();
        let thread = lock(&self.thread).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}
