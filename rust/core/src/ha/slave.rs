//! The slave side, RocketMQ's `HAClient`: connect, report the local max offset, append every
//! frame the master pushes, report again; READY -> TRANSFER -> (closed, backoff) -> READY ...
//! until SHUTDOWN.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};

use super::auth::{self, CHALLENGE_LEN, MAC_LEN};
use super::dispatch::{FrameDispatcher, READ_BUFFER_SIZE};
use super::frame;
use super::{HaConfig, HaEvents, HaState};
use crate::error::{CommitLogError, FrameError, HaError};
use crate::store::MessageStore;

const SOCKET: Token = Token(0);
const WAKER: Token = Token(1);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

pub fn resolve(addr: &str) -> Result<SocketAddr, HaError> {
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| HaError::BadAddress(addr.to_owned()))
}

/// Counters of the client, for status and benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClientStats {
    pub bytes_received: u64,
    pub frames: u64,
    pub buffer_swaps: u64,
    pub connects: u64,
}

struct Shared {
    store: Arc<MessageStore>,
    config: HaConfig,
    slave_id: u64,
    master: Mutex<Option<String>>,
    /// Bumped by `update_master_address` so the loop drops its current connection.
    master_version: AtomicU64,
    state: Mutex<HaState>,
    stats: Mutex<ClientStats>,
    events: HaEvents,
    stop: AtomicBool,
    waker: Waker,
}

pub struct HaClient {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl HaClient {
    /// Starts the client thread; `master` may be `None` until an address is known.
    pub fn start(
        store: Arc<MessageStore>,
        master: Option<String>,
        config: HaConfig,
        slave_id: u64,
    ) -> Result<Self, HaError> {
        let poll = Poll::new().map_err(|source| HaError::Io {
            addr: "slave".into(),
            source,
        })?;
        let waker = Waker::new(poll.registry(), WAKER).map_err(|source| HaError::Io {
            addr: "slave".into(),
            source,
        })?;
        if let Some(m) = &master {
            resolve(m)?;
        }
        let shared = Arc::new(Shared {
            store,
            config,
            slave_id,
            master: Mutex::new(master),
            master_version: AtomicU64::new(0),
            state: Mutex::new(HaState::Ready),
            stats: Mutex::new(ClientStats::default()),
            events: HaEvents::default(),
            stop: AtomicBool::new(false),
            waker,
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rocketha-ha-client".into())
            .spawn(move || {
                Client {
                    shared: worker,
                    poll,
                }
                .run()
            })
            .map_err(|source| HaError::Io {
                addr: "slave".into(),
                source,
            })?;
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn update_master_address(&self, addr: Option<String>) -> Result<(), HaError> {
        if let Some(a) = &addr {
            resolve(a)?;
        }
        *self.shared.master.lock().unwrap_or_else(|p| p.into_inner()) = addr;
        self.shared.master_version.fetch_add(1, Ordering::AcqRel);
        let _ = self.shared.waker.wake();
        Ok(())
    }

    pub fn master_address(&self) -> Option<String> {
        self.shared
            .master
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn state(&self) -> HaState {
        *self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> ClientStats {
        *self.shared.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn events(&self) -> &HaEvents {
        &self.shared.events
    }

    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = self.shared.waker.wake();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        self.shared.events.wake();
    }
}

impl Drop for HaClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Why the transfer loop ended: a reason to log, and whether it is a problem or routine.
struct Ended {
    reason: String,
    problem: bool,
}

impl Ended {
    fn problem(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            problem: true,
        }
    }
    fn routine(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            problem: false,
        }
    }
}

enum DispatchError {
    Frame(FrameError),
    Mismatch { master: u64, slave: u64 },
    Store(CommitLogError),
}

impl From<FrameError> for DispatchError {
    fn from(e: FrameError) -> Self {
        DispatchError::Frame(e)
    }
}

struct Client {
    shared: Arc<Shared>,
    poll: Poll,
}

impl Client {
    fn set_state(&self, state: HaState, addr: &str, reason: impl Into<String>, problem: bool) {
        *self.shared.state.lock().unwrap_or_else(|p| p.into_inner()) = state;
        self.shared.events.push(addr, state, reason, problem);
    }

    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// Sleeps up to `d`, waking early for shutdown or a new master address.
    fn pause(&mut self, d: Duration) {
        let mut events = Events::with_capacity(4);
        let _ = self.poll.poll(&mut events, Some(d));
    }

    fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        let mut dispatcher = FrameDispatcher::new(READ_BUFFER_SIZE);
        while !self.stopped() {
            let master = self
                .shared
                .master
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let Some(master) = master else {
                self.pause(BACKOFF_MAX);
                continue;
            };
            let version = self.shared.master_version.load(Ordering::Acquire);
            let started = Instant::now();
            let ended = self.connect_and_transfer(&master, version, &mut dispatcher);
            let transferred = started.elapsed() > BACKOFF_MAX;
            if self.stopped() {
                break;
            }
            self.set_state(HaState::Ready, &master, ended.reason, ended.problem);
            if self.shared.master_version.load(Ordering::Acquire) != version {
                backoff = BACKOFF_MIN;
                continue;
            }
            // Reconnect fast after a long healthy transfer, slower while the master stays away.
            if transferred {
                backoff = BACKOFF_MIN;
            }
            self.pause(backoff);
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
        *self.shared.state.lock().unwrap_or_else(|p| p.into_inner()) = HaState::Shutdown;
        self.shared
            .events
            .push("slave", HaState::Shutdown, "HA client stopped", false);
    }

    fn connect_and_transfer(
        &mut self,
        master: &str,
        version: u64,
        dispatcher: &mut FrameDispatcher,
    ) -> Ended {
        let addr = match resolve(master) {
            Ok(a) => a,
            Err(e) => return Ended::problem(e.to_string()),
        };
        let mut stream = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(e) => return Ended::problem(format!("connect to master {master} failed: {e}")),
        };
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            SOCKET,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            return Ended::problem(format!("register failed: {e}"));
        }
        let ended = self.transfer(&mut stream, master, version, dispatcher);
        let _ = self.poll.registry().deregister(&mut stream);
        // Discard a partial frame of the old connection: the next one starts at our max offset.
        *dispatcher = FrameDispatcher::new(READ_BUFFER_SIZE);
        ended
    }

    /// Waits for the socket to become connected (or fail), honouring shutdown.
    fn await_connected(&mut self, stream: &TcpStream, master: &str) -> Result<(), Ended> {
        let deadline = Instant::now() + self.shared.config.handshake_timeout();
        let mut events = Events::with_capacity(4);
        loop {
            if self.stopped() {
                return Err(Ended::routine("shutdown"));
            }
            match stream.peer_addr() {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
                Err(e) => {
                    return Err(Ended::problem(format!(
                        "connect to master {master} failed: {e}"
                    )))
                }
            }
            if let Ok(Some(e)) = stream.take_error() {
                return Err(Ended::problem(format!(
                    "connect to master {master} failed: {e}"
                )));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Ended::problem(format!(
                    "connect to master {master} timed out"
                )));
            }
            let _ = self.poll.poll(&mut events, Some(deadline - now));
        }
    }

    /// Reads exactly `buf.len()` bytes during the handshake, within its deadline.
    fn read_exact(
        &mut self,
        stream: &mut TcpStream,
        buf: &mut [u8],
        deadline: Instant,
        what: &str,
    ) -> Result<(), Ended> {
        let mut got = 0;
        let mut events = Events::with_capacity(4);
        while got < buf.len() {
            match stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(Ended::problem(format!(
                        "master closed the connection during {what}"
                    )))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let now = Instant::now();
                    if now >= deadline || self.stopped() {
                        return Err(Ended::problem(format!(
                            "no {what} from the master in time; is haAuthSecret set on the master too?"
                        )));
                    }
                    let _ = self.poll.poll(&mut events, Some(deadline - now));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Ended::problem(format!("read failed during {what}: {e}"))),
            }
        }
        Ok(())
    }

    /// Writes all of `data` (a report or handshake reply), waiting briefly for room.
    fn write_all(&mut self, stream: &mut TcpStream, mut data: &[u8]) -> Result<(), Ended> {
        let deadline = Instant::now() + self.shared.config.handshake_timeout();
        let mut events = Events::with_capacity(4);
        while !data.is_empty() {
            match stream.write(data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(Ended::problem("master is not reading our reports"));
                    }
                    let _ = self.poll.poll(&mut events, Some(deadline - now));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Ended::problem(format!("write failed: {e}"))),
            }
        }
        Ok(())
    }

    fn transfer(
        &mut self,
        stream: &mut TcpStream,
        master: &str,
        version: u64,
        dispatcher: &mut FrameDispatcher,
    ) -> Ended {
        if let Err(e) = self.await_connected(stream, master) {
            return e;
        }
        let _ = stream.set_nodelay(true);
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .connects += 1;
        if let Some(secret) = self.shared.config.auth_secret.clone() {
            self.set_state(
                HaState::Handshake,
                master,
                "authenticating with haAuthSecret",
                false,
            );
            let deadline = Instant::now() + self.shared.config.handshake_timeout();
            let mut challenge = [0u8; CHALLENGE_LEN];
            if let Err(e) =
                self.read_exact(stream, &mut challenge, deadline, "authentication challenge")
            {
                return e;
            }
            let Some(response) = auth::slave_response(&secret, &challenge, self.shared.slave_id)
            else {
                return Ended::problem("the master's first bytes are not an authentication challenge; is haAuthSecret set on the master?");
            };
            if let Err(e) = self.write_all(stream, &response) {
                return e;
            }
            let mut proof = [0u8; MAC_LEN];
            if let Err(e) = self.read_exact(stream, &mut proof, deadline, "authentication proof") {
                return e;
            }
            if !auth::verify_master(&secret, &challenge, &proof) {
                return Ended::problem("the master failed authentication: different haAuthSecret");
            }
        }
        let store = self.shared.store.clone();
        let mut reported = store.max_offset();
        if let Err(e) = self.write_all(stream, &frame::encode_report(reported)) {
            return e;
        }
        self.set_state(
            HaState::Transfer,
            master,
            format!("connected, reported max offset {reported}"),
            false,
        );
        let cfg = self.shared.config.clone();
        let mut last_read = Instant::now();
        let mut last_report = Instant::now();
        let mut events = Events::with_capacity(16);
        loop {
            if self.stopped() {
                return Ended::routine("shutdown");
            }
            if self.shared.master_version.load(Ordering::Acquire) != version {
                return Ended::routine("master address changed");
            }
            let now = Instant::now();
            if now.duration_since(last_read) > cfg.housekeeping_interval {
                return Ended::problem(format!(
                    "housekeeping: nothing from the master for {} ms (haHousekeepingInterval)",
                    cfg.housekeeping_interval.as_millis()
                ));
            }
            let wait = (last_report + cfg.heartbeat_interval)
                .min(last_read + cfg.housekeeping_interval)
                .saturating_duration_since(now);
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Ended::problem(format!("epoll failed: {e}"));
                }
            }
            loop {
                match dispatcher.read_from(stream) {
                    Ok(0) => return Ended::problem("master closed the connection"),
                    Ok(n) => {
                        last_read = Instant::now();
                        self.shared
                            .stats
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .bytes_received += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Ended::problem(format!("read failed: {e}")),
                }
                let dispatched = dispatcher.dispatch(|f| {
                    let max = store.max_offset();
                    if max != 0 && max != f.offset {
                        return Err(DispatchError::Mismatch {
                            master: f.offset,
                            slave: max,
                        });
                    }
                    if !f.body.is_empty() {
                        store
                            .append_raw(f.offset, f.body)
                            .map_err(DispatchError::Store)?;
                    }
                    Ok(())
                });
                match dispatched {
                    Ok(frames) => {
                        let mut stats = self.shared.stats.lock().unwrap_or_else(|p| p.into_inner());
                        stats.frames += frames as u64;
                        stats.buffer_swaps = dispatcher.swaps();
                    }
                    Err(DispatchError::Mismatch { master: m, slave: s }) => {
                        return Ended::problem(format!(
                            "master pushed offset not equal the max phy offset in slave, SLAVE: {s} MASTER: {m}; nothing written"
                        ))
                    }
                    Err(DispatchError::Frame(e)) => return Ended::problem(format!("bad frame from master: {e}")),
                    Err(DispatchError::Store(e)) => return Ended::problem(format!("append failed: {e}")),
                }
                let max = store.max_offset();
                if max > reported {
                    if let Err(e) = self.write_all(stream, &frame::encode_report(max)) {
                        return e;
                    }
                    reported = max;
                    last_report = Instant::now();
                }
            }
            if last_report.elapsed() >= cfg.heartbeat_interval {
                let max = store.max_offset();
                if let Err(e) = self.write_all(stream, &frame::encode_report(max)) {
                    return e;
                }
                reported = max;
                last_report = Instant::now();
            }
        }
    }
}
