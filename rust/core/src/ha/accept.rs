//! RocketMQ's `AcceptSocketService`: the master's one event loop thread. It accepts slaves on
//! haListenPort and, where RocketMQ gives every HAConnection a read and a write thread, drives
//! all of them itself: reads offset reports on readable sockets, writes frames while there is
//! room, and sleeps until an event, an append worth sending or the nearest timer.
//!
//! The connections sit behind one lock, which the loop holds except while it sleeps. An append
//! that finds the loop asleep takes the lock and sends its bytes itself ([`Connections::
//! transfer_now`]): waking the loop to send them would add a thread wake-up, the costliest step
//! on a SYNC send's path, between the put and its frame.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Interest, Registry, Token};

use super::ack::AckTable;
use super::connection::{Close, ConnectionStatus, HaConnection, AWAKE, CLOSED_BY_SLAVE};
use super::{HaConfig, HaEvents, HaState};
use crate::event_loop::{EventLoop, WAKER};
use crate::store::MessageStore;
use crate::sync::lock;

const LISTENER: Token = Token(0);

/// What the [`HaMaster`](super::master::HaMaster) handle and this loop share: RocketMQ's
/// `DefaultHAService` state, which its AcceptSocketService and HAConnections work on.
pub(super) struct Shared {
    pub(super) store: Arc<MessageStore>,
    pub(super) config: HaConfig,
    pub(super) acks: AckTable,
    pub(super) events: HaEvents,
    /// Every live connection's status, by id, for
    /// [`HaMaster::connections`](super::master::HaMaster::connections).
    pub(super) connections: Mutex<HashMap<u64, Arc<ConnectionStatus>>>,
    /// Set by the loop before it sleeps: the max offset an append must reach to be worth
    /// waking it for ([`AWAKE`] while it runs). A connection waiting for the ack of its frame
    /// in flight only wants a full batch, so the puts of a group commit cost the loop no
    /// wake-up each, and appends while it runs cost no syscall.
    pub(super) wake_at: AtomicU64,
}

pub(super) struct AcceptSocketService {
    event_loop: EventLoop,
    listener: TcpListener,
    connections: Arc<Mutex<Connections>>,
}

/// Every slave connection and what serving them needs, shared by the loop and the appending
/// threads (see the module's note).
pub(super) struct Connections {
    shared: Arc<Shared>,
    registry: Registry,
    /// By token; a connection's id is its token's number.
    conns: HashMap<Token, HaConnection>,
    next_id: u64,
    /// When the loop's current sleep ends by itself.
    sleep_until: Instant,
}

impl AcceptSocketService {
    /// The loop over `listener`; `connections` is also what an append sends through.
    pub(super) fn new(
        shared: Arc<Shared>,
        event_loop: EventLoop,
        mut listener: TcpListener,
    ) -> io::Result<(Self, Arc<Mutex<Connections>>)> {
        event_loop
            .registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let connections = Arc::new(Mutex::new(Connections {
            shared,
            registry: event_loop.registry().try_clone()?,
            conns: HashMap::new(),
            next_id: 1,
            sleep_until: Instant::now(),
        }));
        let service = Self {
            event_loop,
            listener,
            connections: connections.clone(),
        };
        Ok((service, connections))
    }

    pub(super) fn run(mut self) {
        let mut events = Events::with_capacity(256);
        while !self.event_loop.stopped() {
            let timeout = lock(&self.connections).prepare_to_sleep();
            let polled = self.event_loop.poll(&mut events, timeout);
            let mut c = lock(&self.connections);
            if let Err(e) = polled {
                let reason = format!("epoll failed: {e}");
                c.shared
                    .events
                    .push("master", HaState::Shutdown, reason, true);
                break;
            }
            c.shared.wake_at.store(AWAKE, Ordering::SeqCst);
            for event in events.iter() {
                match event.token() {
                    LISTENER => c.accept(&self.listener),
                    WAKER => {}
                    token => c.on_event(token, event),
                }
            }
            c.service_all();
        }
        lock(&self.connections).close_all();
    }
}

impl Connections {
    /// An append found the loop asleep: sends what the slaves are due now from this thread.
    /// False when the loop must still wake (a connection has more to do than one write, or a
    /// timer of its moved before the loop's sleep ends).
    pub(super) fn transfer_now(&mut self) -> bool {
        self.service_all();
        let until = self.sleep_until;
        if self.prepare_to_sleep().is_zero() || self.sleep_until < until {
            return false;
        }
        // The loop still sleeps until then.
        self.sleep_until = until;
        true
    }

    fn on_event(&mut self, token: Token, event: &mio::event::Event) {
        if event.is_writable() {
            if let Some(c) = self.conns.get_mut(&token) {
                c.write_blocked = false;
            }
        }
        let closed = event.is_read_closed() || event.is_error();
        if event.is_readable() || closed {
            if let Err(reason) = self.on_readable(token, closed) {
                let problem = reason != CLOSED_BY_SLAVE;
                self.close(token, reason, problem);
            }
        }
    }

    fn close_all(&mut self) {
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for t in tokens {
            self.close(t, "master shutting down".into(), false);
        }
    }

    /// Chooses how long to sleep: until the nearest heartbeat, housekeeping or flow-control
    /// deadline, or not at all when a connection has bytes to send.
    fn prepare_to_sleep(&mut self) -> Duration {
        let cfg = &self.shared.config;
        let now = Instant::now();
        let max = self.shared.store.max_offset();
        let mut deadline = now + cfg.housekeeping_interval;
        let mut wake_at = AWAKE;
        for c in self.conns.values() {
            let (d, w) = c.wake_bounds(cfg, max, now);
            deadline = deadline.min(d);
            wake_at = wake_at.min(w);
        }
        self.shared.wake_at.store(wake_at, Ordering::SeqCst);
        // Re-check after announcing the threshold: an append published before it was set did
        // not wake us, so look for its bytes now.
        let max = self.shared.store.max_offset();
        if self.conns.values().any(|c| c.busy(cfg, max, now)) {
            self.shared.wake_at.store(AWAKE, Ordering::SeqCst);
            self.sleep_until = now;
            return Duration::ZERO;
        }
        self.sleep_until = deadline;
        deadline.saturating_duration_since(now)
    }

    fn accept(&mut self, listener: &TcpListener) {
        loop {
            match listener.accept() {
                Ok((mut stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    let id = self.next_id;
                    self.next_id += 1;
                    let token = Token(id as usize);
                    if let Err(e) = self.registry.register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        let reason = format!("register failed: {e}");
                        self.shared
                            .events
                            .push(addr.to_string(), HaState::Shutdown, reason, true);
                        continue;
                    }
                    let auth = self.shared.config.auth_secret.is_some();
                    let epochs = self.shared.config.epochs.clone();
                    let conn = HaConnection::new(id, stream, addr.to_string(), auth, epochs);
                    let status = conn.status().clone();
                    let state = status.snapshot().state;
                    lock(&self.shared.connections).insert(id, status);
                    self.shared
                        .events
                        .push(addr.to_string(), state, "slave connected", false);
                    self.conns.insert(token, conn);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of file descriptors and the like: report and retry on the next event.
                    let reason = format!("accept failed: {e}");
                    self.shared
                        .events
                        .push("master", HaState::Ready, reason, true);
                    return;
                }
            }
        }
    }

    fn on_readable(&mut self, token: Token, closed: bool) -> Result<(), Close> {
        let secret = self.shared.config.auth_secret.as_deref();
        let Some(c) = self.conns.get_mut(&token) else {
            return Ok(());
        };
        let latest = c.read(secret, closed)?;
        if c.authenticated() {
            // One slave, one connection: an older connection of the same slave is stale.
            let slave_key = c.slave_key;
            let stale: Vec<Token> = self
                .conns
                .iter()
                .filter(|(t, o)| **t != token && o.slave_key == slave_key)
                .map(|(t, _)| *t)
                .collect();
            for t in stale {
                let reason = "replaced by a newer connection of the same slave";
                self.close(t, reason.into(), false);
            }
        }
        if let Some(offset) = latest {
            self.on_report(token, offset)?;
        }
        Ok(())
    }

    fn on_report(&mut self, token: Token, offset: u64) -> Result<(), Close> {
        let Some(c) = self.conns.get_mut(&token) else {
            return Ok(());
        };
        let sync_from_last_file = self.shared.config.sync_from_last_file;
        if let Some(start) = c.on_report(offset, &self.shared.store, sync_from_last_file)? {
            self.shared.events.push(
                c.addr(),
                HaState::Transfer,
                format!("transfer starts at offset {start} (slave reported {offset})"),
                false,
            );
        }
        // After the connection's own record of the ack: a put woken by it may read that at once.
        self.shared.acks.update(c.id(), c.slave_key, offset);
        Ok(())
    }

    fn service_all(&mut self) {
        let now = Instant::now();
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for token in tokens {
            let Some(c) = self.conns.get_mut(&token) else {
                continue;
            };
            let done = match c.expired(&self.shared.config, now) {
                Some(reason) => Err(reason),
                None => c.write(&self.shared.store, &self.shared.config, now),
            };
            if let Err(reason) = done {
                self.close(token, reason, true);
            }
        }
    }

    fn close(&mut self, token: Token, reason: Close, problem: bool) {
        if let Some(mut c) = self.conns.remove(&token) {
            let _ = self.registry.deregister(&mut c.stream);
            self.shared.acks.remove(c.id());
            lock(&self.shared.connections).remove(&c.id());
            self.shared
                .events
                .push(c.addr(), HaState::Shutdown, reason, problem);
        }
    }
}
