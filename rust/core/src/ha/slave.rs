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

use super::auth::{self, CHALLENGE_LEN, MASTER_PROOF_LEN};
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
        crate::sync::stop_loop(&self.shared.stop, &self.shared.waker, &self.thread);
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
    Mismatch {
        master: u64,
        slave: u64,
    },
    /// The master's bytes differ from ours at `at`, inside what we already hold.
    Divergent {
        at: u64,
        slave_max: u64,
        master_offset: u64,
    },
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
        let mut crc = false;
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
            let flags = if self.shared.config.frame_crc {
                auth::FLAG_FRAME_CRC
            } else {
                0
            };
            let Some(response) =
                auth::slave_response(&secret, &challenge, self.shared.slave_id, flags)
            else {
                return Ended::problem("the master's first bytes are not an authentication challenge; is haAuthSecret set on the master?");
            };
            if let Err(e) = self.write_all(stream, &response) {
                return e;
            }
            let mut proof = [0u8; MASTER_PROOF_LEN];
            if let Err(e) = self.read_exact(stream, &mut proof, deadline, "authentication proof") {
                return e;
            }
            let Some(accepted) = auth::verify_master(&secret, &challenge, &response, &proof) else {
                return Ended::problem("the master failed authentication: different haAuthSecret");
            };
            crc = accepted & auth::FLAG_FRAME_CRC != 0;
            if self.shared.config.frame_crc && !crc {
                return Ended::problem("the master refused the per-frame CRC extension");
            }
        }
        dispatcher.set_crc(crc);
        let store = self.shared.store.clone();
        let mut check = PrefixCheck::new(&store);
        let first = check.as_ref().map_or(store.max_offset(), |c| c.from);
        if let Err(e) = self.write_all(stream, &report(first, crc)) {
            return e;
        }
        let mut reported = store.max_offset();
        self.set_state(
            HaState::Transfer,
            master,
            match &check {
                Some(c) => format!(
                    "connected; verifying bytes [{}, {}) against the master before resuming",
                    c.from, c.until
                ),
                None => format!("connected, reported max offset {reported}"),
            },
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
                    let body = match check.as_mut() {
                        Some(c) => {
                            let rest = c.verify(&store, f.offset, f.body)?;
                            if !c.done() {
                                // Still inside bytes we hold: nothing to append yet.
                                return Ok(());
                            }
                            check = None;
                            rest
                        }
                        None => f.body,
                    };
                    let at = f.offset + (f.body.len() - body.len()) as u64;
                    let max = store.max_offset();
                    if max != 0 && max != at {
                        return Err(DispatchError::Mismatch {
                            master: at,
                            slave: max,
                        });
                    }
                    if !body.is_empty() {
                        store.append_raw(at, body).map_err(DispatchError::Store)?;
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
                    Err(DispatchError::Divergent { at, slave_max, master_offset }) => {
                        let reason = divergence_reason(at, slave_max, master_offset);
                        record_divergence(&store, at, slave_max, master);
                        return Ended::problem(reason);
                    }
                    Err(DispatchError::Frame(e)) => {
                        return Ended::problem(format!("bad frame from master: {e}; nothing written"))
                    }
                    Err(DispatchError::Store(e)) => return Ended::problem(format!("append failed: {e}")),
                }
                let max = store.max_offset();
                if max > reported && check.is_none() {
                    if let Err(e) = self.write_all(stream, &report(max, crc)) {
                        return e;
                    }
                    reported = max;
                    last_report = Instant::now();
                }
            }
            if last_report.elapsed() >= cfg.heartbeat_interval {
                let max = if check.is_some() {
                    first
                } else {
                    store.max_offset()
                };
                if let Err(e) = self.write_all(stream, &report(max, crc)) {
                    return e;
                }
                reported = reported.max(max);
                last_report = Instant::now();
            }
        }
    }
}

/// How far back a reconnecting slave re-reads its own log from the master to prove the two
/// agree before it appends anything (seed 003's "dirty slave").
const PREFIX_CHECK_WINDOW: u64 = 64 * 1024;

/// A reconnecting slave asks for bytes it already has, `[from, until)`, and compares them with
/// its own before resuming at `until`. A plain RocketMQ master serves this unchanged: it is
/// just an earlier offset request.
struct PrefixCheck {
    from: u64,
    until: u64,
    /// The next offset a frame must start at.
    next: u64,
}

impl PrefixCheck {
    fn new(store: &MessageStore) -> Option<Self> {
        let until = store.max_offset();
        let min = store.min_offset();
        if until <= min {
            return None;
        }
        // Stay inside the segment that holds the last byte, which the master must hold too.
        let size = store.commit_log().file_size() as u64;
        let segment_start = (until - 1) - (until - 1) % size;
        let from = until
            .saturating_sub(PREFIX_CHECK_WINDOW)
            .max(segment_start)
            .max(min);
        Some(Self {
            from,
            until,
            next: from,
        })
    }

    fn done(&self) -> bool {
        self.next >= self.until
    }

    /// Compares the part of a frame we already hold; returns the part past it.
    fn verify<'a>(
        &mut self,
        store: &MessageStore,
        offset: u64,
        body: &'a [u8],
    ) -> Result<&'a [u8], DispatchError> {
        let divergent = |at: u64| DispatchError::Divergent {
            at,
            slave_max: self.until,
            master_offset: offset,
        };
        if offset != self.next {
            return Err(DispatchError::Mismatch {
                master: offset,
                slave: self.next,
            });
        }
        if body.is_empty() {
            // A heartbeat before we reached our end: the master holds less than we do.
            return Err(divergent(offset));
        }
        let overlap = ((self.until - offset) as usize).min(body.len());
        let mut at = offset;
        let mut mine_done = 0;
        while mine_done < overlap {
            let Some((file, pos, len)) = store.read_raw(at, overlap - mine_done) else {
                return Err(divergent(at));
            };
            let mine = &file.readable(pos)[..len];
            let theirs = &body[mine_done..mine_done + len];
            if let Some(i) = mine.iter().zip(theirs).position(|(a, b)| a != b) {
                return Err(divergent(at + i as u64));
            }
            mine_done += len;
            at += len as u64;
        }
        self.next = offset + body.len() as u64;
        Ok(&body[overlap..])
    }
}

fn report(offset: u64, crc: bool) -> Vec<u8> {
    let mut out = frame::encode_report(offset).to_vec();
    if crc {
        let trailer = frame::crc_trailer(&[&out]);
        out.extend_from_slice(&trailer);
    }
    out
}

fn divergence_reason(at: u64, slave_max: u64, master_offset: u64) -> String {
    format!(
        "divergent slave: its log differs from the master's at offset {at} (slave max offset \
         {slave_max}, master frame at {master_offset}); nothing written. Inspect it, then run \
         `rocketha repair --truncate-to-common-prefix STORE`"
    )
}

/// Leaves the finding in the store, so `rocketha repair` knows where the logs part.
fn record_divergence(store: &MessageStore, at: u64, slave_max: u64, master: &str) {
    let text = format!("offset={at}\nslave_max_offset={slave_max}\nmaster={master}\n");
    let _ = std::fs::write(store.config().root.join("divergence"), text);
}
