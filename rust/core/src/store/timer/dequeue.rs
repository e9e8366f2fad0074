//! `TimerDequeueGetService` and the put services as one thread, on a master: sleeps until the
//! next busy slot, then reads its units (delete marks first: their messages are not
//! delivered), and puts each message back into its real topic and queue at its own time, all
//! that are due together in one batch. A slot stays open until its length passed, so a
//! message placed in it late is still delivered from it; then the read time moves past it.

use std::collections::{HashSet, VecDeque};

use super::{
    property_i64, TimerMessageStore, TimerStore, MAGIC_DELETE, MAGIC_ROLL,
    PROPERTY_START_DELIVER_TIME, PROPERTY_TIMER_DELAY_MS, PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_ROLL_TIMES, PROPERTY_UNIQ_KEY, TIMER_TOPIC,
};
use crate::commitlog::record::{self, find_property, MessageDraft, RecordView};
use crate::commitlog::OwnedRecord;
use crate::error::CommitLogError;
use crate::protocol::now_millis;
use crate::store::schedule::{PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC};
use crate::sync::ServiceWaiter;

/// Deliveries put under one hold of the store's put lock: sends wait no longer than that.
const PUT_BATCH: usize = 512;
/// After a refused put (a full disk), delivery is tried again this much later.
const RETRY_AFTER_FAILURE_MS: i64 = 1_000;

/// A message back on its way: the record and what it becomes.
pub(super) struct Delivery {
    record: OwnedRecord,
    topic: String,
    queue_id: i32,
    properties: Vec<u8>,
    /// When it was due.
    pub(super) due: i64,
}

impl Delivery {
    pub(super) fn draft(&self) -> MessageDraft<'_> {
        let m = self.record.view();
        MessageDraft {
            topic: &self.topic,
            body: m.body,
            properties: &self.properties,
            queue_id: self.queue_id,
            flag: m.flag,
            sys_flag: m.sys_flag,
            born_timestamp: m.born_timestamp,
            born_host: m.born_host,
            reconsume_times: m.reconsume_times,
            prepared_tx_offset: m.prepared_tx_offset,
        }
    }
}

/// `convert` / `convertMessage`: the timer topic's message stamped `TIMER_ENQUEUE_MS` (when
/// it was placed; `i64::MAX` when never) and `TIMER_DEQUEUE_MS`; into its real topic and queue,
/// or (rolled) back into the timer topic with `TIMER_ROLL_TIMES` counted.
pub(super) fn delivery(
    m: &RecordView<'_>,
    enqueue_time: i64,
    roll: bool,
    now: i64,
) -> DeliveryParts {
    let enqueue = enqueue_time.to_string();
    let dequeue = now.to_string();
    let rolls =
        (property_i64(m.properties, PROPERTY_TIMER_ROLL_TIMES).unwrap_or(0) + 1).to_string();
    let mut set = vec![
        (PROPERTY_TIMER_ENQUEUE_MS, enqueue.as_str()),
        (PROPERTY_TIMER_DEQUEUE_MS, dequeue.as_str()),
    ];
    if roll {
        set.push((PROPERTY_TIMER_ROLL_TIMES, rolls.as_str()));
        return DeliveryParts {
            topic: TIMER_TOPIC.to_owned(),
            queue_id: m.queue_id,
            properties: record::edit_properties(m.properties, &set, &[]),
        };
    }
    let text = |name: &str| {
        find_property(m.properties, name).map(|v| String::from_utf8_lossy(v).into_owned())
    };
    DeliveryParts {
        topic: text(PROPERTY_REAL_TOPIC).unwrap_or_default(),
        queue_id: text(PROPERTY_REAL_QUEUE_ID)
            .and_then(|q| q.parse().ok())
            .unwrap_or(0),
        properties: record::edit_properties(
            m.properties,
            &set,
            &[PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID],
        ),
    }
}

/// Where a delivery goes and what it carries.
pub(super) struct DeliveryParts {
    topic: String,
    queue_id: i32,
    properties: Vec<u8>,
}

impl DeliveryParts {
    pub(super) fn of(self, record: OwnedRecord, due: i64) -> Delivery {
        Delivery {
            record,
            topic: self.topic,
            queue_id: self.queue_id,
            properties: self.properties,
            due,
        }
    }
}

/// A message of the open slot, waiting for its time.
struct Pending {
    due: i64,
    record: OwnedRecord,
    enqueue_time: i64,
    roll: bool,
}

impl Pending {
    /// Whether a recall in the slot named it (`REAL_TOPIC+UNIQ_KEY`).
    fn recalled(&self, deleted: &HashSet<String>) -> bool {
        if self.roll || deleted.is_empty() {
            return false;
        }
        let m = self.record.view();
        match (
            find_property(m.properties, PROPERTY_REAL_TOPIC),
            find_property(m.properties, PROPERTY_UNIQ_KEY),
        ) {
            (Some(t), Some(u)) => deleted.contains(&format!(
                "{}+{}",
                String::from_utf8_lossy(t),
                String::from_utf8_lossy(u)
            )),
            _ => false,
        }
    }
}

/// The slot being delivered.
struct OpenSlot {
    time: i64,
    /// The last unit read; units placed later chain back to it.
    seen_last: i64,
    /// In time order; taken from the front.
    pending: VecDeque<Pending>,
    deleted: HashSet<String>,
}

impl TimerMessageStore {
    pub(super) fn run_dequeue(&self, store: &dyn TimerStore, waiter: &ServiceWaiter) {
        let precision = self.config.precision_ms;
        let mut open: Option<OpenSlot> = None;
        while !waiter.is_stopped() {
            // While it works, any placement wakes it (kept for its next wait).
            self.dequeue_wake_before
                .store(i64::MAX, std::sync::atomic::Ordering::SeqCst);
            self.idle_until
                .store(i64::MIN, std::sync::atomic::Ordering::SeqCst);
            let now = now_millis();
            let slot = match open.as_mut() {
                Some(slot) => slot,
                None => match self.next_slot(now) {
                    Ok(time) => open.insert(OpenSlot {
                        time,
                        seen_last: -1,
                        pending: VecDeque::new(),
                        deleted: HashSet::new(),
                    }),
                    Err(next) => {
                        self.sleep(waiter, next, next, next);
                        continue;
                    }
                },
            };
            self.read_new_units(store, slot);
            if let Err(e) = self.deliver_due(store, slot, now) {
                log::warn!("timer: delivering failed: {e}; retrying");
                let retry = now + RETRY_AFTER_FAILURE_MS;
                self.sleep(waiter, slot.time + 1, retry, i64::MIN);
                continue;
            }
            if let Some(next) = slot.pending.front().map(|p| p.due) {
                self.sleep(waiter, slot.time + 1, next, next);
            } else if now >= slot.time + precision {
                if self.close_slot(slot) {
                    open = None;
                }
            } else {
                let end = slot.time + precision;
                self.sleep(waiter, slot.time + 1, end, end);
            }
        }
    }

    /// Waits until `deadline_ms`, or a message placed in a slot before `wake_before` (a
    /// stop too: the loop sees it); meanwhile nothing placed is due before `idle_until`.
    fn sleep(&self, waiter: &ServiceWaiter, wake_before: i64, deadline_ms: i64, idle_until: i64) {
        self.dequeue_wake_before
            .store(wake_before, std::sync::atomic::Ordering::SeqCst);
        self.idle_until
            .store(idle_until, std::sync::atomic::Ordering::SeqCst);
        let wait = u64::try_from(deadline_ms.saturating_sub(now_millis())).unwrap_or(0);
        let deadline = (deadline_ms != i64::MAX)
            .then(|| std::time::Instant::now() + std::time::Duration::from_millis(wait));
        waiter.wait_for_running(deadline);
    }

    /// The next busy slot when it is due (`Ok`), else when it will be (`Err`, `i64::MAX` for
    /// none); the read time moves over the empty slots before it.
    fn next_slot(&self, now: i64) -> Result<i64, i64> {
        let mut st = self.state();
        match st.pass_empty_slots(self.config.floor(now)) {
            Some(t) if t <= now => {
                st.read_time_ms = t;
                st.commit();
                Ok(t)
            }
            next => Err(next.unwrap_or(i64::MAX)),
        }
    }

    /// The units placed in the open slot since the last look, oldest first, as pending
    /// messages (and delete marks, taken at once).
    fn read_new_units(&self, store: &dyn TimerStore, slot: &mut OpenSlot) {
        let units = {
            let st = self.state();
            let Some(wheel) = st.wheel.as_ref() else {
                return;
            };
            let last = wheel.slot(slot.time).last_pos;
            let mut units = Vec::new();
            let mut pos = last;
            while pos >= 0 && pos != slot.seen_last {
                let Some(unit) = st.log.unit_at(pos) else {
                    log::warn!("timer: no unit at timer log position {pos}; the slot's older units are lost");
                    break;
                };
                units.push(unit);
                pos = unit.prev_pos;
            }
            slot.seen_last = last;
            units
        };
        let precision = self.config.precision_ms;
        for unit in units.into_iter().rev() {
            let Some(record) = u64::try_from(unit.offset_py)
                .ok()
                .and_then(|o| store.look_message_by_offset(o))
            else {
                log::warn!(
                    "timer: no message at commit log offset {} (deleted by retention?); skipped",
                    unit.offset_py
                );
                continue;
            };
            let m = record.view();
            let roll = unit.magic & MAGIC_ROLL != 0;
            if unit.magic & MAGIC_DELETE != 0 && !roll {
                if let Some(key) = find_property(m.properties, PROPERTY_TIMER_DEL_UNIQKEY) {
                    slot.deleted
                        .insert(String::from_utf8_lossy(key).into_owned());
                }
                continue;
            }
            let due = if roll {
                slot.time
            } else {
                exact_due(&m, slot.time, precision)
            };
            slot.pending.push_back(Pending {
                due,
                record,
                enqueue_time: unit.enqueue_time,
                roll,
            });
        }
        slot.pending.make_contiguous().sort_by_key(|p| p.due);
    }

    /// Puts the open slot's messages due by `now`, a batch at a time; a recalled one is
    /// dropped. On a refused put the batch stays pending.
    fn deliver_due(
        &self,
        store: &dyn TimerStore,
        slot: &mut OpenSlot,
        now: i64,
    ) -> Result<(), CommitLogError> {
        loop {
            let due = slot
                .pending
                .partition_point(|p| p.due <= now)
                .min(PUT_BATCH);
            if due == 0 {
                return Ok(());
            }
            let batch: Vec<Pending> = slot.pending.drain(..due).collect();
            let (cancelled, live): (Vec<_>, Vec<_>) =
                batch.into_iter().partition(|p| p.recalled(&slot.deleted));
            let deliveries: Vec<(Delivery, bool, i64)> = live
                .into_iter()
                .map(|p| {
                    let parts = delivery(&p.record.view(), p.enqueue_time, p.roll, now);
                    (parts.of(p.record, p.due), p.roll, p.enqueue_time)
                })
                .collect();
            let drafts: Vec<MessageDraft<'_>> =
                deliveries.iter().map(|(d, _, _)| d.draft()).collect();
            if let Err(e) = store.put_batch(&drafts) {
                drop(drafts);
                // Back in front, to be tried again.
                let back = deliveries
                    .into_iter()
                    .map(|(d, roll, enqueue_time)| Pending {
                        due: d.due,
                        record: d.record,
                        enqueue_time,
                        roll,
                    })
                    .rev();
                for p in back {
                    slot.pending.push_front(p);
                }
                return Err(e);
            }
            drop(drafts);
            // Counted by topic, once a batch (a burst is mostly one topic).
            let mut left: Vec<(&[u8], i64)> = Vec::new();
            for (d, roll, _) in &deliveries {
                let topic = find_property(d.record.view().properties, PROPERTY_REAL_TOPIC)
                    .unwrap_or_default();
                match left.iter_mut().find(|(t, _)| *t == topic) {
                    Some((_, n)) => *n += 1,
                    None => left.push((topic, 1)),
                }
                if !roll {
                    self.record_delivery(now - d.due);
                }
            }
            let mut st = self.state();
            for (topic, n) in left {
                st.metrics.add(&String::from_utf8_lossy(topic), -n);
            }
            drop(st);
            if !cancelled.is_empty() {
                log::debug!("timer: {} recalled messages not delivered", cancelled.len());
            }
        }
    }

    /// Moves the read time past the open slot, unless a unit arrived since it was read.
    fn close_slot(&self, slot: &OpenSlot) -> bool {
        let mut st = self.state();
        let last = st.wheel.as_ref().map_or(-1, |w| w.slot(slot.time).last_pos);
        if last != slot.seen_last {
            return false;
        }
        st.busy.remove(&slot.time);
        st.read_time_ms = slot.time + self.config.precision_ms;
        st.commit();
        true
    }
}

/// When a message of the slot at `slot_time` is due: `TIMER_DELIVER_MS`, or its delay from
/// when it was stored (not after a roll, which stored it again), within the slot; the slot's
/// end when neither says (RocketMQ delivers every message of a slot at its end).
pub(super) fn exact_due(m: &RecordView<'_>, slot_time: i64, precision: i64) -> i64 {
    let p = m.properties;
    let rolled = find_property(p, PROPERTY_TIMER_ROLL_TIMES).is_some();
    let relative = |name: &str, scale: i64| {
        property_i64(p, name)
            .filter(|_| !rolled)
            .map(|d| m.store_timestamp.saturating_add(d.saturating_mul(scale)))
    };
    property_i64(p, PROPERTY_TIMER_DELIVER_MS)
        .or_else(|| property_i64(p, PROPERTY_START_DELIVER_TIME))
        .or_else(|| relative(PROPERTY_TIMER_DELAY_SEC, 1_000))
        .or_else(|| relative(PROPERTY_TIMER_DELAY_MS, 1))
        .unwrap_or(slot_time + precision)
        .clamp(slot_time, slot_time + precision)
}
