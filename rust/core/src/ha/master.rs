//! The master side, RocketMQ's `DefaultHAService`: binds haListenPort, starts the
//! [`AcceptSocketService`] thread that drives every slave connection, and shows the slaves'
//! acks, the events and a snapshot of each connection.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mio::net::TcpListener;

use super::accept::{AcceptSocketService, Shared};
use super::ack::AckTable;
use super::connection::{ConnectionInfo, AWAKE};
use super::epoch::EpochFileCache;
use super::{HaConfig, HaEvents};
use crate::error::{CommitLogError, HaError};
use crate::event_loop::{EventLoop, LoopThread};
use crate::store::MessageStore;
use crate::sync::lock;

pub struct HaMaster {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    thread: LoopThread,
}

impl HaMaster {
    /// The epochs it speaks AutoSwitch HA with (controller mode).
    pub fn epochs(&self) -> Option<&Arc<EpochFileCache>> {
        self.shared.config.epochs.as_ref()
    }

    /// Binds `listen` (port 0 = OS-chosen) and starts the event loop thread.
    pub fn start(
        store: Arc<MessageStore>,
        listen: SocketAddr,
        config: HaConfig,
    ) -> Result<Self, HaError> {
        let io_err = |source: io::Error| HaError::Io {
            addr: listen.to_string(),
            source,
        };
        if let Some(epochs) = &config.epochs {
            // RocketMQ's AutoSwitch HA has no authentication step to put a secret in.
            let why = if config.auth_secret.is_some() {
                "haAuthSecret does not apply to RocketMQ 5's AutoSwitch HA (controller mode): \
                 its slaves do not authenticate; bind haListenAddress to a private address"
            } else if epochs.last_entry().is_none() {
                "an AutoSwitch master needs its epoch (the controller's) recorded first"
            } else {
                ""
            };
            if !why.is_empty() {
                return Err(HaError::Config(why.into()));
            }
        }
        let std_listener = std::net::TcpListener::bind(listen).map_err(io_err)?;
        std_listener.set_nonblocking(true).map_err(io_err)?;
        let local_addr = std_listener.local_addr().map_err(io_err)?;
        let event_loop = EventLoop::new().map_err(io_err)?;
        // A master's slaves ack into the store's GroupTransferService, where its puts wait.
        let group_transfer = store
            .group_transfer()
            .cloned()
            .ok_or(HaError::CommitLog(CommitLogError::ReadOnly))?;
        let shared = Arc::new(Shared {
            store: store.clone(),
            config,
            acks: AckTable::new(group_transfer, Some(store.clone())),
            events: HaEvents::default(),
            connections: Mutex::new(HashMap::new()),
            wake_at: AtomicU64::new(AWAKE),
        });
        let signal = event_loop.signal().clone();
        let listener = TcpListener::from_std(std_listener);
        let (service, connections) =
            AcceptSocketService::new(shared.clone(), event_loop, listener).map_err(io_err)?;
        let (wake, waker) = (shared.clone(), signal.clone());
        store.set_append_listener(Some(Arc::new(move |max_offset| {
            if max_offset >= wake.wake_at.load(Ordering::SeqCst)
                && wake.wake_at.swap(AWAKE, Ordering::SeqCst) != AWAKE
            {
                // The loop sleeps: send from this thread rather than wake it to send. A busy
                // lock is the loop at work (or this thread, completing a put it serves).
                let sent = connections.try_lock().is_ok_and(|mut c| c.transfer_now());
                if !sent {
                    waker.wake();
                }
            }
        })));
        let thread = LoopThread::spawn(&signal, "rocketha-ha-master", move || service.run())
            .map_err(io_err)?;
        Ok(Self {
            shared,
            local_addr,
            thread,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
    pub fn acks(&self) -> &AckTable {
        &self.shared.acks
    }
    pub fn events(&self) -> &HaEvents {
        &self.shared.events
    }

    pub fn connections(&self) -> Vec<ConnectionInfo> {
        let mut all: Vec<_> = lock(&self.shared.connections)
            .values()
            .map(|c| c.snapshot())
            .collect();
        all.sort_by_key(|c| c.id);
        all
    }

    pub fn shutdown(&self) {
        self.thread.stop();
        self.shared.store.set_append_listener(None);
        self.shared.events.wake();
    }
}

impl Drop for HaMaster {
    fn drop(&mut self) {
        self.shutdown();
    }
}
