//! The master side: one mio event loop accepts slaves and drives every connection's read
//! (offset reports) and write (header + body straight from the mmap) state machines.

use std::collections::HashMap;
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::ack::AckTable;
use super::auth::{self, CHALLENGE_LEN, SLAVE_RESPONSE_LEN};
use super::frame::{self, CRC_LEN, HEADER_LEN, REPORT_LEN};
use super::{HaConfig, HaEvents, HaState};
use crate::commitlog::mapped_file::MappedFile;
use crate::error::{CommitLogError, HaError};
use crate::store::{now_millis, MessageStore};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONNECTION: usize = 2;

/// Longest a partial batch waits for the ack of the frame before it (see [`group_hold`]):
/// a bound for slaves that report late, far above a loopback or LAN round trip.
const GROUP_HOLD_MAX: Duration = Duration::from_millis(1);
/// [`Shared::wake_at`] while the loop runs: no append wakes it.
const AWAKE: u64 = u64::MAX;

/// A snapshot of one slave connection for status displays.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub id: u64,
    pub addr: String,
    pub state: HaState,
    pub slave_ack_offset: u64,
    pub next_transfer_from: Option<u64>,
    pub bytes_sent: u64,
    pub since_ms: i64,
    pub authenticated: bool,
}

struct Shared {
    store: Arc<MessageStore>,
    config: HaConfig,
    acks: AckTable,
    events: HaEvents,
    connections: Mutex<HashMap<u64, ConnectionInfo>>,
    stop: AtomicBool,
    /// Set by the loop before it sleeps: the max offset an append must reach to be worth
    /// waking it for ([`AWAKE`] while it runs). A connection waiting for the ack of its frame
    /// in flight only wants a full batch, so the puts of a group commit cost the loop no
    /// wake-up each, and appends while it runs cost no syscall.
    wake_at: AtomicU64,
    waker: Waker,
}

pub struct HaMaster {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// One frame being written: header, body straight from the mmap, and the CRC trailer when the
/// extension is on. `done` counts bytes written so far across the three.
struct PendingWrite {
    header: [u8; HEADER_LEN],
    body: Option<(Arc<MappedFile>, usize, usize)>,
    trailer: [u8; CRC_LEN],
    trailer_len: usize,
    done: usize,
}

impl PendingWrite {
    fn new(offset: u64, body: Option<(Arc<MappedFile>, usize, usize)>, crc: bool) -> Self {
        let len = body.as_ref().map_or(0, |b| b.2);
        let mut w = Self {
            header: frame::encode_header(offset, len),
            body,
            trailer: [0; CRC_LEN],
            trailer_len: 0,
            done: 0,
        };
        if crc {
            w.trailer = frame::crc_trailer(&[&w.header, w.body()]);
            w.trailer_len = CRC_LEN;
        }
        w
    }
    fn body(&self) -> &[u8] {
        match &self.body {
            Some((file, pos, len)) => &file.readable(*pos)[..*len],
            None => &[],
        }
    }
    fn body_len(&self) -> usize {
        self.body.as_ref().map_or(0, |b| b.2)
    }
    fn total(&self) -> usize {
        HEADER_LEN + self.body_len() + self.trailer_len
    }
    /// The unwritten rest, as up to three slices for one writev.
    fn remaining(&self) -> [IoSlice<'_>; 3] {
        let parts = [
            &self.header[..],
            self.body(),
            &self.trailer[..self.trailer_len],
        ];
        let mut skip = self.done;
        parts.map(|p| {
            let from = skip.min(p.len());
            skip -= from;
            IoSlice::new(&p[from..])
        })
    }
}

enum Phase {
    /// Sent the challenge, waiting for the slave's response.
    Handshake {
        challenge: [u8; CHALLENGE_LEN],
        got: Vec<u8>,
    },
    Transfer,
}

struct Connection {
    id: u64,
    stream: TcpStream,
    addr: String,
    phase: Phase,
    /// Bytes still to send before the classic protocol starts (challenge or proof).
    control: Vec<u8>,
    report_buf: [u8; REPORT_LEN + CRC_LEN],
    report_len: usize,
    /// The CRC extension was negotiated for this connection.
    crc: bool,
    /// The socket said WouldBlock: nothing more can be written until its writable edge, so the
    /// loop sleeps instead of retrying (which would spin a core the slave needs).
    write_blocked: bool,
    slave_key: u64,
    /// RocketMQ's `nextTransferFromWhere`: unset until the slave's first report.
    next_transfer: Option<u64>,
    /// The slave's last report.
    acked: u64,
    write: Option<PendingWrite>,
    last_read: Instant,
    last_write: Instant,
    accepted: Instant,
    flow: FlowWindow,
}

impl Connection {
    fn holds(&self, max_offset: u64, batch: usize, now: Instant) -> bool {
        self.next_transfer.is_some_and(|next| {
            group_hold(
                next,
                self.acked,
                max_offset,
                batch,
                now.saturating_duration_since(self.last_write),
            )
        })
    }
}

/// Group commit on the wire: while the slave has not acked everything sent (`acked < next`),
/// less than a full batch of new bytes waits for that ack, at most [`GROUP_HOLD_MAX`] after
/// the last frame, instead of going out at once. Puts that arrive during a round trip then
/// share one frame and one ack rather than each paying for its own; a lone producer never
/// waits, as nothing is in flight when it puts, and bulk transfer never does, as it always
/// has a full batch.
fn group_hold(next: u64, acked: u64, max_offset: u64, batch: usize, since_write: Duration) -> bool {
    acked < next
        && next < max_offset
        && max_offset - next < batch as u64
        && since_write < GROUP_HOLD_MAX
}

/// RocketMQ's HA flow control (`haFlowControlEnable`): at most `limit` body bytes to a slave
/// per one-second window. Time comes in as `now`, so the arithmetic tests without a clock.
struct FlowWindow {
    start: Instant,
    bytes: u64,
}

impl FlowWindow {
    const LENGTH: Duration = Duration::from_secs(1);

    fn new(now: Instant) -> Self {
        Self {
            start: now,
            bytes: 0,
        }
    }

    /// How many body bytes may go out now, at most `batch`; 0 until the window reopens once
    /// its budget is spent.
    fn allowance(&mut self, limit: Option<u64>, batch: usize, now: Instant) -> usize {
        let Some(limit) = limit else { return batch };
        if now >= self.start + Self::LENGTH {
            *self = Self::new(now);
        }
        batch.min(limit.saturating_sub(self.bytes) as usize)
    }

    fn sent(&mut self, body: usize) {
        self.bytes += body as u64;
    }

    fn spent(&self, limit: Option<u64>, now: Instant) -> bool {
        limit.is_some_and(|l| now < self.reopens_at() && self.bytes >= l)
    }

    fn reopens_at(&self) -> Instant {
        self.start + Self::LENGTH
    }
}

/// Why a connection is closed, for the log.
type Close = String;

/// A slave going away is routine (it restarts, it is shut down), not a fault of the master.
const CLOSED_BY_SLAVE: &str = "slave closed the connection";

impl HaMaster {
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
        let std_listener = std::net::TcpListener::bind(listen).map_err(io_err)?;
        std_listener.set_nonblocking(true).map_err(io_err)?;
        let local_addr = std_listener.local_addr().map_err(io_err)?;
        let mut listener = TcpListener::from_std(std_listener);
        let poll = Poll::new().map_err(io_err)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(io_err)?;
        let waker = Waker::new(poll.registry(), WAKER).map_err(io_err)?;
        // A master's slaves ack into the store's GroupTransferService, where its puts wait.
        let group_transfer = store
            .group_transfer()
            .cloned()
            .ok_or(HaError::CommitLog(CommitLogError::ReadOnly))?;
        let shared = Arc::new(Shared {
            store: store.clone(),
            config,
            acks: AckTable::new(group_transfer),
            events: HaEvents::default(),
            connections: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
            wake_at: AtomicU64::new(AWAKE),
            waker,
        });
        let wake = shared.clone();
        store.set_append_listener(Some(Arc::new(move |max_offset| {
            if max_offset >= wake.wake_at.load(Ordering::SeqCst)
                && wake.wake_at.swap(AWAKE, Ordering::SeqCst) != AWAKE
            {
                let _ = wake.waker.wake();
            }
        })));
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rocketha-ha-master".into())
            .spawn(move || EventLoop::new(worker, poll, listener).run())
            .map_err(io_err)?;
        Ok(Self {
            shared,
            local_addr,
            thread: Mutex::new(Some(thread)),
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
        let mut all: Vec<_> = self
            .shared
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by_key(|c| c.id);
        all
    }

    pub fn is_running(&self) -> bool {
        !self.shared.stop.load(Ordering::Acquire)
    }

    pub fn shutdown(&self) {
        crate::sync::stop_loop(&self.shared.stop, &self.shared.waker, &self.thread);
        self.shared.store.set_append_listener(None);
        self.shared.events.wake();
    }
}

impl Drop for HaMaster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct EventLoop {
    shared: Arc<Shared>,
    poll: Poll,
    listener: TcpListener,
    conns: HashMap<Token, Connection>,
    next_id: u64,
}

impl EventLoop {
    fn new(shared: Arc<Shared>, poll: Poll, listener: TcpListener) -> Self {
        Self {
            shared,
            poll,
            listener,
            conns: HashMap::new(),
            next_id: FIRST_CONNECTION as u64,
        }
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        while !self.shared.stop.load(Ordering::Acquire) {
            let timeout = self.prepare_to_sleep();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.shared.events.push(
                        "master",
                        HaState::Shutdown,
                        format!("epoll failed: {e}"),
                        true,
                    );
                    break;
                }
            }
            self.shared.wake_at.store(AWAKE, Ordering::SeqCst);
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    token => {
                        if event.is_writable() {
                            if let Some(c) = self.conns.get_mut(&token) {
                                c.write_blocked = false;
                            }
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            if let Err(reason) = self.on_readable(token) {
                                let problem = reason != CLOSED_BY_SLAVE;
                                self.close(token, reason, problem);
                            }
                        }
                    }
                }
            }
            self.service_all();
        }
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for t in tokens {
            self.close(t, "master shutting down".into(), false);
        }
    }

    /// Chooses how long to sleep: until the nearest heartbeat, housekeeping or flow-control
    /// deadline, or not at all when a connection has bytes to send.
    fn prepare_to_sleep(&mut self) -> Option<Duration> {
        let cfg = &self.shared.config;
        let batch = cfg.transfer_batch_size;
        let now = Instant::now();
        let max = self.shared.store.max_offset();
        let mut deadline = now + cfg.housekeeping_interval;
        let mut wake_at = AWAKE;
        for c in self.conns.values() {
            deadline = deadline.min(c.last_read + cfg.housekeeping_interval);
            if matches!(c.phase, Phase::Handshake { .. }) {
                deadline = deadline.min(c.accepted + cfg.handshake_timeout());
            }
            let Some(next) = c.next_transfer else {
                continue;
            };
            deadline = deadline.min(c.last_write + cfg.heartbeat_interval);
            if c.flow.spent(cfg.max_transfer_bytes_per_second, now) {
                // Only the window reopening lets it send again, not an append.
                deadline = deadline.min(c.flow.reopens_at());
            } else if c.holds(max, batch, now) {
                deadline = deadline.min(c.last_write + GROUP_HOLD_MAX);
                wake_at = wake_at.min(next + batch as u64);
            } else if !c.write_blocked {
                wake_at = wake_at.min(next + 1);
            }
        }
        self.shared.wake_at.store(wake_at, Ordering::SeqCst);
        // Re-check after announcing the threshold: an append published before it was set did
        // not wake us, so look for its bytes now.
        let max = self.shared.store.max_offset();
        let busy = self.conns.values().any(|c| {
            !c.write_blocked
                && (c.write.is_some()
                    || !c.control.is_empty()
                    || (c.next_transfer.is_some_and(|n| n < max)
                        && !c.flow.spent(cfg.max_transfer_bytes_per_second, now)
                        && !c.holds(max, batch, now)))
        });
        if busy {
            self.shared.wake_at.store(AWAKE, Ordering::SeqCst);
            return Some(Duration::ZERO);
        }
        Some(deadline.saturating_duration_since(now))
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    let token = Token(self.next_id as usize);
                    let id = self.next_id;
                    self.next_id += 1;
                    if let Err(e) = self.poll.registry().register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        self.shared.events.push(
                            addr.to_string(),
                            HaState::Shutdown,
                            format!("register failed: {e}"),
                            true,
                        );
                        continue;
                    }
                    let now = Instant::now();
                    let (phase, control) = match &self.shared.config.auth_secret {
                        Some(_) => {
                            let challenge = auth::challenge();
                            (
                                Phase::Handshake {
                                    challenge,
                                    got: Vec::with_capacity(SLAVE_RESPONSE_LEN),
                                },
                                challenge.to_vec(),
                            )
                        }
                        None => (Phase::Transfer, Vec::new()),
                    };
                    let state = if control.is_empty() {
                        HaState::Ready
                    } else {
                        HaState::Handshake
                    };
                    let conn = Connection {
                        id,
                        stream,
                        addr: addr.to_string(),
                        phase,
                        control,
                        report_buf: [0; REPORT_LEN + CRC_LEN],
                        report_len: 0,
                        crc: false,
                        write_blocked: false,
                        slave_key: id,
                        next_transfer: None,
                        acked: 0,
                        write: None,
                        last_read: now,
                        last_write: now,
                        accepted: now,
                        flow: FlowWindow::new(now),
                    };
                    self.shared
                        .connections
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(
                            id,
                            ConnectionInfo {
                                id,
                                addr: conn.addr.clone(),
                                state,
                                slave_ack_offset: 0,
                                next_transfer_from: None,
                                bytes_sent: 0,
                                since_ms: now_millis(),
                                authenticated: false,
                            },
                        );
                    self.shared
                        .events
                        .push(conn.addr.clone(), state, "slave connected", false);
                    self.conns.insert(token, conn);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of file descriptors and the like: report and retry on the next event.
                    self.shared.events.push(
                        "master",
                        HaState::Ready,
                        format!("accept failed: {e}"),
                        true,
                    );
                    return;
                }
            }
        }
    }

    fn update_info(&self, c: &Connection, f: impl FnOnce(&mut ConnectionInfo)) {
        if let Some(info) = self
            .shared
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&c.id)
        {
            f(info);
        }
    }

    fn on_readable(&mut self, token: Token) -> Result<(), Close> {
        let secret = self.shared.config.auth_secret.clone();
        let Some(c) = self.conns.get_mut(&token) else {
            return Ok(());
        };
        let mut buf = [0u8; 4096];
        let mut latest: Option<u64> = None;
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return Err(CLOSED_BY_SLAVE.into()),
                Ok(n) => {
                    c.last_read = Instant::now();
                    let mut data = &buf[..n];
                    if let Phase::Handshake { challenge, got } = &mut c.phase {
                        let take = (SLAVE_RESPONSE_LEN - got.len()).min(data.len());
                        got.extend_from_slice(&data[..take]);
                        data = &data[take..];
                        if got.len() < SLAVE_RESPONSE_LEN {
                            continue;
                        }
                        let mut response = [0u8; SLAVE_RESPONSE_LEN];
                        response.copy_from_slice(got);
                        let secret = secret.as_deref().unwrap_or_default();
                        let Some((slave_id, flags)) =
                            auth::verify_slave(secret, challenge, &response)
                        else {
                            return Err(
                                "authentication failed: wrong or missing haAuthSecret".into()
                            );
                        };
                        let proof = auth::master_proof(secret, challenge, &response, flags);
                        c.control.extend_from_slice(&proof);
                        c.crc = flags & auth::FLAG_FRAME_CRC != 0;
                        c.slave_key = slave_id;
                        c.phase = Phase::Transfer;
                    }
                    // Only the last complete report counts: acks coalesce.
                    let report_len = REPORT_LEN + if c.crc { CRC_LEN } else { 0 };
                    for &b in data {
                        c.report_buf[c.report_len] = b;
                        c.report_len += 1;
                        if c.report_len == report_len {
                            c.report_len = 0;
                            let (report, trailer) = c.report_buf.split_at(REPORT_LEN);
                            if c.crc && frame::crc_trailer(&[report])[..] != trailer[..CRC_LEN] {
                                return Err("offset report failed its CRC32 check".into());
                            }
                            let mut raw = [0u8; REPORT_LEN];
                            raw.copy_from_slice(report);
                            let offset = frame::decode_report(raw)
                                .map_err(|e| format!("bad offset report: {e}"))?;
                            latest = Some(offset);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
        let authenticated = secret.is_some() && matches!(c.phase, Phase::Transfer);
        let slave_key = c.slave_key;
        if authenticated {
            // One slave, one connection: an older connection of the same slave is stale.
            let stale: Vec<Token> = self
                .conns
                .iter()
                .filter(|(t, o)| **t != token && o.slave_key == slave_key)
                .map(|(t, _)| *t)
                .collect();
            for t in stale {
                self.close(
                    t,
                    "replaced by a newer connection of the same slave".into(),
                    false,
                );
            }
        }
        if let Some(offset) = latest {
            self.on_report(token, offset)?;
        }
        Ok(())
    }

    /// A slave's offset report: the first one fixes where transfer starts; every one is an ack.
    fn on_report(&mut self, token: Token, offset: u64) -> Result<(), Close> {
        let store = &self.shared.store;
        let (min, max) = (store.min_offset(), store.max_offset());
        let Some(c) = self.conns.get_mut(&token) else {
            return Ok(());
        };
        if offset > max {
            return Err(format!(
                "slave reported offset {offset} beyond the master's max offset {max}: refusing a fake or divergent ack"
            ));
        }
        c.acked = offset;
        if c.next_transfer.is_none() {
            let start = if offset == 0 {
                if self.shared.config.sync_from_last_file {
                    let size = store.commit_log().file_size() as u64;
                    max - max % size
                } else {
                    min
                }
            } else if offset < min {
                return Err(format!(
                    "slave requested offset {offset}, older than the master's min offset {min}: the master no longer holds it"
                ));
            } else {
                offset
            };
            c.next_transfer = Some(start);
            let addr = c.addr.clone();
            self.shared.events.push(
                addr,
                HaState::Transfer,
                format!("transfer starts at offset {start} (slave reported {offset})"),
                false,
            );
        }
        let authenticated = self.shared.config.auth_secret.is_some();
        let c = &self.conns[&token];
        // The snapshot first: a put woken by the ack may read it at once.
        self.update_info(c, |i| {
            i.state = HaState::Transfer;
            i.slave_ack_offset = offset;
            i.next_transfer_from = c.next_transfer;
            i.authenticated = authenticated;
        });
        self.shared.acks.update(c.id, c.slave_key, offset);
        Ok(())
    }

    fn service_all(&mut self) {
        let now = Instant::now();
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for token in tokens {
            let Some(c) = self.conns.get(&token) else {
                continue;
            };
            let cfg = &self.shared.config;
            if now.duration_since(c.last_read) > cfg.housekeeping_interval {
                let reason = format!(
                    "housekeeping: nothing read from the slave for {} ms (haHousekeepingInterval)",
                    cfg.housekeeping_interval.as_millis()
                );
                self.close(token, reason, true);
                continue;
            }
            if matches!(c.phase, Phase::Handshake { .. })
                && now.duration_since(c.accepted) > cfg.handshake_timeout()
            {
                self.close(
                    token,
                    "authentication timed out: the peer sent no valid response".into(),
                    true,
                );
                continue;
            }
            if let Err(reason) = self.pump(token, now) {
                self.close(token, reason, true);
            }
        }
    }

    /// Writes until the socket would block, the slave is caught up or flow control says wait.
    fn pump(&mut self, token: Token, now: Instant) -> Result<(), Close> {
        let store = self.shared.store.clone();
        let batch = self.shared.config.transfer_batch_size;
        let heartbeat = self.shared.config.heartbeat_interval;
        let limit = self.shared.config.max_transfer_bytes_per_second;
        let Some(c) = self.conns.get_mut(&token) else {
            return Ok(());
        };
        if c.write_blocked {
            return Ok(());
        }
        while !c.control.is_empty() {
            match c.stream.write(&c.control) {
                Ok(n) => {
                    c.control.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.write_blocked = true;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write failed: {e}")),
            }
        }
        let mut sent = 0u64;
        let max = store.max_offset();
        loop {
            if c.write.is_none() {
                let Some(next) = c.next_transfer else { break };
                if c.holds(max, batch, now) {
                    break;
                }
                let allowance = c.flow.allowance(limit, batch, now);
                if allowance == 0 {
                    break;
                }
                match store.read_raw(next, allowance) {
                    Some(body) => {
                        c.flow.sent(body.2);
                        c.write = Some(PendingWrite::new(next, Some(body), c.crc));
                    }
                    None if now.duration_since(c.last_write) >= heartbeat => {
                        c.write = Some(PendingWrite::new(next, None, c.crc));
                    }
                    None => break,
                }
            }
            let Some(w) = c.write.as_mut() else { break };
            match c.stream.write_vectored(&w.remaining()) {
                Ok(n) => {
                    w.done += n;
                    sent += n as u64;
                    if w.done == w.total() {
                        let len = w.body_len() as u64;
                        c.next_transfer = c.next_transfer.map(|n| n + len);
                        c.last_write = now;
                        c.write = None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.write_blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write failed: {e}")),
            }
        }
        if sent > 0 {
            let next = c.next_transfer;
            let c = &self.conns[&token];
            self.update_info(c, |i| {
                i.bytes_sent += sent;
                i.next_transfer_from = next;
            });
        }
        Ok(())
    }

    fn close(&mut self, token: Token, reason: Close, problem: bool) {
        if let Some(mut c) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut c.stream);
            self.shared.acks.remove(c.id);
            self.shared
                .connections
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&c.id);
            self.shared
                .events
                .push(c.addr, HaState::Shutdown, reason, problem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_batches_wait_for_the_ack_of_the_frame_in_flight() {
        let (batch, now) = (32 * 1024, Duration::ZERO);
        // Nothing in flight: a lone producer's message goes out at once.
        assert!(!group_hold(1000, 1000, 1100, batch, now));
        // In flight: a small append waits for the ack, or for the hold to run out.
        assert!(group_hold(1000, 500, 1100, batch, now));
        assert!(!group_hold(1000, 500, 1100, batch, GROUP_HOLD_MAX));
        // A full batch never waits; nor does a connection with nothing new to send.
        assert!(!group_hold(1000, 500, 1000 + batch as u64, batch, now));
        assert!(!group_hold(1000, 500, 1000, batch, now));
    }

    #[test]
    fn flow_control_spends_a_budget_per_second_of_body_bytes() {
        let t0 = Instant::now();
        let (limit, batch) = (Some(100_000), 32 * 1024);
        let mut flow = FlowWindow::new(t0);
        let mut sent = 0;
        while !flow.spent(limit, t0) {
            let n = flow.allowance(limit, batch, t0);
            assert!(n > 0 && n <= batch);
            flow.sent(n);
            sent += n;
        }
        assert_eq!(sent, 100_000);
        assert_eq!(
            flow.allowance(limit, batch, t0 + Duration::from_millis(999)),
            0
        );
        assert_eq!(flow.reopens_at(), t0 + Duration::from_secs(1));
        // The next window brings a fresh budget.
        let t1 = t0 + Duration::from_secs(1);
        assert!(!flow.spent(limit, t1));
        assert_eq!(flow.allowance(limit, batch, t1), batch);
        // Without a limit, every batch is allowed.
        assert_eq!(FlowWindow::new(t0).allowance(None, batch, t0), batch);
        assert!(!flow.spent(None, t0));
    }
}
