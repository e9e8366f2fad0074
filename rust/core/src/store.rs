//! The message store: commit log + consume queues + flush policy, with RocketMQ's directory
//! layout (`commitlog/`, `consumequeue/<topic>/<queueId>/`, `abort`, `checkpoint`, `lock`).

mod checkpoint;
mod clean;
pub(crate) mod confirm;
mod confirm_offset;
mod index;
mod open;
mod query;
mod reput;
pub(crate) mod schedule;
pub(crate) mod timer;
use checkpoint::write_checkpoint;
pub mod group_transfer;

pub use clean::{CleanConfig, CleanEvents, CleanReport};
pub use index::{IndexConfig, KeyQuery, QueryOffsetResult};
pub(crate) use schedule::{parse_message_delay_level, render_message_delay_level};
pub use timer::{TimerConfig, TimerStatus};

use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use rustc_hash::FxHashMap;

use crate::commitlog::flush::{FlushDiskType, FlushService, FlushStats};
use crate::commitlog::record::{self, MessageDraft};
use crate::commitlog::recover::RecoveryReport;
use crate::commitlog::{
    AppendResult, CommitLog, LogSlice, OwnedRecord, RecordIter, DEFAULT_MAPPED_FILE_SIZE,
};
use crate::consume_queue::{
    ConsumeQueue, ConsumeQueueTable, CqEntry, CQ_ENTRY_SIZE, DEFAULT_CQ_ENTRIES_PER_FILE,
};
use crate::error::{CommitLogError, MidLogCorruption, RecordError};
pub use crate::protocol::now_millis;
use crate::sync::{lock, read, write};
use clean::Retention;
use group_transfer::{Completion, GroupTransferService, PutStatus, WaitPolicy};
use index::IndexService;
use schedule::{ScheduleMessageService, ScheduleStore, Scheduled};
use timer::{asks_for_timer, Timed, TimerMessageStore, TimerStore, TIMER_TOPIC};

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub root: PathBuf,
    pub mapped_file_size: u64,
    pub cq_entries_per_file: usize,
    pub flush_disk_type: FlushDiskType,
    pub flush_interval: Duration,
    pub store_host: SocketAddr,
    /// `syncFlushTimeout`: how long a SYNC_FLUSH put waits for its msync.
    pub sync_flush_timeout: Duration,
    /// SYNC_MASTER: distinct slaves that must ack a put (`inSyncReplicas - 1`); 0 otherwise.
    pub sync_slaves: usize,
    /// `slaveTimeout`.
    pub slave_timeout: Duration,
    /// `haMaxGapNotInSync`.
    pub ha_max_gap_not_in_sync: u64,
    /// `minInSyncReplicas`: what a controller-mode master's SyncStateSet must hold for a put.
    pub min_in_sync_replicas: usize,
    /// Open without lock, recovery or writes: for readers of a store a broker is serving.
    pub read_only: bool,
    /// `haAcceptZeroBodyCrc`: a BODYCRC of 0 passes recovery and CRC-checking reads (every
    /// other check stays on), for logs replicated from peers that never fill it in.
    pub accept_zero_body_crc: bool,
    /// An explicit repair: recovery cuts mid-log corruption too, instead of failing the open.
    pub truncate_at_corruption: bool,
    /// Retention: `deleteWhen`, `fileReservedTime` and the disk ratios (writable stores).
    pub clean: CleanConfig,
    /// `storePathCommitLog`: the commit log's directory when not `root/commitlog`.
    pub store_path_commit_log: Option<PathBuf>,
    /// `messageDelayLevel` in ms, level 1 first: what a put with property `DELAY` waits.
    pub message_delay_level: Vec<i64>,
    /// `flushDelayOffsetInterval`: how often the delivery progress reaches
    /// `config/delayOffset.json`.
    pub flush_delay_offset_interval: Duration,
    /// `messageIndexEnable`, `maxHashSlotNum`, `maxIndexNum`: finding messages by key.
    pub index: IndexConfig,
    /// `timerWheelEnable` and the timer store's keys: delivery at any moment.
    pub timer: TimerConfig,
}

impl StoreConfig {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            mapped_file_size: DEFAULT_MAPPED_FILE_SIZE,
            cq_entries_per_file: DEFAULT_CQ_ENTRIES_PER_FILE,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval: Duration::from_millis(500),
            store_host: SocketAddr::from(([127, 0, 0, 1], 10911)),
            sync_flush_timeout: Duration::from_millis(5000),
            sync_slaves: 0,
            slave_timeout: WaitPolicy::default().slave_timeout,
            ha_max_gap_not_in_sync: WaitPolicy::default().max_gap_not_in_sync,
            min_in_sync_replicas: 1,
            read_only: false,
            accept_zero_body_crc: false,
            truncate_at_corruption: false,
            clean: CleanConfig::default(),
            store_path_commit_log: None,
            message_delay_level: parse_message_delay_level(schedule::DEFAULT_MESSAGE_DELAY_LEVEL)
                .unwrap_or_default(),
            flush_delay_offset_interval: Duration::from_secs(10),
            index: IndexConfig::default(),
            timer: TimerConfig::default(),
        }
    }

    /// `mappedFileSizeConsumeQueue`: the bytes of one consume queue file.
    pub(crate) fn mapped_file_size_consume_queue(&self) -> usize {
        self.cq_entries_per_file * CQ_ENTRY_SIZE
    }

    /// Sets the consume queue files' size from `mappedFileSizeConsumeQueue`, in bytes as
    /// RocketMQ gives it: a whole positive number of entries.
    pub(crate) fn set_mapped_file_size_consume_queue(
        &mut self,
        bytes: usize,
    ) -> Result<(), String> {
        if bytes == 0 || !bytes.is_multiple_of(CQ_ENTRY_SIZE) {
            return Err(format!(
                "mappedFileSizeConsumeQueue: {bytes} must be a positive multiple of \
                 {CQ_ENTRY_SIZE} (the size of a consume queue entry)"
            ));
        }
        self.cq_entries_per_file = bytes / CQ_ENTRY_SIZE;
        Ok(())
    }

    /// Where the commit log's segments live.
    pub(crate) fn commit_log_dir(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.root.join("commitlog"))
    }

    /// What a put waits for under this configuration.
    pub fn wait_policy(&self) -> WaitPolicy {
        WaitPolicy {
            sync_flush_timeout: (self.flush_disk_type == FlushDiskType::SyncFlush)
                .then_some(self.sync_flush_timeout),
            slaves: self.sync_slaves,
            slave_timeout: self.slave_timeout,
            max_gap_not_in_sync: self.ha_max_gap_not_in_sync,
            // Set by the HA master with the SyncStateSet, in controller mode only.
            in_sync_replicas: None,
            min_in_sync_replicas: self.min_in_sync_replicas,
        }
    }
}

/// One commit log segment file: where it starts and how many bytes it holds.
#[derive(Debug, Clone)]
pub struct Segment {
    pub path: PathBuf,
    pub start: u64,
    pub used: usize,
}

/// Writer-side state, guarded by the put lock.
/// Next queue offset and consume queue of every (topic, queue id): RocketMQ's `topicQueueTable`.
/// Fx-hashed: looked up for every record put or replicated, with keys the store controls.
type TopicQueueTable = FxHashMap<String, FxHashMap<i32, (i64, Arc<ConsumeQueue>)>>;

struct PutState {
    queues: TopicQueueTable,
    /// Commit log offset up to which records were dispatched to consume queues (the reput
    /// offset).
    reput_offset: u64,
    /// Controller mode: the records past the reput offset held back for the confirm offset.
    confirm: Option<confirm_offset::Confirm>,
}

pub(crate) type AppendListener = Arc<dyn Fn(u64) + Send + Sync>;
/// RocketMQ's `MessageArrivingListener`: told `(topic, queue id, next queue offset, tag hash,
/// encoded properties)` for every record dispatched into a consume queue, on a master's put and a slave's replication alike.
/// Runs under the put lock, so it must only hand the news on.
pub(crate) type ArrivingListener = Arc<dyn Fn(&str, i32, i64, i64, &[u8]) + Send + Sync>;

pub struct MessageStore {
    config: StoreConfig,
    commit_log: Arc<CommitLog>,
    consume_queues: Arc<ConsumeQueueTable>,
    /// The single-writer lock: appends, replica appends and dispatch happen under it so
    /// records, queue offsets and consume queue entries stay in one order.
    put: Mutex<PutState>,
    flush: OnceLock<FlushService>,
    /// Where puts wait for their flush and their slaves (writable stores only).
    group_transfer: OnceLock<Arc<GroupTransferService>>,
    /// Called after each publish with the new max offset (the HA master's wake-up).
    listener: RwLock<Option<AppendListener>>,
    /// Called for each record dispatched to a consume queue (the held pulls' and pops'
    /// wake-up, the revive service's).
    arriving: RwLock<Vec<ArrivingListener>>,
    /// While records are held for the confirm offset, the end of the last one dispatched;
    /// `u64::MAX` otherwise. Read without the put lock: by the HA master for each frame's
    /// header, and by the index, which covers what consumers can read.
    confirmed: Arc<AtomicU64>,
    recovery: RecoveryReport,
    /// Read-only stores: why the last refresh stopped before the bytes ran out, if it did.
    scan_error: Mutex<Option<(u64, PathBuf, crate::error::RecordError)>>,
    /// Read-only stores: mid-log corruption the open found (a writable open fails on it).
    corruption: OnceLock<MidLogCorruption>,
    lock_file: Mutex<Option<File>>,
    closed: AtomicBool,
    /// CleanCommitLogService and CleanConsumeQueueService (writable stores only).
    retention: OnceLock<Arc<Retention>>,
    /// Delay levels: where puts with `DELAY` wait, delivered when due on a master.
    schedule: ScheduleMessageService,
    /// `timerWheelEnable` on a writable store: the timer store.
    timer: Option<TimerMessageStore>,
    /// Messages by key (`messageIndexEnable`); a read-only store maps what the writer built.
    index: Option<Arc<IndexService>>,
}

impl MessageStore {
    fn lock_put(&self) -> std::sync::MutexGuard<'_, PutState> {
        lock(&self.put)
    }

    fn check_writable(&self) -> Result<(), CommitLogError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CommitLogError::Closed);
        }
        if self.config.read_only {
            return Err(CommitLogError::ReadOnly);
        }
        Ok(())
    }

    /// Puts (not a slave's replication, which its own retention keeps going) are refused
    /// while the disk is past `diskSpaceWarningLevelRatio`.
    fn check_disk(&self) -> Result<(), CommitLogError> {
        self.retention.get().map_or(Ok(()), |r| r.check_put())
    }

    /// Runs one retention pass now (RocketMQ runs one every `cleanResourceInterval`), by the
    /// same rules: what an operator's "delete expired files now" and tests use.
    pub fn clean_now(&self) -> Result<CleanReport, CommitLogError> {
        self.check_writable()?;
        let retention = self.retention.get().ok_or(CommitLogError::ReadOnly)?;
        retention.run_pass(&self.commit_log, &self.consume_queues)
    }

    /// Tests only: act on this disk use (0.0-1.0) instead of the filesystem's; `None` measures
    /// again. Lets a test run a full disk without filling one.
    pub fn set_fake_disk_used_ratio(&self, ratio: Option<f64>) -> Result<(), CommitLogError> {
        let retention = self.retention.get().ok_or(CommitLogError::ReadOnly)?;
        retention.set_fake_disk_used_ratio(ratio);
        Ok(())
    }

    /// Keeps every commit log segment holding records at or past `offset` from retention (the
    /// table tier: what it has not written yet); `None` lifts the floor.
    pub fn set_retention_floor(&self, offset: Option<u64>) -> Result<(), CommitLogError> {
        let retention = self.retention.get().ok_or(CommitLogError::ReadOnly)?;
        retention.set_keep_from(offset);
        Ok(())
    }

    /// Retention's log lines (deletions, disk full and back); `None` for a read-only store.
    pub fn clean_events(&self) -> Option<CleanEvents> {
        self.retention.get().cloned().map(CleanEvents::new)
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }
    pub fn commit_log(&self) -> &CommitLog {
        &self.commit_log
    }
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }
    /// Read-only stores: where and why valid data ended at the last refresh, when that was an
    /// invalid record rather than zeroed space (a writer mid-append, or corruption).
    pub fn scan_error(&self) -> Option<(u64, PathBuf, crate::error::RecordError)> {
        lock(&self.scan_error).clone()
    }

    /// Mid-log corruption: what a read-only open found, or what a writable open told to
    /// `truncate_at_corruption` cut.
    pub fn corruption(&self) -> Option<&MidLogCorruption> {
        self.corruption
            .get()
            .or(self.recovery.cut_corruption.as_ref())
    }

    pub fn min_offset(&self) -> u64 {
        self.commit_log.min_offset()
    }
    pub fn max_offset(&self) -> u64 {
        self.commit_log.max_offset()
    }
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn set_append_listener(&self, listener: Option<AppendListener>) {
        *write(&self.listener) = listener;
    }

    pub(crate) fn add_arriving_listener(&self, listener: ArrivingListener) {
        write(&self.arriving).push(listener);
    }

    fn arrived(
        &self,
        topic: &str,
        queue_id: i32,
        next_queue_offset: i64,
        tags_code: i64,
        properties: &[u8],
    ) {
        for listener in read(&self.arriving).iter() {
            listener(topic, queue_id, next_queue_offset, tags_code, properties);
        }
    }

    fn published(&self) {
        if let Some(listener) = read(&self.listener).as_ref() {
            listener(self.commit_log.max_offset());
        }
        if let Some(index) = &self.index {
            index.published();
        }
    }

    fn append_locked(
        &self,
        st: &mut PutState,
        draft: &MessageDraft<'_>,
        now: i64,
    ) -> Result<AppendResult, CommitLogError> {
        let queues = match st.queues.get_mut(draft.topic) {
            Some(q) => q,
            None => st.queues.entry(draft.topic.to_owned()).or_default(),
        };
        let slot = match queues.get_mut(&draft.queue_id) {
            Some(slot) => slot,
            None => {
                let cq = self
                    .consume_queues
                    .get_or_create(draft.topic, draft.queue_id)?;
                queues
                    .entry(draft.queue_id)
                    .or_insert((cq.max_queue_offset(), cq))
            }
        };
        let result = self.commit_log.append(draft, slot.0, now)?;
        slot.0 += 1;
        if let Some(c) = st.confirm.as_mut() {
            // Held until every member of the SyncStateSet holds it (see `confirm`).
            c.complete = result.next_offset();
            return Ok(result);
        }
        let tags_code = record::tags_code(
            draft.topic.as_bytes(),
            draft.properties,
            result.store_timestamp,
            &self.config.message_delay_level,
        );
        st.reput_offset = result.next_offset();
        slot.1.put(
            result.queue_offset,
            CqEntry {
                commitlog_offset: result.offset as i64,
                size: result.size as i32,
                tags_code,
            },
        )?;
        self.arrived(
            draft.topic,
            draft.queue_id,
            result.queue_offset + 1,
            tags_code,
            draft.properties,
        );
        self.timer_arrived(draft.topic);
        Ok(result)
    }

    /// A record reached the timer topic's queue: the timer places it.
    fn timer_arrived(&self, topic: &str) {
        if topic == TIMER_TOPIC {
            if let Some(timer) = &self.timer {
                timer.arrived();
            }
        }
    }

    /// Appends one message; the caller then waits with [`Self::wait_for_put`] or
    /// [`Self::submit_put`] as the role and flush type demand.
    /// A put whose `DELAY` asks for a level goes to `SCHEDULE_TOPIC_XXXX` instead, until due;
    /// one with a timer property (and no level) to `rmq_sys_wheel_timer`.
    pub fn put(&self, draft: &MessageDraft<'_>) -> Result<AppendResult, CommitLogError> {
        // The message as sent first: a bad topic must not hide in `REAL_TOPIC` until due.
        draft.validate()?;
        let Some(scheduled) = Scheduled::of(draft, &self.config.message_delay_level)? else {
            if draft.topic != TIMER_TOPIC && asks_for_timer(draft.properties) {
                self.check_writable()?;
                let timer = self.timer.as_ref().ok_or(RecordError::TimerNotEnabled)?;
                if let Some(timed) = Timed::of(draft, timer, now_millis())? {
                    return self.put_now(&timed.draft(draft));
                }
            }
            return self.put_now(draft);
        };
        let result = self.put_now(&scheduled.draft(draft))?;
        self.schedule
            .scheduled(result.store_timestamp.saturating_add(scheduled.delay_ms));
        Ok(result)
    }

    /// Appends `draft` where it says, whatever its `DELAY`: the schedule service's delivery of
    /// a due message, which keeps its `DELAY` property as RocketMQ's does.
    pub(crate) fn put_now(&self, draft: &MessageDraft<'_>) -> Result<AppendResult, CommitLogError> {
        draft.validate()?;
        self.check_writable()?;
        self.check_disk()?;
        let result = {
            let mut st = self.lock_put();
            self.append_locked(&mut st, draft, now_millis())?
        };
        self.published();
        Ok(result)
    }

    /// Appends many messages under one lock acquisition. Every draft is validated first, so an
    /// invalid one fails the batch before anything is written.
    pub fn put_batch(
        &self,
        drafts: &[MessageDraft<'_>],
    ) -> Result<Vec<AppendResult>, CommitLogError> {
        for d in drafts {
            d.validate()?;
            if schedule::delay_level(d.properties)?.is_some() {
                return Err(RecordError::DelayedBatch.into());
            }
            if d.topic != TIMER_TOPIC && asks_for_timer(d.properties) {
                return Err(RecordError::TimerBatch.into());
            }
        }
        self.check_writable()?;
        self.check_disk()?;
        let now = now_millis();
        let mut out = Vec::with_capacity(drafts.len());
        {
            let mut st = self.lock_put();
            for d in drafts {
                out.push(self.append_locked(&mut st, d, now)?);
            }
        }
        self.published();
        Ok(out)
    }

    /// The timer's progress (`None`: `timerWheelEnable=false`, or a read-only store).
    pub fn timer_status(&self) -> Option<TimerStatus> {
        self.timer.as_ref().map(|t| t.status(self))
    }

    /// The timer store (GET_TIMER_CHECK_POINT, GET_TIMER_METRICS, a slave's sync).
    pub(crate) fn timer(&self) -> Option<&TimerMessageStore> {
        self.timer.as_ref()
    }

    /// Starts the timer: placing on every node, delivering on a master (`master`).
    pub(crate) fn start_timer(self: &Arc<Self>, master: bool) -> std::io::Result<()> {
        match &self.timer {
            Some(timer) => timer.start(self.clone(), master),
            None => Ok(()),
        }
    }

    /// Stops the timer's threads and writes its files (also done by [`Self::close`]).
    pub(crate) fn shutdown_timer(&self) {
        if let Some(timer) = &self.timer {
            timer.shutdown();
        }
    }

    /// A replica's append of bytes received from its master, then dispatch of every record
    /// they complete. `accept_zero_body_crc` (`haAcceptZeroBodyCrc`) lets records with a
    /// BODYCRC of 0 in; every other check stays on.
    pub fn append_raw(
        &self,
        offset: u64,
        data: &[u8],
        accept_zero_body_crc: bool,
    ) -> Result<(), CommitLogError> {
        self.check_writable()?;
        {
            let mut st = self.lock_put();
            let PutState {
                queues,
                reput_offset,
                confirm,
            } = &mut *st;
            match confirm {
                // Checked as they complete, dispatched once confirmed.
                Some(c) => self.commit_log.append_raw(
                    offset,
                    &mut c.complete,
                    data,
                    accept_zero_body_crc,
                    |_| Ok(()),
                )?,
                None => self.commit_log.append_raw(
                    offset,
                    reput_offset,
                    data,
                    accept_zero_body_crc,
                    |r| self.dispatch(queues, r),
                )?,
            }
            self.dispatch_confirmed(&mut st)?;
            self.publish_confirm(&st);
        }
        self.published();
        Ok(())
    }

    /// The GroupTransferService puts wait in; `None` for a read-only store.
    pub(crate) fn group_transfer(&self) -> Option<&Arc<GroupTransferService>> {
        self.group_transfer.get()
    }

    /// Asks the flush thread for an msync covering a SYNC_FLUSH put: RocketMQ's group commit.
    fn request_flush(&self, next_offset: u64) {
        if self.config.flush_disk_type == FlushDiskType::SyncFlush {
            if let Some(f) = self.flush.get() {
                f.request(next_offset);
            }
        }
    }

    /// A put waits for an msync or for slaves' acks under the policy as it is now (controller
    /// mode changes it with the SyncStateSet).
    pub fn put_waits(&self) -> bool {
        self.group_transfer
            .get()
            .is_some_and(|g| g.policy().waits())
    }

    /// RocketMQ's check before a put that waits for replication is appended: a controller-mode
    /// master whose SyncStateSet holds fewer than `minInSyncReplicas` writes nothing.
    pub fn check_in_sync_replicas(&self) -> Result<(), CommitLogError> {
        let Some(g) = self.group_transfer.get() else {
            return Ok(());
        };
        g.policy()
            .admits()
            .map_err(|(in_sync, min)| CommitLogError::InSyncReplicasNotEnough { in_sync, min })
    }

    /// Blocks until the put whose record ends at `next_offset` is flushed and replicated as
    /// the policy demands; returns its verdict.
    pub fn wait_for_put(&self, next_offset: u64) -> Result<PutStatus, CommitLogError> {
        let gt = self.group_transfer.get().ok_or(CommitLogError::ReadOnly)?;
        self.request_flush(next_offset);
        Ok(gt.wait(next_offset))
    }

    /// Like [`Self::wait_for_put`], but `done` gets the verdict instead of a blocked caller.
    pub fn submit_put(&self, next_offset: u64, done: Completion) -> Result<(), CommitLogError> {
        let gt = self.group_transfer.get().ok_or(CommitLogError::ReadOnly)?;
        self.request_flush(next_offset);
        gt.submit(next_offset, done);
        Ok(())
    }

    pub fn flush_stats(&self) -> FlushStats {
        self.flush.get().map(|f| f.stats()).unwrap_or_default()
    }

    /// Up to `max` complete bytes at `offset`, never crossing a segment.
    /// Every commit log segment, oldest first.
    pub fn segments(&self) -> Vec<Segment> {
        self.commit_log
            .files()
            .files()
            .iter()
            .map(|f| Segment {
                path: f.path().to_owned(),
                start: f.start(),
                used: f.wrote(),
            })
            .collect()
    }

    /// The `ip:port` recorded in every record this store writes (and in its msg ids).
    pub fn store_host(&self) -> SocketAddr {
        self.commit_log.store_host()
    }

    pub fn read_raw(&self, offset: u64, max: usize) -> Option<LogSlice> {
        self.commit_log.read(offset, max)
    }

    /// The raw record at commit log offset `offset` and its store timestamp, if one starts
    /// there (a message looked up by its offset msg id, or a queue entry's store time).
    pub(crate) fn record_at(&self, offset: u64) -> Option<(Vec<u8>, i64)> {
        let slice = self.read_raw(offset, usize::MAX)?;
        match record::decode(slice.bytes(), false) {
            Ok(record::Peeked::Record(r)) if r.physical_offset as u64 == offset => Some((
                slice.bytes()[..r.total_size as usize].to_vec(),
                r.store_timestamp,
            )),
            _ => None,
        }
    }

    pub fn iter_from(&self, offset: u64, check_crc: bool) -> RecordIter<'_> {
        self.commit_log.iter_from(offset, check_crc)
    }

    /// Messages of one queue from `queue_offset`, through its consume queue.
    pub fn get_messages(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
        max: usize,
    ) -> Result<Vec<(i64, OwnedRecord)>, CommitLogError> {
        let Some(cq) = self.consume_queues.get(topic, queue_id) else {
            return Ok(Vec::new());
        };
        let min_offset = cq.min_queue_offset();
        if queue_offset < min_offset {
            return Err(CommitLogError::OffsetTooSmall {
                topic: topic.to_owned(),
                queue_id,
                offset: queue_offset,
                min_offset,
            });
        }
        let mut out = Vec::new();
        for (qo, entry) in cq.get(queue_offset, max) {
            let offset = entry.commitlog_offset as u64;
            if offset < self.min_offset() {
                continue;
            }
            let Some(file) = self.commit_log.files().find(offset) else {
                break;
            };
            let pos = (offset - file.start()) as usize;
            match record::decode(file.readable(pos), false) {
                Ok(record::Peeked::Record(_)) => out.push((qo, OwnedRecord { file, pos })),
                _ => break,
            }
        }
        Ok(out)
    }

    /// The consume queue of `topic` and `queue_id`, if a record ever went there.
    pub(crate) fn consume_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.consume_queues.get(topic, queue_id)
    }

    /// RocketMQ's `lookMessageByOffset`: the message that starts at commit log `offset`, or
    /// `None` when none does (outside the log, or inside or between records).
    pub(crate) fn look_message_by_offset(&self, offset: u64) -> Option<OwnedRecord> {
        if offset < self.min_offset() {
            return None;
        }
        let file = self.commit_log.files().find(offset)?;
        let pos = usize::try_from(offset - file.start()).ok()?;
        match record::decode(file.readable(pos), false) {
            Ok(record::Peeked::Record(r)) if r.physical_offset as u64 == offset => {
                Some(OwnedRecord { file, pos })
            }
            _ => None,
        }
    }

    /// The store time of the message at commit log `offset`, if one starts there.
    fn store_timestamp_at(&self, offset: i64) -> Option<i64> {
        let rec = self.look_message_by_offset(u64::try_from(offset).ok()?)?;
        let at = rec.view().store_timestamp;
        Some(at)
    }

    /// `getEarliestMessageTime`: when the oldest message kept was stored; -1 for none.
    pub(crate) fn earliest_message_time(&self) -> i64 {
        i64::try_from(self.min_offset())
            .ok()
            .and_then(|o| self.store_timestamp_at(o))
            .unwrap_or(-1)
    }

    /// Used share of the filesystem holding the commit log (`commitLogDiskRatio`).
    pub(crate) fn commit_log_disk_ratio(&self) -> Result<f64, CommitLogError> {
        clean::disk_used_ratio(&self.config.commit_log_dir())
    }

    /// The index files, oldest first (none when `messageIndexEnable` is false).
    pub fn index_files(&self) -> Vec<PathBuf> {
        self.index
            .as_ref()
            .map_or_else(Vec::new, |i| i.file_paths())
    }

    /// The delay levels and their delivery progress.
    pub(crate) fn schedule(&self) -> &ScheduleMessageService {
        &self.schedule
    }

    /// Starts delivering due delayed messages: a master's broker calls this; a slave's never
    /// does.
    pub(crate) fn start_schedule(self: &Arc<Self>) -> std::io::Result<()> {
        self.schedule.start(self.clone())
    }

    /// Stops delivering and writes the progress (also done by [`Self::close`]).
    pub(crate) fn shutdown_schedule(&self) {
        self.schedule.shutdown();
    }

    /// (topic, queue id, min queue offset, max queue offset) of every consume queue.
    pub fn queues(&self) -> Vec<(String, i32, i64, i64)> {
        self.consume_queues
            .all()
            .iter()
            .map(|cq| {
                (
                    cq.topic().to_owned(),
                    cq.queue_id(),
                    cq.min_queue_offset(),
                    cq.max_queue_offset(),
                )
            })
            .collect()
    }

    /// RocketMQ's `deleteTopics`: the topic's consume queues go, files and all, so nobody reads
    /// it any more; its records stay in the commit log until retention takes them. A later
    /// put to the topic starts its queues at offset 0. The number of queues it had.
    pub(crate) fn delete_topic(&self, topic: &str) -> Result<usize, CommitLogError> {
        self.check_writable()?;
        // Under the put lock: no put is dispatching into the queues being deleted.
        let mut st = self.lock_put();
        st.queues.remove(topic);
        self.consume_queues.remove(topic)
    }

    /// Cuts the log back to `offset` (a record boundary) and the consume queues with it.
    pub fn truncate_to(&self, offset: u64) -> Result<Vec<PathBuf>, CommitLogError> {
        self.check_writable()?;
        let mut st = self.lock_put();
        let deleted = self.commit_log.truncate_to(offset)?;
        for cq in self.consume_queues.all() {
            cq.truncate_dirty(offset)?;
        }
        for queues in st.queues.values_mut() {
            for slot in queues.values_mut() {
                slot.0 = slot.1.max_queue_offset();
            }
        }
        st.reput_offset = st.reput_offset.min(offset);
        if let Some(c) = st.confirm.as_mut() {
            c.complete = c.complete.min(offset);
            c.offset = c.offset.min(offset);
        }
        self.publish_confirm(&st);
        if let Some(index) = &self.index {
            index.truncate(offset, |o| self.store_timestamp_at(o))?;
        }
        Ok(deleted)
    }

    /// Flushes, writes the checkpoint, removes the abort marker and releases the lock.
    pub fn close(&self) -> Result<(), CommitLogError> {
        if self.closed.swap(true, Ordering::AcqRel) || self.config.read_only {
            return Ok(());
        }
        // Before the put lock: a delivery in progress needs it to finish.
        self.schedule.shutdown();
        self.shutdown_timer();
        if let Some(index) = &self.index {
            index.shutdown();
        }
        let _st = self.lock_put();
        if let Some(r) = self.retention.get() {
            r.stop();
        }
        if let Some(f) = self.flush.get() {
            f.stop();
        }
        // After the last flush, so SYNC_FLUSH puts it covered are answered PUT_OK.
        if let Some(g) = self.group_transfer.get() {
            g.shutdown();
        }
        let files = self.commit_log.files();
        files.discard_prepared();
        for f in files.files() {
            f.flush(f.wrote())?;
        }
        self.consume_queues.flush()?;
        write_checkpoint(&self.config.root, self.commit_log.max_offset())?;
        let abort = self.config.root.join("abort");
        std::fs::remove_file(&abort).map_err(|e| CommitLogError::io(&abort, e))?;
        lock(&self.lock_file).take();
        Ok(())
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl ScheduleStore for MessageStore {
    fn schedule(&self) -> &ScheduleMessageService {
        &self.schedule
    }
    fn consume_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        MessageStore::consume_queue(self, topic, queue_id)
    }
    fn look_message_by_offset(&self, offset: u64) -> Option<OwnedRecord> {
        MessageStore::look_message_by_offset(self, offset)
    }
    fn put_now(&self, draft: &MessageDraft<'_>) -> Result<AppendResult, CommitLogError> {
        MessageStore::put_now(self, draft)
    }
}

impl TimerStore for MessageStore {
    fn timer(&self) -> &TimerMessageStore {
        self.timer
            .as_ref()
            .expect("the timer's threads run only for a store that has a timer")
    }
    fn consume_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        MessageStore::consume_queue(self, topic, queue_id)
    }
    fn look_message_by_offset(&self, offset: u64) -> Option<OwnedRecord> {
        MessageStore::look_message_by_offset(self, offset)
    }
    fn put_batch(&self, drafts: &[MessageDraft<'_>]) -> Result<Vec<AppendResult>, CommitLogError> {
        MessageStore::put_batch(self, drafts)
    }
    fn min_offset(&self) -> u64 {
        MessageStore::min_offset(self)
    }
}
