//! RocketMQ 5's `TimerMessageStore`: messages delivered at any moment.
//!
//! A put with `TIMER_DELIVER_MS`, `TIMER_DELAY_SEC` or `TIMER_DELAY_MS` (and no delay level,
//! which wins) is stored in `rmq_sys_wheel_timer` queue 0, its `REAL_TOPIC` / `REAL_QID` naming
//! where it goes and `TIMER_OUT_MS` its slot, as 5.x's `HookUtils.transformTimerMessage` does.
//! The enqueue ([`enqueue`]) follows that queue on every node and places each message in the
//! timer log and the wheel, in RocketMQ's files (`timerlog/`, `timerwheel`,
//! `config/timercheck`, `config/timermetrics`). On a master the dequeue ([`dequeue`]) puts each
//! message back into its real topic and queue when due, stamped `TIMER_ENQUEUE_MS` and
//! `TIMER_DEQUEUE_MS`. A delay past the wheel's window (`timerRollWindowSlot`) rolls: the
//! message is put back into the timer topic when the window's end comes, and placed again.
//! A put with `TIMER_DEL_UNIQKEY` (a recall) cancels the message of that key in its slot.
//!
//! A slave places what it replicates but delivers nothing; it enqueues no further than its
//! master did (`masterTimerQueueOffset`, taken with the master's read time at each sync), so
//! promoted it delivers every message its master had not, and none its master had
//! (beyond the last sync's at-least-once).
//!
//! ▲ Driven by wake-ups: the dispatch of a timer message wakes the enqueue, and the dequeue
//! sleeps until its next busy slot (RocketMQ's services poll every 100 ms and step through
//! every slot). ▲ Exact: within its slot a message is delivered at its own time
//! (`TIMER_DELIVER_MS`, or its delay from when it was stored), not at the slot's end, so it
//! is late by the wake-up's latency, not by up to `timerPrecisionMs`.

mod checkpoint;
mod dequeue;
mod enqueue;
mod log;
mod metrics;
mod wheel;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::commitlog::record::{self, find_property, MessageDraft};
use crate::commitlog::{AppendResult, OwnedRecord};
use crate::consume_queue::ConsumeQueue;
use crate::error::{CommitLogError, RecordError};
use crate::protocol::now_millis;
use crate::store::schedule::{PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC};
use crate::sync::{lock, ServiceThread};
use checkpoint::{Checkpoint, TimerCheckpoint};
use log::TimerLog;
pub(crate) use log::DEFAULT_TIMER_LOG_FILE_SIZE;
use metrics::TimerMetrics;
use wheel::{TimerWheel, SLOTS_TOTAL};

/// `TimerMessageStore.TIMER_TOPIC`.
pub(crate) const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// `MessageConst.PROPERTY_TIMER_DELIVER_MS`: the epoch ms to deliver at.
pub(crate) const PROPERTY_TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
pub(crate) const PROPERTY_TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
pub(crate) const PROPERTY_TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
/// The epoch ms to deliver at of OpenMessaging's and 4.x commercial clients
/// (`START_DELIVER_TIME`). RocketMQ's broker counts such a message as delayed but delivers it
/// at once; ▲ rocketha holds it until then, as its sender asked.
pub(crate) const PROPERTY_START_DELIVER_TIME: &str = "__STARTDELIVERTIME";
/// The slot a timer message was placed for.
pub(crate) const PROPERTY_TIMER_OUT_MS: &str = "TIMER_OUT_MS";
const PROPERTY_TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
const PROPERTY_TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
const PROPERTY_TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
/// A recall: `REAL_TOPIC+UNIQ_KEY` of the message it cancels.
pub(crate) const PROPERTY_TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
/// `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`: the client's message id.
pub(crate) const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";
/// The properties that ask for a timer.
pub(crate) const TIMER_PROPERTIES: [&str; 4] = [
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_START_DELIVER_TIME,
];

const MAGIC_DEFAULT: i32 = 1;
const MAGIC_ROLL: i32 = 1 << 1;
const MAGIC_DELETE: i32 = 1 << 2;
/// `TIMER_BLANK_SLOTS`: the slots of a turn kept free of rolled messages.
const TIMER_BLANK_SLOTS: i64 = 60;
/// How often the flush thread also deletes timer log files retention emptied (RocketMQ's 30 s).
const CLEAN_INTERVAL: Duration = Duration::from_secs(30);

/// The timer's keys (`MessageStoreConfig`), RocketMQ's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerConfig {
    /// `timerWheelEnable`: off, a timer message is refused (and the store keeps no timer).
    pub enable: bool,
    /// `timerPrecisionMs`: a slot's length.
    pub precision_ms: i64,
    /// `timerMaxDelaySec`: a later delivery is refused at send.
    pub max_delay_sec: i64,
    /// `timerRollWindowSlot`: slots ahead a message is placed at most; later ones roll.
    pub roll_window_slots: i64,
    /// `timerFlushIntervalMs`: how often the timer's files are msynced.
    pub flush_interval: Duration,
    /// `mappedFileSizeTimerLog`.
    pub log_file_size: usize,
    /// `timerCongestNumEachSlot`: past it a slot refuses some sends, past twice it all.
    pub congest_num_each_slot: i64,
}

impl Default for TimerConfig {
    fn default() -> Self {
        Self {
            enable: true,
            precision_ms: 1_000,
            max_delay_sec: 3 * 86_400,
            roll_window_slots: 2 * 86_400,
            flush_interval: Duration::from_millis(1_000),
            log_file_size: DEFAULT_TIMER_LOG_FILE_SIZE,
            congest_num_each_slot: i64::from(i32::MAX),
        }
    }
}

impl TimerConfig {
    /// The keys' constraints, each named in its error.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.precision_ms <= 0
            || 1_000 % self.precision_ms != 0 && self.precision_ms % 1_000 != 0
        {
            return Err((
                "timerPrecisionMs",
                format!(
                    "{} must be a positive divisor or multiple of 1000 (a slot's length)",
                    self.precision_ms
                ),
            ));
        }
        if self.max_delay_sec <= 0 {
            return Err((
                "timerMaxDelaySec",
                "must be a positive number of seconds".into(),
            ));
        }
        if self.log_file_size < 4096 || self.log_file_size > i32::MAX as usize {
            return Err((
                "mappedFileSizeTimerLog",
                format!("{} must be from 4096 to 2 GiB", self.log_file_size),
            ));
        }
        if self.congest_num_each_slot <= 0 {
            return Err(("timerCongestNumEachSlot", "must be positive".into()));
        }
        if self.flush_interval.is_zero() {
            return Err((
                "timerFlushIntervalMs",
                "must be a positive number of milliseconds".into(),
            ));
        }
        Ok(())
    }

    /// The roll window in slots, as RocketMQ bounds it: at least 2, at most a turn less its
    /// blank slots.
    fn roll_window(&self) -> i64 {
        if self.roll_window_slots < 2 || self.roll_window_slots > SLOTS_TOTAL - TIMER_BLANK_SLOTS {
            SLOTS_TOTAL - TIMER_BLANK_SLOTS
        } else {
            self.roll_window_slots
        }
    }

    fn floor(&self, time_ms: i64) -> i64 {
        time_ms.div_euclid(self.precision_ms) * self.precision_ms
    }
}

/// Whether `properties` ask for a timer that was not placed yet.
pub(crate) fn asks_for_timer(properties: &[u8]) -> bool {
    TIMER_PROPERTIES
        .iter()
        .any(|p| find_property(properties, p).is_some())
        && find_property(properties, PROPERTY_TIMER_OUT_MS).is_none()
}

/// A put moved into the timer topic.
pub(crate) struct Timed {
    properties: Vec<u8>,
}

impl Timed {
    /// `transformTimerMessage`: `None` when `draft` asks for no timer, or for a moment already
    /// passed (delivered at once, as RocketMQ does).
    pub(crate) fn of(
        draft: &MessageDraft<'_>,
        timer: &TimerMessageStore,
        now: i64,
    ) -> Result<Option<Self>, RecordError> {
        if draft.topic == TIMER_TOPIC || !asks_for_timer(draft.properties) {
            return Ok(None);
        }
        let config = &timer.config;
        let deliver_ms = deliver_ms(draft.properties, now)?;
        let recall = find_property(draft.properties, PROPERTY_TIMER_DEL_UNIQKEY).is_some();
        if deliver_ms <= now {
            return if recall {
                Err(RecordError::TimerIllegal(format!(
                    "a {PROPERTY_TIMER_DEL_UNIQKEY} (recall) for {deliver_ms}, which has \
                     passed: the message was delivered already"
                )))
            } else {
                Ok(None)
            };
        }
        let max_ms = config.max_delay_sec.saturating_mul(1_000);
        if deliver_ms - now > max_ms {
            return Err(RecordError::TimerIllegal(format!(
                "timer message illegal, the delay time should not be bigger than the max delay \
                 {max_ms}ms (timerMaxDelaySec={}): it asks for {deliver_ms}, {} ms from now",
                config.max_delay_sec,
                deliver_ms - now
            )));
        }
        // RocketMQ's rounding, so a recall handle (`TIMER_OUT_MS + 1`) names the same slot
        // on either broker.
        let out = if deliver_ms % config.precision_ms == 0 {
            deliver_ms - config.precision_ms
        } else {
            config.floor(deliver_ms)
        };
        timer.check_congestion(out)?;
        let out = out.to_string();
        let queue_id = draft.queue_id.to_string();
        let properties = record::edit_properties(
            draft.properties,
            &[
                (PROPERTY_TIMER_OUT_MS, &out),
                (PROPERTY_REAL_TOPIC, draft.topic),
                (PROPERTY_REAL_QUEUE_ID, &queue_id),
            ],
            &[],
        );
        Ok(Some(Self { properties }))
    }

    pub(crate) fn draft<'a>(&'a self, original: &MessageDraft<'a>) -> MessageDraft<'a> {
        MessageDraft {
            topic: TIMER_TOPIC,
            properties: &self.properties,
            queue_id: 0,
            ..*original
        }
    }
}

/// The moment a timer message asks for: a delay counts from `now`; text that is no number,
/// or a negative delay, is refused naming the property.
fn deliver_ms(properties: &[u8], now: i64) -> Result<i64, RecordError> {
    let number = |name: &str| -> Result<Option<i64>, RecordError> {
        let Some(raw) = find_property(properties, name) else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(raw);
        text.trim().parse::<i64>().map(Some).map_err(|_| {
            RecordError::TimerIllegal(format!("{name}={text:?} is not a whole number"))
        })
    };
    let delay = |name: &str, scale: i64| -> Result<Option<i64>, RecordError> {
        match number(name)? {
            Some(d) if d < 0 => Err(RecordError::TimerIllegal(format!(
                "{name}={d} is negative: a delay is how long from now, 0 or more"
            ))),
            Some(d) => Ok(Some(now.saturating_add(d.saturating_mul(scale)))),
            None => Ok(None),
        }
    };
    if let Some(at) = delay(PROPERTY_TIMER_DELAY_SEC, 1_000)? {
        return Ok(at);
    }
    if let Some(at) = delay(PROPERTY_TIMER_DELAY_MS, 1)? {
        return Ok(at);
    }
    Ok(number(PROPERTY_TIMER_DELIVER_MS)?
        .or(number(PROPERTY_START_DELIVER_TIME)?)
        .unwrap_or(now))
}

/// What the timer's threads need of the store they belong to, which implements it.
pub(crate) trait TimerStore: Send + Sync + 'static {
    fn timer(&self) -> &TimerMessageStore;
    fn consume_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>>;
    fn look_message_by_offset(&self, offset: u64) -> Option<OwnedRecord>;
    /// Puts the deliveries, which carry `TIMER_OUT_MS` and so are not placed again.
    fn put_batch(&self, drafts: &[MessageDraft<'_>]) -> Result<Vec<AppendResult>, CommitLogError>;
    fn min_offset(&self) -> u64;
}

/// The timer's files and cursors, under one lock: the enqueue writes them, the dequeue reads
/// the slots it delivers, the flush writes them out.
struct Wheelhouse {
    log: TimerLog,
    /// Created with the first message placed.
    wheel: Option<TimerWheel>,
    checkpoint: TimerCheckpoint,
    metrics: TimerMetrics,
    /// The timer topic's next queue offset to place (`currQueueOffset`).
    queue_offset: i64,
    /// The first slot not wholly delivered (`currReadTimeMs`): a message placed before it is
    /// delivered at once.
    read_time_ms: i64,
    /// The slots from the read time on that hold units.
    busy: BTreeSet<i64>,
    /// A master's: the dequeue runs.
    dequeuing: bool,
}

impl Wheelhouse {
    /// A master's read time moved over the empty slots up to `floor_now`, never past a busy
    /// one (which a slave's sync and a restart then need not step through); the next busy
    /// slot.
    fn pass_empty_slots(&mut self, floor_now: i64) -> Option<i64> {
        let next = self.busy.range(self.read_time_ms..).next().copied();
        let to = next.unwrap_or(i64::MAX).min(floor_now);
        if self.dequeuing && to > self.read_time_ms {
            self.read_time_ms = to;
            self.commit();
        }
        next
    }

    fn commit(&mut self) {
        let value = &mut self.checkpoint.value;
        value.last_read_time_ms = self.read_time_ms;
        value.last_timer_queue_offset = self.queue_offset;
        if self.dequeuing {
            value.master_timer_queue_offset = self.queue_offset;
        }
        self.checkpoint.write();
    }
}

/// A snapshot for `rocketha status` and the metrics port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimerStatus {
    /// Delivering (a master's) or only placing (a slave's).
    pub dequeuing: bool,
    /// Timer messages placed and not delivered yet (the metrics' total).
    pub pending: i64,
    /// The first slot not wholly delivered.
    pub read_time_ms: i64,
    /// Every timer message due before this was delivered (the read time, or later while the
    /// dequeue sleeps with nothing due before its wake-up).
    pub delivered_before_ms: i64,
    /// Timer topic messages not placed yet.
    pub enqueue_behind: i64,
    /// Messages delivered since the store opened.
    pub delivered: u64,
    /// How late the last delivery was, and the latest since the store opened (ms).
    pub last_lateness_ms: i64,
    pub max_lateness_ms: i64,
}

pub(crate) struct TimerMessageStore {
    config: TimerConfig,
    root: std::path::PathBuf,
    state: Mutex<Wheelhouse>,
    /// A message placed in a slot before this wakes the dequeue: the next busy slot while it
    /// waits for it (one placed there changes nothing), just past its open slot while it
    /// waits in that slot, `i64::MAX` while it works.
    dequeue_wake_before: AtomicI64,
    /// While the dequeue sleeps, nothing placed is due before this (`i64::MIN` while it works).
    idle_until: AtomicI64,
    enqueue_thread: Mutex<Option<ServiceThread>>,
    dequeue_thread: Mutex<Option<ServiceThread>>,
    flush_thread: Mutex<Option<ServiceThread>>,
    delivered: AtomicU64,
    last_lateness_ms: AtomicI64,
    max_lateness_ms: AtomicI64,
}

impl TimerMessageStore {
    /// Opens the timer's files under `root` and recovers (`TimerMessageStore.recover`): the
    /// timer log is cut after its last whole unit, the units written since its last flush
    /// are made their slots' last, and the cursors resume from the checkpoint.
    pub(crate) fn open(root: &Path, config: TimerConfig) -> Result<Self, CommitLogError> {
        let checkpoint = TimerCheckpoint::open(root)?;
        let metrics = TimerMetrics::load(root)?;
        let mut log = TimerLog::open(root, config.log_file_size)?;
        let had_wheel = root.join("timerwheel").exists();
        let mut wheel = if had_wheel || log.end() > 0 {
            Some(TimerWheel::open(root, config.precision_ms)?)
        } else {
            None
        };
        let from = if had_wheel {
            checkpoint.value.last_timer_log_flush_pos - config.log_file_size as i64
        } else {
            0
        };
        log.recover(from, |pos, unit| {
            if let Some(w) = wheel.as_mut() {
                w.revise_last(unit.delayed_time, pos);
            }
        })?;
        let now = config.floor(now_millis());
        // A read time older than the wheel's two turns names slots reused since.
        let oldest =
            now - SLOTS_TOTAL * config.precision_ms + TIMER_BLANK_SLOTS * config.precision_ms;
        let read_time_ms = checkpoint.value.last_read_time_ms.max(oldest);
        let busy = wheel
            .as_ref()
            .map(|w| w.busy(read_time_ms).into_iter().map(|(t, _)| t).collect())
            .unwrap_or_default();
        let queue_offset = checkpoint.value.last_timer_queue_offset;
        Ok(Self {
            root: root.to_owned(),
            state: Mutex::new(Wheelhouse {
                log,
                wheel,
                checkpoint,
                metrics,
                queue_offset,
                read_time_ms,
                busy,
                dequeuing: false,
            }),
            config,
            dequeue_wake_before: AtomicI64::new(i64::MAX),
            idle_until: AtomicI64::new(i64::MIN),
            enqueue_thread: Mutex::default(),
            dequeue_thread: Mutex::default(),
            flush_thread: Mutex::default(),
            delivered: AtomicU64::new(0),
            last_lateness_ms: AtomicI64::new(0),
            max_lateness_ms: AtomicI64::new(0),
        })
    }

    fn state(&self) -> MutexGuard<'_, Wheelhouse> {
        lock(&self.state)
    }

    /// `isReject`: a slot past `timerCongestNumEachSlot` refuses a growing share of sends,
    /// past twice that all of them.
    fn check_congestion(&self, out: i64) -> Result<(), RecordError> {
        let limit = self.config.congest_num_each_slot;
        if limit >= i64::from(i32::MAX) {
            return Ok(());
        }
        let num = self
            .state()
            .wheel
            .as_ref()
            .map_or(0, |w| i64::from(w.slot(out).num));
        let over = num - limit;
        // A cheap spread instead of a random source: the low bits of the clock.
        let dice = i64::from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
                % 1000,
        );
        if over > 0 && (num >= 2 * limit || dice < 1000 * over / limit) {
            return Err(RecordError::TimerFlowControl(format!(
                "timer message is under flow control: the slot at {out} holds {num}, past \
                 timerCongestNumEachSlot={limit} (all refused at {})",
                2 * limit
            )));
        }
        Ok(())
    }

    /// A message was dispatched into the timer topic: the enqueue places it.
    pub(crate) fn arrived(&self) {
        if let Some(t) = lock(&self.enqueue_thread).as_ref() {
            t.wakeup();
        }
    }

    fn wake_dequeue(&self) {
        if let Some(t) = lock(&self.dequeue_thread).as_ref() {
            t.wakeup();
        }
    }

    /// Starts placing (every node) and, on a master, delivering; again after
    /// [`Self::shutdown`] (a role change).
    pub(crate) fn start(&self, store: Arc<dyn TimerStore>, master: bool) -> std::io::Result<()> {
        {
            let mut st = self.state();
            st.dequeuing = master;
            if master {
                // A promoted slave resumes where its master's last sync said it was.
                st.read_time_ms = st.read_time_ms.max(st.checkpoint.value.last_read_time_ms);
                let read = st.read_time_ms;
                st.busy = st.busy.split_off(&read);
            }
        }
        start_once(&self.enqueue_thread, "timer-enqueue", {
            let store = store.clone();
            move |waiter| store.timer().run_enqueue(&*store, &waiter)
        })?;
        start_once(&self.flush_thread, "timer-flush", {
            let store = store.clone();
            move |waiter| store.timer().run_flush(&*store, &waiter)
        })?;
        if master {
            start_once(&self.dequeue_thread, "timer-dequeue", move |waiter| {
                store.timer().run_dequeue(&*store, &waiter)
            })?;
        }
        Ok(())
    }

    /// Stops the threads and writes the files out; safe to call again.
    pub(crate) fn shutdown(&self) {
        for thread in [
            &self.dequeue_thread,
            &self.enqueue_thread,
            &self.flush_thread,
        ] {
            let running = lock(thread).take();
            if let Some(t) = running {
                t.shutdown();
            }
        }
        let mut st = self.state();
        st.dequeuing = false;
        if let Err(e) = self.flush_locked(&mut st) {
            ::log::error!("writing the timer's files failed: {e}");
        }
    }

    fn flush_locked(&self, st: &mut Wheelhouse) -> Result<(), CommitLogError> {
        st.log.flush()?;
        if let Some(w) = &st.wheel {
            w.flush()?;
        }
        st.checkpoint.value.last_timer_log_flush_pos = st.log.end();
        st.commit();
        st.checkpoint.flush()?;
        st.metrics
            .persist()
            .map_err(|e| CommitLogError::io(self.root.join("config/timermetrics"), e))
    }

    /// `TimerFlushService`: the files every `timerFlushIntervalMs`, and the timer log files
    /// retention emptied every 30 s.
    fn run_flush(&self, store: &dyn TimerStore, waiter: &crate::sync::ServiceWaiter) {
        let mut next_clean = std::time::Instant::now() + CLEAN_INTERVAL;
        loop {
            let deadline = std::time::Instant::now() + self.config.flush_interval;
            if waiter.wait_for_running(Some(deadline)) == crate::sync::Woke::Stopped {
                break;
            }
            let mut st = self.state();
            if let Err(e) = self.flush_locked(&mut st) {
                ::log::error!("flushing the timer's files failed: {e}");
            }
            if std::time::Instant::now() >= next_clean {
                next_clean = std::time::Instant::now() + CLEAN_INTERVAL;
                let min = i64::try_from(store.min_offset()).unwrap_or(i64::MAX);
                if let Err(e) = st.log.delete_expired(min) {
                    ::log::warn!("deleting expired timer log files failed: {e}");
                }
            }
        }
    }

    /// GET_TIMER_CHECK_POINT's body.
    pub(crate) fn checkpoint(&self) -> [u8; checkpoint::ENCODED_LEN] {
        let mut st = self.state();
        st.pass_empty_slots(self.config.floor(now_millis()));
        st.commit();
        st.checkpoint.value.encode()
    }

    /// GET_TIMER_METRICS's body.
    pub(crate) fn metrics(&self) -> Vec<u8> {
        self.state().metrics.encode()
    }

    /// A slave's `syncTimerCheckPoint`: its master's read time and enqueue offset (a
    /// GET_TIMER_CHECK_POINT body) bound what it places and where a promotion resumes.
    pub(crate) fn sync_checkpoint(&self, body: &[u8]) -> Result<(), String> {
        let master = Checkpoint::decode(body)?;
        let mut st = self.state();
        if st.dequeuing {
            return Ok(());
        }
        st.checkpoint.value.last_read_time_ms = master.last_read_time_ms;
        st.checkpoint.value.master_timer_queue_offset = master.master_timer_queue_offset;
        st.checkpoint.value.data_version = master.data_version;
        st.read_time_ms = master.last_read_time_ms;
        let read = st.read_time_ms;
        st.busy = st.busy.split_off(&read);
        st.commit();
        drop(st);
        self.arrived();
        Ok(())
    }

    /// A slave's `syncTimerMetrics`.
    pub(crate) fn sync_metrics(&self, body: &[u8]) -> Result<(), String> {
        self.state().metrics.replace(body)
    }

    pub(crate) fn status(&self, store: &dyn TimerStore) -> TimerStatus {
        let (dequeuing, pending, read_time_ms, queue_offset) = {
            let st = self.state();
            (
                st.dequeuing,
                st.metrics.total(),
                st.read_time_ms,
                st.queue_offset,
            )
        };
        let max = store
            .consume_queue(TIMER_TOPIC, 0)
            .map_or(0, |cq| cq.max_queue_offset());
        let idle_until = self.idle_until.load(Ordering::SeqCst).min(now_millis());
        TimerStatus {
            dequeuing,
            pending,
            read_time_ms,
            delivered_before_ms: read_time_ms.max(idle_until),
            enqueue_behind: (max - queue_offset).max(0),
            delivered: self.delivered.load(Ordering::Relaxed),
            last_lateness_ms: self.last_lateness_ms.load(Ordering::Relaxed),
            max_lateness_ms: self.max_lateness_ms.load(Ordering::Relaxed),
        }
    }

    fn record_delivery(&self, lateness_ms: i64) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.last_lateness_ms.store(lateness_ms, Ordering::Relaxed);
        self.max_lateness_ms
            .fetch_max(lateness_ms, Ordering::Relaxed);
    }
}

fn start_once(
    slot: &Mutex<Option<ServiceThread>>,
    name: &'static str,
    body: impl FnOnce(crate::sync::ServiceWaiter) + Send + 'static,
) -> std::io::Result<()> {
    let mut running = lock(slot);
    if running.is_none() {
        let thread = ServiceThread::new(name);
        thread.start(body)?;
        *running = Some(thread);
    }
    Ok(())
}

/// Java's `String.hashCode` (the timer log keeps the real topic's).
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// A property as a number.
fn property_i64(properties: &[u8], name: &str) -> Option<i64> {
    std::str::from_utf8(find_property(properties, name)?)
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests;
