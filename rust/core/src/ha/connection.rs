//! RocketMQ's `HAConnection`: one slave's connection on the master. Its read half
//! (`ReadSocketService`) takes the slave's offset reports, which set `slave_ack_offset` and, the
//! first time, `next_transfer_from_where`; its write half (`WriteSocketService`) sends header +
//! body straight from the mmap from there on. The AcceptSocketService's loop drives both.

use std::io::{self, IoSlice, Read, Write};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;

use super::auth::{self, CHALLENGE_LEN, SLAVE_RESPONSE_LEN};
use super::autoswitch::frame::{
    decode_slave_frame, encode_master_handshake, SlaveFrame, TransferHeader, MAX_EPOCH_ENTRIES,
    TRANSFER_HEADER_LEN,
};
use super::epoch::EpochFileCache;
use super::flow::FlowMonitor;
use super::frame::{self, CRC_LEN, HEADER_LEN, REPORT_LEN};
use super::{HaConfig, HaState};
use crate::commitlog::LogSlice;
use crate::store::{now_millis, MessageStore};

/// Longest a partial batch waits for the ack of the frame before it (see [`group_hold`]):
/// a bound for slaves that report late, far above a loopback or LAN round trip.
const GROUP_HOLD_MAX: Duration = Duration::from_millis(1);

/// The max offset to wake the loop at when no append is worth waking it for: a connection's
/// answer in [`HaConnection::wake_bounds`], and the loop's
/// [`Shared::wake_at`](super::accept::Shared::wake_at) while it runs.
pub(super) const AWAKE: u64 = u64::MAX;

/// Why a connection is closed, for the log.
pub(super) type Close = String;

/// A slave going away is routine (it restarts, it is shut down), not a fault of the master.
pub(super) const CLOSED_BY_SLAVE: &str = "slave closed the connection";

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
    /// When the slave's last offset report arrived (epoch ms); None before the first.
    pub last_ack_ms: Option<i64>,
    /// The broker id the slave proved in the auth handshake; None without haAuthSecret.
    pub slave_id: Option<u64>,
    pub authenticated: bool,
}

/// [`ConnectionStatus::next_transfer_from_where`] before the slave's first report.
const UNSET: u64 = u64::MAX;

/// What status displays read of a connection while the loop changes it. Each value is stored
/// here once: the loop writes it, [`ConnectionStatus::snapshot`] reads it.
pub(super) struct ConnectionStatus {
    id: u64,
    addr: String,
    since_ms: i64,
    /// haAuthSecret is set: the connection starts with the handshake, and is authenticated once
    /// it transfers.
    auth: bool,
    /// RocketMQ's `slaveAckOffset`: the slave's last report.
    slave_ack_offset: AtomicU64,
    /// RocketMQ's `nextTransferFromWhere`: [`UNSET`] until the slave's first report.
    next_transfer_from_where: AtomicU64,
    bytes_sent: AtomicU64,
    /// Epoch ms of the last offset report, 0 before the first.
    last_ack_ms: AtomicI64,
    /// The authenticated slave id, [`UNSET`] until the handshake proves one.
    slave_id: AtomicU64,
}

impl ConnectionStatus {
    fn next_transfer_from_where(&self) -> Option<u64> {
        let next = self.next_transfer_from_where.load(Ordering::Acquire);
        (next != UNSET).then_some(next)
    }

    pub(super) fn snapshot(&self) -> ConnectionInfo {
        let next = self.next_transfer_from_where();
        let state = match next {
            Some(_) => HaState::Transfer,
            None if self.auth => HaState::Handshake,
            None => HaState::Ready,
        };
        ConnectionInfo {
            id: self.id,
            addr: self.addr.clone(),
            state,
            slave_ack_offset: self.slave_ack_offset.load(Ordering::Acquire),
            next_transfer_from: next,
            bytes_sent: self.bytes_sent.load(Ordering::Acquire),
            since_ms: self.since_ms,
            last_ack_ms: Some(self.last_ack_ms.load(Ordering::Acquire)).filter(|&ms| ms > 0),
            slave_id: Some(self.slave_id.load(Ordering::Acquire)).filter(|&id| id != UNSET),
            authenticated: self.auth && next.is_some(),
        }
    }
}

/// One frame being written: header, body straight from the mmap, and the CRC trailer when the
/// extension is on. `done` counts bytes written so far across the three.
struct PendingWrite {
    /// A classic 12-byte header, or AutoSwitch's 36 bytes.
    header: [u8; TRANSFER_HEADER_LEN],
    header_len: usize,
    body: Option<LogSlice>,
    trailer: [u8; CRC_LEN],
    trailer_len: usize,
    done: usize,
}

/// What an AutoSwitch frame names beside its offset: its epoch, where that epoch starts, and
/// the master's confirm offset.
#[derive(Clone, Copy)]
struct EpochLabel {
    epoch: i32,
    start: u64,
    confirm: u64,
}

impl PendingWrite {
    fn new(offset: u64, body: Option<LogSlice>, crc: bool, label: Option<EpochLabel>) -> Self {
        let len = body.as_ref().map_or(0, LogSlice::len);
        let mut header = [0u8; TRANSFER_HEADER_LEN];
        let header_len = match label {
            Some(l) => {
                let h = TransferHeader {
                    body_size: len,
                    offset: Some(offset),
                    epoch: l.epoch,
                    epoch_start_offset: l.start,
                    confirm_offset: l.confirm,
                };
                header = h.encode();
                TRANSFER_HEADER_LEN
            }
            None => {
                header[..HEADER_LEN].copy_from_slice(&frame::encode_header(offset, len));
                HEADER_LEN
            }
        };
        let mut w = Self {
            header,
            header_len,
            body,
            trailer: [0; CRC_LEN],
            trailer_len: 0,
            done: 0,
        };
        if crc {
            w.trailer = frame::crc_trailer(&[&w.header[..header_len], w.body()]);
            w.trailer_len = CRC_LEN;
        }
        w
    }
    fn body(&self) -> &[u8] {
        self.body.as_ref().map_or(&[], LogSlice::bytes)
    }
    fn body_len(&self) -> usize {
        self.body.as_ref().map_or(0, LogSlice::len)
    }
    fn total(&self) -> usize {
        self.header_len + self.body_len() + self.trailer_len
    }
    /// The unwritten rest, as up to three slices for one writev.
    fn remaining(&self) -> [IoSlice<'_>; 3] {
        let parts = [
            &self.header[..self.header_len],
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
    /// RocketMQ 5's AutoSwitch HA: the slave's frames (its handshake, then reports) are read
    /// into `got`; `answer_due` while its handshake waits for the master's answer.
    AutoSwitch {
        epochs: Arc<EpochFileCache>,
        got: Vec<u8>,
        answer_due: bool,
        /// The slave's `isSyncFromLastFile`: an empty slave starts at the last segment.
        sync_from_last_file: bool,
    },
}

pub(super) struct HaConnection {
    pub(super) stream: TcpStream,
    status: Arc<ConnectionStatus>,
    phase: Phase,
    /// Bytes still to send before the classic protocol starts (challenge or proof).
    control: Vec<u8>,
    report_buf: [u8; REPORT_LEN + CRC_LEN],
    report_len: usize,
    /// The CRC extension was negotiated for this connection.
    crc: bool,
    /// The socket said WouldBlock: nothing more can be written until its writable edge, so the
    /// loop sleeps instead of retrying (which would spin a core the slave needs).
    pub(super) write_blocked: bool,
    /// The slave's authenticated id, or the connection id without authentication: one slave
    /// counts once in the ack table however many connections it has had.
    pub(super) slave_key: u64,
    write: Option<PendingWrite>,
    last_read: Instant,
    last_write: Instant,
    accepted: Instant,
    flow: FlowMonitor,
    /// Why the slave is refused once the frame that shows it where the master's log starts
    /// went out: it asked for an offset retention deleted.
    floor_refusal: Option<Close>,
}

impl HaConnection {
    /// A connection just accepted; with `auth_secret` it starts by sending the challenge, with
    /// `epochs` it waits for an AutoSwitch handshake.
    pub(super) fn new(
        id: u64,
        stream: TcpStream,
        addr: String,
        auth_secret: bool,
        epochs: Option<Arc<EpochFileCache>>,
    ) -> Self {
        let now = Instant::now();
        let (phase, control) = match epochs {
            Some(epochs) => {
                let got = Vec::with_capacity(64);
                let phase = Phase::AutoSwitch {
                    epochs,
                    got,
                    answer_due: false,
                    sync_from_last_file: false,
                };
                (phase, Vec::new())
            }
            None if auth_secret => {
                let challenge = auth::challenge();
                let got = Vec::with_capacity(SLAVE_RESPONSE_LEN);
                (Phase::Handshake { challenge, got }, challenge.to_vec())
            }
            None => (Phase::Transfer, Vec::new()),
        };
        let status = ConnectionStatus {
            id,
            addr,
            since_ms: now_millis(),
            auth: auth_secret,
            slave_ack_offset: AtomicU64::new(0),
            next_transfer_from_where: AtomicU64::new(UNSET),
            bytes_sent: AtomicU64::new(0),
            last_ack_ms: AtomicI64::new(0),
            slave_id: AtomicU64::new(UNSET),
        };
        Self {
            stream,
            status: Arc::new(status),
            phase,
            control,
            report_buf: [0; REPORT_LEN + CRC_LEN],
            report_len: 0,
            crc: false,
            write_blocked: false,
            slave_key: id,
            write: None,
            last_read: now,
            last_write: now,
            accepted: now,
            flow: FlowMonitor::new(now),
            floor_refusal: None,
        }
    }

    pub(super) fn id(&self) -> u64 {
        self.status.id
    }
    pub(super) fn addr(&self) -> &str {
        &self.status.addr
    }
    pub(super) fn status(&self) -> &Arc<ConnectionStatus> {
        &self.status
    }
    fn next_transfer_from_where(&self) -> Option<u64> {
        self.status.next_transfer_from_where()
    }
    /// The handshake is over (or there was none) and the secret, if any, was proven; or an
    /// AutoSwitch slave said its broker id.
    pub(super) fn authenticated(&self) -> bool {
        match self.phase {
            Phase::Transfer => self.status.auth,
            Phase::AutoSwitch { .. } => self.status.slave_id.load(Ordering::Acquire) != UNSET,
            Phase::Handshake { .. } => false,
        }
    }

    fn holds(&self, max_offset: u64, batch: usize, now: Instant) -> bool {
        self.next_transfer_from_where().is_some_and(|next| {
            group_hold(
                next,
                self.status.slave_ack_offset.load(Ordering::Relaxed),
                max_offset,
                batch,
                now.saturating_duration_since(self.last_write),
            )
        })
    }

    /// Why housekeeping closes this connection now, if it does.
    pub(super) fn expired(&self, cfg: &HaConfig, now: Instant) -> Option<Close> {
        if now.duration_since(self.last_read) > cfg.housekeeping_interval {
            return Some(format!(
                "housekeeping: nothing read from the slave for {} ms (haHousekeepingInterval)",
                cfg.housekeeping_interval.as_millis()
            ));
        }
        if matches!(self.phase, Phase::Handshake { .. })
            && now.duration_since(self.accepted) > cfg.handshake_timeout()
        {
            return Some("authentication timed out: the peer sent no valid response".into());
        }
        None
    }

    /// When the loop must look at this connection again without a socket event, and the max
    /// offset an append must reach to be worth waking for ([`AWAKE`]: none is).
    pub(super) fn wake_bounds(&self, cfg: &HaConfig, max: u64, now: Instant) -> (Instant, u64) {
        let batch = cfg.transfer_batch_size;
        let mut deadline = self.last_read + cfg.housekeeping_interval;
        if matches!(self.phase, Phase::Handshake { .. }) {
            deadline = deadline.min(self.accepted + cfg.handshake_timeout());
        }
        let Some(next) = self.next_transfer_from_where() else {
            return (deadline, AWAKE);
        };
        deadline = deadline.min(self.last_write + cfg.heartbeat_interval);
        let mut wake_at = AWAKE;
        if self.flow.spent(cfg.max_transfer_bytes_per_second, now) {
            // Only the window reopening lets it send again, not an append.
            deadline = deadline.min(self.flow.reopens_at());
        } else if self.holds(max, batch, now) {
            deadline = deadline.min(self.last_write + GROUP_HOLD_MAX);
            wake_at = next + batch as u64;
        } else if !self.write_blocked {
            wake_at = next + 1;
        }
        (deadline, wake_at)
    }

    /// Has bytes it could write right now.
    pub(super) fn busy(&self, cfg: &HaConfig, max: u64, now: Instant) -> bool {
        !self.write_blocked
            && (self.write.is_some()
                || !self.control.is_empty()
                || (self.next_transfer_from_where().is_some_and(|n| n < max)
                    && !self.flow.spent(cfg.max_transfer_bytes_per_second, now)
                    && !self.holds(max, cfg.transfer_batch_size, now)))
    }

    /// The read half: the handshake response, then offset reports. Returns the last complete
    /// report read, as only that one counts (acks coalesce).
    ///
    /// A read shorter than the buffer drained the socket (the slave's next report raises a new
    /// epoll edge), so the read that would only say EAGAIN is skipped: one syscall per ack.
    /// Once epoll reported the slave's FIN (`closed`), it reads on to the end of the stream.
    pub(super) fn read(
        &mut self,
        secret: Option<&[u8]>,
        closed: bool,
    ) -> Result<Option<u64>, Close> {
        let mut buf = [0u8; 4096];
        let mut latest = None;
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(CLOSED_BY_SLAVE.into()),
                Ok(n) => {
                    self.last_read = Instant::now();
                    let data = self.handshake(secret, &buf[..n])?;
                    if let Some(offset) = self.reports(data)? {
                        latest = Some(offset);
                    }
                    if n < buf.len() && !closed {
                        return Ok(latest);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(latest),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
    }

    /// Takes the slave's handshake response from `data` while one is due, and answers it with
    /// the master's proof; returns the bytes after it.
    fn handshake<'a>(&mut self, secret: Option<&[u8]>, data: &'a [u8]) -> Result<&'a [u8], Close> {
        let Phase::Handshake { challenge, got } = &mut self.phase else {
            return Ok(data);
        };
        let take = (SLAVE_RESPONSE_LEN - got.len()).min(data.len());
        got.extend_from_slice(&data[..take]);
        if got.len() < SLAVE_RESPONSE_LEN {
            return Ok(&data[take..]);
        }
        let mut response = [0u8; SLAVE_RESPONSE_LEN];
        response.copy_from_slice(got);
        let secret = secret.unwrap_or_default();
        let Some((slave_id, flags)) = auth::verify_slave(secret, challenge, &response) else {
            return Err("authentication failed: wrong or missing haAuthSecret".into());
        };
        let proof = auth::master_proof(secret, challenge, &response, flags);
        self.control.extend_from_slice(&proof);
        self.crc = flags & auth::FLAG_FRAME_CRC != 0;
        self.slave_key = slave_id;
        self.status.slave_id.store(slave_id, Ordering::Release);
        self.phase = Phase::Transfer;
        Ok(&data[take..])
    }

    /// Decodes the offset reports completed by `data`; returns the last.
    fn reports(&mut self, data: &[u8]) -> Result<Option<u64>, Close> {
        if let Phase::AutoSwitch { .. } = self.phase {
            return self.autoswitch_frames(data);
        }
        let report_len = REPORT_LEN + if self.crc { CRC_LEN } else { 0 };
        let mut latest = None;
        for &b in data {
            self.report_buf[self.report_len] = b;
            self.report_len += 1;
            if self.report_len == report_len {
                self.report_len = 0;
                let (report, trailer) = self.report_buf.split_at(REPORT_LEN);
                if self.crc && frame::crc_trailer(&[report])[..] != trailer[..CRC_LEN] {
                    return Err("offset report failed its CRC32 check".into());
                }
                let mut raw = [0u8; REPORT_LEN];
                raw.copy_from_slice(report);
                let offset =
                    frame::decode_report(raw).map_err(|e| format!("bad offset report: {e}"))?;
                latest = Some(offset);
            }
        }
        Ok(latest)
    }

    /// AutoSwitch: the slave's handshake (its broker id, answered with the master's epochs
    /// on the next write) and its 12-byte reports; returns the last report.
    fn autoswitch_frames(&mut self, data: &[u8]) -> Result<Option<u64>, Close> {
        let transferring = self.next_transfer_from_where().is_some();
        let Phase::AutoSwitch {
            got,
            answer_due,
            sync_from_last_file,
            ..
        } = &mut self.phase
        else {
            return Ok(None);
        };
        got.extend_from_slice(data);
        let mut latest = None;
        let mut at = 0;
        while let Some((frame, len)) =
            decode_slave_frame(&got[at..]).map_err(|e| format!("bad frame from the slave: {e}"))?
        {
            at += len;
            match frame {
                SlaveFrame::Handshake(_) if transferring || latest.is_some() => {
                    return Err("the slave sent a handshake during the transfer".into());
                }
                SlaveFrame::Handshake(hello) => {
                    let id = u64::try_from(hello.broker_id).map_err(|_| {
                        format!("the slave's handshake names broker id {}", hello.broker_id)
                    })?;
                    *answer_due = true;
                    *sync_from_last_file = hello.sync_from_last_file;
                    self.slave_key = id;
                    self.status.slave_id.store(id, Ordering::Release);
                }
                SlaveFrame::Report(_) if self.status.slave_id.load(Ordering::Acquire) == UNSET => {
                    return Err("the slave reported an offset before its handshake".into());
                }
                SlaveFrame::Report(offset) => latest = Some(offset),
            }
        }
        got.drain(..at);
        Ok(latest)
    }

    /// A slave's offset report: the first one fixes `next_transfer_from_where`, which this
    /// returns; every one is the slave's ack.
    pub(super) fn on_report(
        &mut self,
        offset: u64,
        store: &MessageStore,
        sync_from_last_file: bool,
    ) -> Result<Option<u64>, Close> {
        let (min, max) = (store.min_offset(), store.max_offset());
        let sync_from_last_file = match self.phase {
            // The slave says which it wants, in its handshake.
            Phase::AutoSwitch {
                sync_from_last_file,
                ..
            } => sync_from_last_file,
            _ => sync_from_last_file,
        };
        if offset > max {
            return Err(format!(
                "slave reported offset {offset} beyond the master's max offset {max}: refusing a fake or divergent ack"
            ));
        }
        let start = match self.next_transfer_from_where() {
            Some(_) => None,
            None if offset == 0 && sync_from_last_file => {
                let size = store.commit_log().file_size() as u64;
                Some(max - max % size)
            }
            None if offset == 0 => Some(min),
            None if offset < min => {
                self.refuse_below_floor("asked to resume at", offset, min, max);
                return Ok(None);
            }
            None => Some(offset),
        };
        self.status
            .slave_ack_offset
            .store(offset, Ordering::Release);
        self.status
            .last_ack_ms
            .store(now_millis(), Ordering::Release);
        if let Some(start) = start {
            self.status
                .next_transfer_from_where
                .store(start, Ordering::Release);
        }
        Ok(start)
    }

    /// RocketMQ's master would look for `offset` forever and send only heartbeats: a slave
    /// stuck without a word. Ours sends one heartbeat at its min offset, which the slave's
    /// offset check reports as the floor, then closes, saying why.
    fn refuse_below_floor(&mut self, what: &str, offset: u64, min: u64, confirm: u64) {
        self.floor_refusal = Some(format!(
            "slave {what} offset {offset}, below the master's min offset {min}: retention \
             (fileReservedTime, diskMaxUsedSpaceRatio) deleted the segments it needs, so it can \
             never catch up from there. Repair the slave: stop it, move its store aside and \
             start it empty; it then copies from the master's min offset"
        ));
        let label = self.label(min, confirm).map(|(l, _)| l);
        self.write = Some(PendingWrite::new(min, None, self.crc, label));
    }

    /// AutoSwitch: the label of a frame at `offset` (the epoch that wrote it, or the last one
    /// for a heartbeat at the end) and where that epoch ends. A frame never crosses an epoch's
    /// end, so each is labelled with the epoch of its own bytes (RocketMQ labels the frame
    /// that reaches the end with the next one; its slaves take either).
    fn label(&self, offset: u64, confirm: u64) -> Option<(EpochLabel, u64)> {
        let Phase::AutoSwitch { epochs, .. } = &self.phase else {
            return None;
        };
        let entry = epochs
            .entry_by_offset(offset)
            .or_else(|| epochs.last_entry())?;
        let label = EpochLabel {
            epoch: entry.epoch,
            start: entry.start_offset,
            confirm,
        };
        Some((label, entry.end_offset))
    }

    /// AutoSwitch: the answer to the slave's handshake (the master's max offset and epochs),
    /// queued once the handshake came.
    fn answer_handshake(&mut self, store: &MessageStore) {
        let Phase::AutoSwitch {
            epochs, answer_due, ..
        } = &mut self.phase
        else {
            return;
        };
        if std::mem::take(answer_due) {
            let entries = epochs.entries();
            // What a RocketMQ slave can take (its buffer holds 1000); retention keeps the list
            // far shorter.
            let from = entries.len().saturating_sub(MAX_EPOCH_ENTRIES);
            let answer = encode_master_handshake(store.max_offset(), &entries[from..]);
            self.control.extend_from_slice(&answer);
        }
    }

    /// The write half: writes until the socket would block, the slave is caught up or flow
    /// control says wait.
    pub(super) fn write(
        &mut self,
        store: &MessageStore,
        cfg: &HaConfig,
        now: Instant,
    ) -> Result<(), Close> {
        self.answer_handshake(store);
        if self.write_blocked || !self.write_control()? {
            return Ok(());
        }
        if let Some(reason) = self.floor_refusal.clone() {
            while self.write.is_some() {
                if !self.write_frame(now)? {
                    return Ok(());
                }
            }
            return Err(reason);
        }
        let batch = cfg.transfer_batch_size;
        let max = store.max_offset();
        loop {
            if self.write.is_none() {
                let Some(next) = self.next_transfer_from_where() else {
                    return Ok(());
                };
                if self.holds(max, batch, now) {
                    return Ok(());
                }
                let mut allowance =
                    self.flow
                        .allowance(cfg.max_transfer_bytes_per_second, batch, now);
                // What consumers may read: with allAckInSyncStateSet and slaves in the set,
                // what every member holds; else all the master wrote.
                let label = self.label(next, store.confirm_offset());
                if let Some((_, end)) = label {
                    allowance = allowance.min(end.saturating_sub(next) as usize);
                }
                let label = label.map(|(l, _)| l);
                if allowance == 0 {
                    return Ok(());
                }
                self.write = match store.read_raw(next, allowance) {
                    Some(body) => {
                        self.flow.sent(body.len());
                        Some(PendingWrite::new(next, Some(body), self.crc, label))
                    }
                    // Retention deleted what a slow slave was still to get.
                    None if next < store.min_offset() => {
                        let min = store.min_offset();
                        self.refuse_below_floor("fell behind: it needs", next, min, max);
                        return Ok(());
                    }
                    None if now.duration_since(self.last_write) >= cfg.heartbeat_interval => {
                        Some(PendingWrite::new(next, None, self.crc, label))
                    }
                    None => return Ok(()),
                };
            }
            if !self.write_frame(now)? {
                return Ok(());
            }
        }
    }

    /// Sends the pending handshake bytes; false while the socket has no room for them.
    fn write_control(&mut self) -> Result<bool, Close> {
        while !self.control.is_empty() {
            match self.stream.write(&self.control) {
                Ok(n) => {
                    self.control.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.write_blocked = true;
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write failed: {e}")),
            }
        }
        Ok(true)
    }

    /// One writev of the pending frame; false once the socket would block.
    fn write_frame(&mut self, now: Instant) -> Result<bool, Close> {
        let Some(w) = self.write.as_mut() else {
            return Ok(true);
        };
        match self.stream.write_vectored(&w.remaining()) {
            Ok(n) => {
                w.done += n;
                self.status
                    .bytes_sent
                    .fetch_add(n as u64, Ordering::Release);
                if w.done == w.total() {
                    let len = w.body_len() as u64;
                    self.status
                        .next_transfer_from_where
                        .fetch_add(len, Ordering::Release);
                    self.last_write = now;
                    self.write = None;
                }
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.write_blocked = true;
                Ok(false)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(format!("write failed: {e}")),
        }
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
}
