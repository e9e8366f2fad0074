//! The slave side, RocketMQ's `HAClient`: connect, report the local max offset, append every
//! frame the master pushes, report again; READY -> TRANSFER -> (closed, backoff) -> READY ...
//! until SHUTDOWN.
//!
//! A connection goes through three steps, each on its own: the optional handshake
//! ([`Client::handshake`]), the divergence check of the log's tail ([`PrefixCheck`]), then the
//! frame sink ([`Session::sink`]), which hands what the master pushes to the commit log. The
//! commit log refuses bytes that do not start at its max offset, so the offset check of
//! RocketMQ's `HAClient` is made there, once.

use std::convert::Infallible;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Token};

use super::auth::{self, CHALLENGE_LEN, MASTER_PROOF_LEN};
use super::autoswitch::frame::{
    decode_epoch_entries, decode_master_handshake_header, SlaveHandshake,
    MASTER_HANDSHAKE_HEADER_LEN,
};
use super::autoswitch::{consistent_point, Truncation};
use super::dispatch::{FrameDispatcher, READ_BUFFER_SIZE};
use super::epoch::EpochFileCache;
use super::frame;
use super::prefix_check::PrefixCheck;
use super::{HaConfig, HaEvents, HaState};
use crate::error::{FrameError, HaError};
use crate::event_loop::{EventLoop, LoopThread};
use crate::store::MessageStore;
use crate::sync::lock;

mod ended;
mod session;

pub(super) use ended::DispatchError;
use ended::Ended;
use session::Session;

const SOCKET: Token = Token(0);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Connections in a row on which the master sent a record that fails validation at the same
/// offset before the slave stops: the master will not send anything else there, so retrying
/// forever makes no progress.
const STUCK_AFTER_REJECTIONS: u32 = 3;

fn resolve(addr: &str) -> Result<SocketAddr, HaError> {
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
    /// AutoSwitch HA: the master's confirm offset as of its last frame, capped at ours.
    pub confirm_offset: u64,
}

/// Why a slave stopped replicating ([`HaState::Stopped`]): where, why, and from which master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReason {
    pub offset: u64,
    pub reason: String,
    pub master: String,
}

struct Shared {
    store: Arc<MessageStore>,
    config: HaConfig,
    slave_id: u64,
    master: Mutex<Option<String>>,
    /// Bumped by `update_master_address` so the loop drops its current connection.
    master_version: AtomicU64,
    state: Mutex<HaState>,
    /// Set while [`HaState::Stopped`]; the loop thread writes it, status readers read it.
    stopped: Mutex<Option<StopReason>>,
    stats: Mutex<ClientStats>,
    events: HaEvents,
}

pub struct HaClient {
    shared: Arc<Shared>,
    thread: LoopThread,
}

impl HaClient {
    /// The epochs it speaks AutoSwitch HA with (controller mode).
    pub fn epochs(&self) -> Option<&Arc<EpochFileCache>> {
        self.shared.config.epochs.as_ref()
    }

    /// Starts the client thread; `master` may be `None` until an address is known.
    pub fn start(
        store: Arc<MessageStore>,
        master: Option<String>,
        config: HaConfig,
        slave_id: u64,
    ) -> Result<Self, HaError> {
        let io_err = |source| HaError::Io {
            addr: "slave".into(),
            source,
        };
        let event_loop = EventLoop::new().map_err(io_err)?;
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
            stopped: Mutex::new(None),
            stats: Mutex::new(ClientStats::default()),
            events: HaEvents::default(),
        });
        let signal = event_loop.signal().clone();
        let client = Client {
            shared: shared.clone(),
            event_loop,
        };
        let thread = LoopThread::spawn(&signal, "rocketha-ha-client", move || client.run())
            .map_err(io_err)?;
        Ok(Self { shared, thread })
    }

    pub fn update_master_address(&self, addr: Option<String>) -> Result<(), HaError> {
        if let Some(a) = &addr {
            resolve(a)?;
        }
        *lock(&self.shared.master) = addr;
        self.shared.master_version.fetch_add(1, Ordering::AcqRel);
        self.thread.signal().wake();
        Ok(())
    }

    pub fn master_address(&self) -> Option<String> {
        lock(&self.shared.master).clone()
    }

    pub fn state(&self) -> HaState {
        *lock(&self.shared.state)
    }

    /// Why replication stopped, while the state is [`HaState::Stopped`].
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.shared
            .stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn stats(&self) -> ClientStats {
        *lock(&self.shared.stats)
    }

    pub fn events(&self) -> &HaEvents {
        &self.shared.events
    }

    pub fn shutdown(&self) {
        self.thread.stop();
        self.shared.events.wake();
    }
}

impl Drop for HaClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Client {
    shared: Arc<Shared>,
    event_loop: EventLoop,
}

impl Client {
    fn set_state(&self, state: HaState, addr: &str, reason: impl Into<String>, problem: bool) {
        *lock(&self.shared.state) = state;
        self.shared.events.push(addr, state, reason, problem);
    }

    fn stopped(&self) -> bool {
        self.event_loop.stopped()
    }

    /// Sleeps up to `d`, waking early for shutdown or a new master address.
    fn pause(&mut self, d: Duration) {
        let mut events = Events::with_capacity(4);
        let _ = self.event_loop.poll(&mut events, d);
    }

    fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        let mut dispatcher = FrameDispatcher::new(READ_BUFFER_SIZE);
        // The offset of the last record the master sent that failed validation, and on how
        // many connections in a row it did.
        let mut rejections: Option<(u64, u32)> = None;
        while !self.stopped() {
            let master = lock(&self.shared.master).clone();
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
            rejections = match (ended.rejected, rejections) {
                (Some((at, reason)), last) => {
                    let times = match last {
                        Some((last_at, n)) if last_at == at => n + 1,
                        _ => 1,
                    };
                    if times >= STUCK_AFTER_REJECTIONS {
                        self.stop_replicating(&master, version, at, reason, times);
                        backoff = BACKOFF_MIN;
                        None
                    } else {
                        Some((at, times))
                    }
                }
                // A connection that ended otherwise breaks the run only by getting past it.
                (None, last) => last.filter(|(at, _)| self.shared.store.max_offset() <= *at),
            };
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
        *lock(&self.shared.state) = HaState::Shutdown;
        self.shared
            .events
            .push("slave", HaState::Shutdown, "HA client stopped", false);
    }

    /// The master keeps sending a record that fails validation at `offset`: reconnecting
    /// would repeat that forever, so say so once and wait for an operator: a new master
    /// address (a config change), or shutdown and restart.
    fn stop_replicating(
        &mut self,
        master: &str,
        version: u64,
        offset: u64,
        reason: String,
        times: u32,
    ) {
        let text = format!(
            "stopped replicating from master {master}: on {times} connections in a row it sent \
             a record at offset {offset} that fails validation ({reason}); nothing of it was \
             written. Waiting for an operator: repair the master's log, or set \
             haAcceptZeroBodyCrc=true if the only problem is a BODYCRC of 0 from a peer that \
             never fills it in; then restart this slave or change haMasterAddress"
        );
        *self
            .shared
            .stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(StopReason {
            offset,
            reason,
            master: master.to_owned(),
        });
        self.set_state(HaState::Stopped, master, text, true);
        while !self.stopped() && self.shared.master_version.load(Ordering::Acquire) == version {
            self.pause(BACKOFF_MAX);
        }
        *self
            .shared
            .stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        if !self.stopped() {
            self.set_state(
                HaState::Ready,
                master,
                "master address changed: replicating again",
                false,
            );
        }
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
        if let Err(e) = self.event_loop.registry().register(
            &mut stream,
            SOCKET,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            return Ended::problem(format!("register failed: {e}"));
        }
        let ended = match self.transfer(&mut stream, master, version, dispatcher) {
            Ok(never) => match never {},
            Err(ended) => ended,
        };
        let _ = self.event_loop.registry().deregister(&mut stream);
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
            let _ = self.event_loop.poll(&mut events, deadline - now);
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
                    let _ = self.event_loop.poll(&mut events, deadline - now);
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
                    let _ = self.event_loop.poll(&mut events, deadline - now);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Ended::problem(format!("write failed: {e}"))),
            }
        }
        Ok(())
    }

    /// One connection from connect to close; returns only why it ended.
    fn transfer(
        &mut self,
        stream: &mut TcpStream,
        master: &str,
        version: u64,
        dispatcher: &mut FrameDispatcher,
    ) -> Result<Infallible, Ended> {
        self.await_connected(stream, master)?;
        let _ = stream.set_nodelay(true);
        lock(&self.shared.stats).connects += 1;
        let epochs = self.shared.config.epochs.clone();
        let crc = match (&epochs, self.shared.config.auth_secret.clone()) {
            (Some(epochs), _) => {
                self.autoswitch_handshake(stream, master, epochs)?;
                false
            }
            (None, Some(secret)) => self.handshake(stream, master, &secret)?,
            (None, None) => false,
        };
        dispatcher.set_crc(crc);
        dispatcher.set_autoswitch(epochs.is_some());
        let mut session = self.start_session(stream, master, crc, epochs)?;
        let mut events = Events::with_capacity(16);
        loop {
            self.wait_readable(&mut session, version, &mut events)?;
            let closed = events.iter().any(|e| e.is_read_closed() || e.is_error());
            self.receive(&mut session, stream, master, dispatcher, closed)?;
            if session.last_report.elapsed() >= self.shared.config.heartbeat_interval {
                self.report(&mut session, stream, true)?;
            }
        }
    }

    /// The `haAuthSecret` handshake; returns whether the CRC extension was agreed on.
    fn handshake(
        &mut self,
        stream: &mut TcpStream,
        master: &str,
        secret: &[u8],
    ) -> Result<bool, Ended> {
        self.set_state(
            HaState::Handshake,
            master,
            "authenticating with haAuthSecret",
            false,
        );
        let deadline = Instant::now() + self.shared.config.handshake_timeout();
        let mut challenge = [0u8; CHALLENGE_LEN];
        self.read_exact(stream, &mut challenge, deadline, "authentication challenge")?;
        let flags = if self.shared.config.frame_crc {
            auth::FLAG_FRAME_CRC
        } else {
            0
        };
        let Some(response) = auth::slave_response(secret, &challenge, self.shared.slave_id, flags)
        else {
            return Err(Ended::problem("the master's first bytes are not an authentication challenge; is haAuthSecret set on the master?"));
        };
        self.write_all(stream, &response)?;
        let mut proof = [0u8; MASTER_PROOF_LEN];
        self.read_exact(stream, &mut proof, deadline, "authentication proof")?;
        let Some(accepted) = auth::verify_master(secret, &challenge, &response, &proof) else {
            return Err(Ended::problem(
                "the master failed authentication: different haAuthSecret",
            ));
        };
        let crc = accepted & auth::FLAG_FRAME_CRC != 0;
        if self.shared.config.frame_crc && !crc {
            return Err(Ended::problem(
                "the master refused the per-frame CRC extension",
            ));
        }
        Ok(crc)
    }

    /// RocketMQ 5's AutoSwitch handshake: our controller broker id out, the master's max
    /// offset and epochs in; then the log is cut back to where the two histories agree, so a
    /// slave that was the master of a deposed epoch drops what the new master never had.
    fn autoswitch_handshake(
        &mut self,
        stream: &mut TcpStream,
        master: &str,
        epochs: &EpochFileCache,
    ) -> Result<(), Ended> {
        self.set_state(HaState::Handshake, master, "AutoSwitch handshake", false);
        let cfg = &self.shared.config;
        let hello = SlaveHandshake {
            sync_from_last_file: cfg.sync_from_last_file,
            async_learner: false,
            broker_id: self.shared.slave_id as i64,
        };
        let deadline = Instant::now() + cfg.handshake_timeout();
        self.write_all(stream, &hello.encode())?;
        let what = "AutoSwitch handshake answer (is the master in controller mode too?)";
        let mut header = [0u8; MASTER_HANDSHAKE_HEADER_LEN];
        self.read_exact(stream, &mut header, deadline, what)?;
        let bad = |e: FrameError| Ended::problem(format!("bad handshake answer from master: {e}"));
        let (size, master_max, _) = decode_master_handshake_header(&header).map_err(bad)?;
        let mut body = vec![0u8; size];
        self.read_exact(stream, &mut body, deadline, what)?;
        let entries = decode_epoch_entries(&body).map_err(bad)?;
        let store = &self.shared.store;
        let max = store.max_offset();
        match consistent_point(epochs, max, &entries, master_max) {
            Truncation::Nothing if max > store.min_offset() => Err(Ended::problem(format!(
                "this slave holds the log up to {max} but no epoch file, so it cannot be \
                 checked against master {master}'s history: start it on an empty store (it \
                 then copies the master's log), or restore its epochFileCheckpoint"
            ))),
            Truncation::Nothing => Ok(()),
            Truncation::To(point) => {
                if point < max {
                    store.truncate_to(point).map_err(|e| {
                        Ended::problem(format!("truncating to {point} failed: {e}"))
                    })?;
                    let reason = format!(
                        "truncated the log from {max} to {point}, where it last agrees with \
                         master {master}'s epochs"
                    );
                    self.set_state(HaState::Handshake, master, reason, false);
                }
                // Always, unlike RocketMQ 5.4.0: an epoch starting at or past the cut holds
                // nothing now, and would refuse the master's own entry there.
                epochs
                    .truncate_suffix_by_offset(point)
                    .map_err(|e| Ended::problem(e.to_string()))
            }
            Truncation::Diverged => Err(Ended::problem(format!(
                "no epoch of this log ({:?}) is in master {master}'s history ({:?}): this                  log is another group's or another history. Nothing was written; move this                  slave's store aside and start it empty to copy the master's",
                epochs.entries().iter().map(|e| (e.epoch, e.start_offset)).collect::<Vec<_>>(),
                entries.iter().map(|e| (e.epoch, e.start_offset)).collect::<Vec<_>>(),
            ))),
        }
    }

    /// Sends the first report: the start of the divergence check, or the max offset (an
    /// AutoSwitch slave checked its history in the handshake).
    fn start_session(
        &mut self,
        stream: &mut TcpStream,
        master: &str,
        crc: bool,
        epochs: Option<Arc<EpochFileCache>>,
    ) -> Result<Session, Ended> {
        let store = self.shared.store.clone();
        let check = match epochs {
            Some(_) => None,
            None => PrefixCheck::new(&store),
        };
        let first = check.as_ref().map_or(store.max_offset(), |c| c.from);
        self.write_all(stream, &report(first, crc, epochs.is_some()))?;
        let reported = store.max_offset();
        let reason = match &check {
            Some(c) => format!(
                "connected; verifying bytes [{}, {}) against the master before resuming",
                c.from, c.until
            ),
            None => format!("connected, reported max offset {reported}"),
        };
        self.set_state(HaState::Transfer, master, reason, false);
        let now = Instant::now();
        Ok(Session {
            store,
            accept_zero_body_crc: self.shared.config.accept_zero_body_crc,
            crc,
            check,
            first,
            reported,
            last_read: now,
            heard: false,
            last_report: now,
            epochs,
            received_epoch: -1,
            confirm_offset: 0,
        })
    }

    /// Sleeps until the socket is readable or the next report is due; ends the connection on
    /// shutdown, a new master address or housekeeping.
    fn wait_readable(
        &mut self,
        session: &mut Session,
        version: u64,
        events: &mut Events,
    ) -> Result<(), Ended> {
        if self.stopped() {
            return Err(Ended::routine("shutdown"));
        }
        if self.shared.master_version.load(Ordering::Acquire) != version {
            return Err(Ended::routine("master address changed"));
        }
        let cfg = &self.shared.config;
        let now = Instant::now();
        if now.duration_since(session.last_read) > cfg.housekeeping_interval {
            let ms = cfg.housekeeping_interval.as_millis();
            return Err(Ended::problem(if session.heard {
                format!(
                    "housekeeping: nothing from the master for {ms} ms (haHousekeepingInterval)"
                )
            } else {
                format!(
                    "housekeeping: not a byte from {} in {ms} ms since connecting \
                     (haHousekeepingInterval), where a master sends heartbeats: is it a \
                     master's HA port (haListenPort)?",
                    lock(&self.shared.master).clone().unwrap_or_default()
                )
            }));
        }
        let wait = (session.last_report + cfg.heartbeat_interval)
            .min(session.last_read + cfg.housekeeping_interval)
            .saturating_duration_since(now);
        self.event_loop
            .poll(events, wait)
            .map_err(|e| Ended::problem(format!("epoll failed: {e}")))
    }

    /// Reads until the socket is drained, handing every complete frame to the sink and
    /// reporting the new max offset after each read that appended.
    ///
    /// A read that left free space in the buffer drained the socket (the master's next frame
    /// raises a new epoll edge), so the read that would only say EAGAIN is skipped: one
    /// syscall per frame. Once epoll reported the master's FIN (`closed`), it reads on to the
    /// end of the stream.
    fn receive(
        &mut self,
        session: &mut Session,
        stream: &mut TcpStream,
        master: &str,
        dispatcher: &mut FrameDispatcher,
        closed: bool,
    ) -> Result<(), Ended> {
        loop {
            let drained = match dispatcher.read_from(stream) {
                Ok(0) => return Err(Ended::problem("master closed the connection")),
                Ok(n) => {
                    session.last_read = Instant::now();
                    session.heard = true;
                    let mut stats = lock(&self.shared.stats);
                    stats.bytes_received += n as u64;
                    !dispatcher.filled() && !closed
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Ended::problem(format!("read failed: {e}"))),
            };
            let frames = dispatcher
                .dispatch(|f| session.sink(f))
                .map_err(|e| e.ended(&session.store, master))?;
            let mut stats = lock(&self.shared.stats);
            stats.frames += frames as u64;
            stats.buffer_swaps = dispatcher.swaps();
            stats.confirm_offset = session.confirm_offset;
            drop(stats);
            self.report(session, stream, false)?;
            if drained {
                return Ok(());
            }
        }
    }

    /// Sends the report due now, if one is (see [`Session::due_report`]).
    fn report(
        &mut self,
        session: &mut Session,
        stream: &mut TcpStream,
        heartbeat: bool,
    ) -> Result<(), Ended> {
        if let Some(offset) = session.due_report(heartbeat) {
            let autoswitch = session.epochs.is_some();
            self.write_all(stream, &report(offset, session.crc, autoswitch))?;
            session.reported = session.reported.max(offset);
            session.last_report = Instant::now();
        }
        Ok(())
    }
}

fn report(offset: u64, crc: bool, autoswitch: bool) -> Vec<u8> {
    if autoswitch {
        return super::autoswitch::frame::encode_report(offset).to_vec();
    }
    let mut out = frame::encode_report(offset).to_vec();
    if crc {
        let trailer = frame::crc_trailer(&[&out]);
        out.extend_from_slice(&trailer);
    }
    out
}
