//! RocketMQ's `ScheduleMessageService`: delay levels (`messageDelayLevel`).
//!
//! A put whose `DELAY` property asks for level n > 0 is stored in `SCHEDULE_TOPIC_XXXX` queue
//! n - 1 instead of its topic, with `REAL_TOPIC` / `REAL_QID` naming where it goes (a level past
//! the last is the last), as 4.9's `CommitLog.putMessage` and 5.x's
//! `HookUtils.transformDelayLevelMessage` do; its consume queue entry's tag code is its delivery
//! time (see [`record::tags_code`]). On a master, one delivery thread moves each level's due
//! messages back to their real topic and queue in queue order (their `DELAY` stays, as a
//! delivered RocketMQ message's does; it is not read again), and keeps how
//! far each level got in `config/delayOffset.json`, written whole every
//! `flushDelayOffsetInterval` and at shutdown; a restart resumes there, so a message is
//! delivered at least once (a kill may repeat the last interval's deliveries, never skip one).
//! A slave never delivers: it replicates what its master stored and takes its master's offsets
//! at each sync, so promoted (restarted as master) it resumes where the master was.
//!
//! ▲ The thread sleeps until the earliest due message of any level (the ServiceThread's
//! deadline wait) instead of RocketMQ's 100 ms poll per level; a put due earlier than that
//! wakes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::commitlog::record::{
    self, find_property, MessageDraft, PROPERTY_DELAY_TIME_LEVEL, SCHEDULE_TOPIC,
};
use crate::commitlog::{AppendResult, OwnedRecord};
use crate::consume_queue::ConsumeQueue;
use crate::error::{CommitLogError, RecordError};
use crate::protocol::config_file::{remove_stale_temporaries, write_atomically};
use crate::protocol::json::parse_lenient;
use crate::protocol::now_millis;
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// RocketMQ's default `messageDelayLevel`.
pub(crate) const DEFAULT_MESSAGE_DELAY_LEVEL: &str =
    "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
/// `MessageConst.PROPERTY_REAL_TOPIC`: where a delayed message goes when due.
pub(crate) const PROPERTY_REAL_TOPIC: &str = "REAL_TOPIC";
/// `MessageConst.PROPERTY_REAL_QUEUE_ID`.
pub(crate) const PROPERTY_REAL_QUEUE_ID: &str = "REAL_QID";
/// `TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC`: RocketMQ discards a due message bound there.
const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// After a delivery the store refused for a while (a full disk), the level is tried again
/// this much later, as RocketMQ's timer task is rescheduled.
const RETRY_AFTER_REFUSED_PUT: i64 = 1_000;
/// Consume queue entries read at a time.
const BATCH: usize = 32;

const UNITS: [(char, i64); 4] = [
    ('d', 86_400_000),
    ('h', 3_600_000),
    ('m', 60_000),
    ('s', 1_000),
];

/// `parseDelayLevel`: `messageDelayLevel` (`"1s 5s 10s 30s 1m ..."`, units s, m, h, d) as the
/// delay of each level in ms, level 1 first.
pub(crate) fn parse_message_delay_level(text: &str) -> Result<Vec<i64>, String> {
    let levels = text
        .split_whitespace()
        .map(|level| {
            let unit = level.chars().last().unwrap_or(' ');
            let scale = UNITS.iter().find(|(u, _)| *u == unit).map(|(_, ms)| *ms);
            let number = level[..level.len() - unit.len_utf8()].parse::<i64>().ok();
            match (number, scale) {
                (Some(n), Some(ms)) if n >= 0 => n
                    .checked_mul(ms)
                    .ok_or_else(|| format!("level '{level}' is too long")),
                _ => Err(format!(
                    "level '{level}' is not a whole number of s, m, h or d (like 5s or 2h)"
                )),
            }
        })
        .collect::<Result<Vec<i64>, String>>()?;
    if levels.is_empty() {
        return Err("no level: give the delays of levels 1, 2, ... like \"1s 5s 10s\"".into());
    }
    Ok(levels)
}

/// `levels` as `messageDelayLevel` writes them, each in its largest whole unit.
pub(crate) fn render_message_delay_level(levels: &[i64]) -> String {
    levels
        .iter()
        .map(|&ms| {
            let (unit, scale) = UNITS
                .iter()
                .find(|(_, scale)| ms % scale == 0 && ms != 0)
                .unwrap_or(&('s', 1_000));
            format!("{}{unit}", ms / scale)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The level `DELAY` asks for, `None` when it asks for none (absent, 0 or negative, as
/// `getDelayTimeLevel() > 0` reads it); text that is no integer is refused.
pub(crate) fn delay_level(properties: &[u8]) -> Result<Option<i32>, RecordError> {
    let Some(raw) = find_property(properties, PROPERTY_DELAY_TIME_LEVEL) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(raw);
    let level = text
        .trim()
        .parse::<i32>()
        .map_err(|_| RecordError::BadDelayLevel(text.clone().into_owned()))?;
    Ok((level > 0).then_some(level))
}

/// A put moved into `SCHEDULE_TOPIC_XXXX`: the queue of its (clamped) level and its
/// properties with `REAL_TOPIC`, `REAL_QID` and the level stamped.
pub(crate) struct Scheduled {
    properties: Vec<u8>,
    queue_id: i32,
    /// The level's delay: the put is due at its store time plus this.
    pub(crate) delay_ms: i64,
}

impl Scheduled {
    /// `None` when `draft` asks for no delay.
    pub(crate) fn of(
        draft: &MessageDraft<'_>,
        levels: &[i64],
    ) -> Result<Option<Self>, RecordError> {
        let Some(level) = delay_level(draft.properties)? else {
            return Ok(None);
        };
        let max = i32::try_from(levels.len()).unwrap_or(i32::MAX).max(1);
        let level = level.min(max);
        let queue_id = draft.queue_id.to_string();
        let level_text = level.to_string();
        let properties = record::edit_properties(
            draft.properties,
            &[
                (PROPERTY_REAL_TOPIC, draft.topic),
                (PROPERTY_REAL_QUEUE_ID, &queue_id),
                (PROPERTY_DELAY_TIME_LEVEL, &level_text),
            ],
            &[],
        );
        Ok(Some(Self {
            properties,
            queue_id: level - 1,
            delay_ms: levels.get(level as usize - 1).copied().unwrap_or(0),
        }))
    }

    pub(crate) fn draft<'a>(&'a self, original: &MessageDraft<'a>) -> MessageDraft<'a> {
        MessageDraft {
            topic: SCHEDULE_TOPIC,
            properties: &self.properties,
            queue_id: self.queue_id,
            ..*original
        }
    }
}

/// `DelayOffsetSerializeWrapper`: the file's shape and GET_ALL_DELAY_OFFSET's body.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct DelayOffsetSerializeWrapper {
    /// Level -> the queue offset of its next message to deliver.
    offset_table: BTreeMap<i32, i64>,
}

/// What delivery needs of the store the service belongs to, which implements it: the service
/// reads its levels' queues and the messages they point at, and puts each due one back.
pub(crate) trait ScheduleStore: Send + Sync + 'static {
    /// The store's own schedule service, for the delivery thread.
    fn schedule(&self) -> &ScheduleMessageService;
    fn consume_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>>;
    fn look_message_by_offset(&self, offset: u64) -> Option<OwnedRecord>;
    fn put_now(&self, draft: &MessageDraft<'_>) -> Result<AppendResult, CommitLogError>;
}

pub(crate) struct ScheduleMessageService {
    /// `messageDelayLevel` in ms, level 1 first.
    levels: Vec<i64>,
    path: PathBuf,
    /// A lock: the delivery thread moves the offsets, GET_ALL_DELAY_OFFSET reads them and a
    /// slave's sync replaces them.
    offsets: Mutex<BTreeMap<i32, i64>>,
    /// The offsets moved since the file was written.
    dirty: AtomicBool,
    /// When the delivery thread will look next (epoch ms; `i64::MAX` while it looks, so any
    /// put then wakes it): a put due earlier wakes it.
    next_due: AtomicI64,
    /// The delivery thread while this store is a master's; a new one at each promotion.
    thread: Mutex<Option<ServiceThread>>,
    /// `flushDelayOffsetInterval`.
    flush_interval: Duration,
}

impl ScheduleMessageService {
    /// The service of the store at `root`, no offsets loaded yet ([`Self::load`]).
    pub(crate) fn new(root: &Path, levels: Vec<i64>, flush_interval: Duration) -> Self {
        Self {
            levels,
            path: root.join("config").join("delayOffset.json"),
            offsets: Mutex::default(),
            dirty: AtomicBool::new(false),
            next_due: AtomicI64::new(i64::MAX),
            thread: Mutex::new(None),
            flush_interval,
        }
    }

    /// Loads `ROOT/config/delayOffset.json` (none yet: every level from its start); a file
    /// that is not one fails the store's open, naming it.
    pub(crate) fn load(&self) -> Result<(), CommitLogError> {
        remove_stale_temporaries(&self.path);
        let offsets = match std::fs::read(&self.path) {
            Ok(raw) => decode(&raw).map_err(|reason| CommitLogError::BadConfigFile {
                path: self.path.clone(),
                reason,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(CommitLogError::io(&self.path, e)),
        };
        *lock(&self.offsets) = offsets;
        Ok(())
    }

    /// Level -> next queue offset to deliver.
    pub(crate) fn offsets(&self) -> BTreeMap<i32, i64> {
        lock(&self.offsets).clone()
    }

    /// GET_ALL_DELAY_OFFSET's body, as the file holds it.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let wrapper = DelayOffsetSerializeWrapper {
            offset_table: self.offsets(),
        };
        serde_json::to_vec_pretty(&wrapper).unwrap_or_default()
    }

    /// A slave's sync: its master's offsets (a GET_ALL_DELAY_OFFSET body) replace these and
    /// are persisted, so a slave restarted as master resumes where its master was.
    pub(crate) fn replace(&self, body: &[u8]) -> Result<(), String> {
        let offsets = decode(body)?;
        *lock(&self.offsets) = offsets;
        self.persist()
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// A put landed in the schedule topic, due at `due_ms`: the delivery thread is woken if it
    /// would sleep past that.
    pub(crate) fn scheduled(&self, due_ms: i64) {
        if due_ms < self.next_due.load(Ordering::SeqCst) {
            if let Some(thread) = lock(&self.thread).as_ref() {
                thread.wakeup();
            }
        }
    }

    /// Starts delivering (a master): once until [`Self::shutdown`], however often called, and
    /// again after it (a broker demoted, then promoted again in controller mode).
    pub(crate) fn start(&self, store: Arc<dyn ScheduleStore>) -> std::io::Result<()> {
        let mut running = lock(&self.thread);
        if running.is_some() {
            return Ok(());
        }
        let thread = ServiceThread::new("schedule-message");
        thread.start(move |waiter| store.schedule().run(&*store, &waiter))?;
        *running = Some(thread);
        Ok(())
    }

    /// Stops delivering and writes the offsets; safe to call again.
    pub(crate) fn shutdown(&self) {
        let running = lock(&self.thread).take();
        if let Some(thread) = running {
            thread.shutdown();
        }
    }

    fn persist(&self) -> std::io::Result<()> {
        let text = {
            let offsets = lock(&self.offsets);
            self.dirty.store(false, Ordering::Release);
            let wrapper = DelayOffsetSerializeWrapper {
                offset_table: offsets.clone(),
            };
            serde_json::to_vec_pretty(&wrapper).unwrap_or_default()
        };
        let written = write_atomically(&self.path, &text);
        if written.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        written
    }

    fn persist_if_dirty(&self) {
        if self.dirty.load(Ordering::Acquire) {
            if let Err(e) = self.persist() {
                log::error!("writing {} failed: {e}", self.path.display());
            }
        }
    }

    /// The delivery thread: every level's due messages, then sleep until the next is due (or
    /// a put due sooner, or the next write of the offsets).
    fn run(&self, store: &dyn ScheduleStore, waiter: &ServiceWaiter) {
        let mut next_persist = Instant::now() + self.flush_interval;
        loop {
            self.next_due.store(i64::MAX, Ordering::SeqCst);
            let mut due = i64::MAX;
            for level in 1..=self.levels.len() as i32 {
                due = due.min(self.deliver_level(store, level, waiter));
            }
            let now = Instant::now();
            if now >= next_persist {
                self.persist_if_dirty();
                next_persist = now + self.flush_interval;
            }
            self.next_due.store(due, Ordering::SeqCst);
            let wait_ms = u64::try_from(due.saturating_sub(now_millis())).unwrap_or(0);
            let mut deadline = now.checked_add(Duration::from_millis(wait_ms));
            if self.dirty.load(Ordering::Acquire) {
                deadline = Some(deadline.map_or(next_persist, |d| d.min(next_persist)));
            }
            if waiter.wait_for_running(deadline) == Woke::Stopped {
                break;
            }
        }
        self.persist_if_dirty();
    }

    /// Delivers `level`'s due messages in queue order; returns when its next one is due
    /// (`i64::MAX`: none waiting).
    fn deliver_level(&self, store: &dyn ScheduleStore, level: i32, waiter: &ServiceWaiter) -> i64 {
        let Some(cq) = store.consume_queue(SCHEDULE_TOPIC, level - 1) else {
            return i64::MAX;
        };
        let delay = self.levels[level as usize - 1];
        let stored = lock(&self.offsets).get(&level).copied().unwrap_or(0);
        // `correctDelayOffset`: within what the queue holds (retention, a truncated log).
        let mut offset = stored.clamp(cq.min_queue_offset(), cq.max_queue_offset());
        let mut due = i64::MAX;
        'queue: while !waiter.is_stopped() {
            let entries = cq.get(offset, BATCH);
            if entries.is_empty() {
                break;
            }
            for (queue_offset, entry) in entries {
                let now = now_millis();
                // `correctDeliverTimestamp`: never later than a whole delay from now (a clock
                // set back, a level shortened since).
                let deliver_at = if entry.tags_code > now.saturating_add(delay) {
                    now
                } else {
                    entry.tags_code
                };
                if deliver_at > now {
                    due = deliver_at;
                    break 'queue;
                }
                if !deliver(store, entry.commitlog_offset) {
                    due = now + RETRY_AFTER_REFUSED_PUT;
                    break 'queue;
                }
                offset = queue_offset + 1;
            }
        }
        if offset != stored {
            lock(&self.offsets).insert(level, offset);
            self.dirty.store(true, Ordering::Release);
        }
        due
    }
}

/// `messageTimeUp`: the scheduled message at `offset` back into its real topic and queue, as
/// stored (`DELAY` included: RocketMQ clears it from the map the put reads, not from the
/// properties it writes). False when the store refused it for now (to
/// be tried again); a message that can never be delivered (gone to retention, no real topic)
/// is skipped with a warning, as RocketMQ skips it.
fn deliver(store: &dyn ScheduleStore, offset: i64) -> bool {
    let Some(record) = u64::try_from(offset)
        .ok()
        .and_then(|o| store.look_message_by_offset(o))
    else {
        log::warn!(
            "schedule: no message at commit log offset {offset} (deleted by retention?); skipped"
        );
        return true;
    };
    let m = record.view();
    let real_topic =
        find_property(m.properties, PROPERTY_REAL_TOPIC).and_then(|t| std::str::from_utf8(t).ok());
    let real_queue = find_property(m.properties, PROPERTY_REAL_QUEUE_ID)
        .and_then(|q| std::str::from_utf8(q).ok()?.parse::<i32>().ok());
    let (Some(topic), Some(queue_id)) = (real_topic, real_queue) else {
        log::warn!("schedule: message at {offset} has no {PROPERTY_REAL_TOPIC} / {PROPERTY_REAL_QUEUE_ID}; skipped");
        return true;
    };
    if topic == TRANS_HALF_TOPIC || topic == SCHEDULE_TOPIC {
        log::warn!("schedule: message at {offset} is bound for {topic}; discarded");
        return true;
    }
    let draft = MessageDraft {
        topic,
        body: m.body,
        properties: m.properties,
        queue_id,
        flag: m.flag,
        sys_flag: m.sys_flag,
        born_timestamp: m.born_timestamp,
        born_host: m.born_host,
        reconsume_times: m.reconsume_times,
        prepared_tx_offset: m.prepared_tx_offset,
    };
    match store.put_now(&draft) {
        Ok(_) => true,
        Err(CommitLogError::Record(e)) => {
            log::warn!("schedule: message at {offset} cannot go to {topic}: {e}; skipped");
            true
        }
        Err(e) => {
            log::warn!(
                "schedule: delivering the message at {offset} to {topic} failed: {e}; retrying"
            );
            false
        }
    }
}

/// `{"offsetTable":{1:5,...}}`, fastjson's bare keys (a Java master's) or quoted ones.
fn decode(raw: &[u8]) -> Result<BTreeMap<i32, i64>, String> {
    parse_lenient::<DelayOffsetSerializeWrapper>(raw, "DelayOffsetSerializeWrapper")
        .map(|w| w.offset_table)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
