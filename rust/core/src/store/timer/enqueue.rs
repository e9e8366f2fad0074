//! `TimerEnqueueGetService` and `TimerEnqueuePutService` as one thread: follows the timer
//! topic's queue and places each message in the timer log and its slot of the wheel. A message
//! whose slot the dequeue already passed is delivered at once instead (RocketMQ's
//! `enqueueTime = Long.MAX_VALUE`). The queue offset moves only past what is placed or
//! delivered, so a crash places again (at least once), never skips.

use super::dequeue::{delivery, exact_due};
use super::log::Unit;
use super::wheel::{Slot, TimerWheel};
use super::{
    java_hash, property_i64, TimerMessageStore, TimerStore, Wheelhouse, MAGIC_DEFAULT,
    MAGIC_DELETE, MAGIC_ROLL, PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_OUT_MS, TIMER_TOPIC,
};
use crate::commitlog::record::find_property;
use crate::error::CommitLogError;
use crate::protocol::now_millis;
use crate::store::schedule::PROPERTY_REAL_TOPIC;
use crate::sync::{ServiceWaiter, Woke};

/// Queue entries read at a time.
const BATCH: usize = 256;
/// After a failed write (a full disk), the enqueue tries again this much later.
const RETRY_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(1);

/// What becomes of one timer topic message.
enum Fate {
    Place,
    /// Its slot passed: delivered now.
    Deliver,
    /// Not placeable (gone to retention, no `TIMER_OUT_MS`, a recall whose slot passed).
    Skip,
}

impl TimerMessageStore {
    pub(super) fn run_enqueue(&self, store: &dyn TimerStore, waiter: &ServiceWaiter) {
        loop {
            let deadline = match self.enqueue_some(store) {
                Ok(true) => continue,
                Ok(false) => None,
                Err(e) => {
                    log::error!("placing timer messages failed: {e}; retrying");
                    Some(std::time::Instant::now() + RETRY_AFTER_FAILURE)
                }
            };
            if waiter.wait_for_running(deadline) == Woke::Stopped {
                break;
            }
        }
    }

    /// Places (or delivers) the next run of the timer topic's messages; false when there was
    /// none to take.
    pub(super) fn enqueue_some(&self, store: &dyn TimerStore) -> Result<bool, CommitLogError> {
        let Some(cq) = store.consume_queue(TIMER_TOPIC, 0) else {
            return Ok(false);
        };
        let (offset, limit) = {
            let mut st = self.state();
            st.queue_offset = st
                .queue_offset
                .clamp(cq.min_queue_offset(), cq.max_queue_offset());
            // A slave places no further than its master did, so that promoted it delivers
            // what its master had not (see the module's doc).
            let limit = if st.dequeuing {
                i64::MAX
            } else {
                st.checkpoint.value.master_timer_queue_offset
            };
            (st.queue_offset, limit)
        };
        let entries: Vec<_> = cq
            .get(offset, BATCH)
            .into_iter()
            .take_while(|(q, _)| *q < limit)
            .collect();
        if entries.is_empty() {
            return Ok(false);
        }
        // A run of deliveries is put together, then the offset moves past it.
        let mut deliveries = Vec::new();
        for (queue_offset, entry) in entries {
            let record = u64::try_from(entry.commitlog_offset)
                .ok()
                .and_then(|o| store.look_message_by_offset(o));
            let mut st = self.state();
            let fate = match &record {
                None => {
                    log::warn!(
                        "timer: no message at commit log offset {} (deleted by retention?); \
                         skipped",
                        entry.commitlog_offset
                    );
                    Fate::Skip
                }
                Some(r) => self.fate(&st, r.view().properties),
            };
            match (fate, record) {
                (Fate::Deliver, Some(r)) => {
                    deliveries.push((queue_offset, r));
                    continue;
                }
                _ if !deliveries.is_empty() => break,
                (Fate::Place, Some(r)) => {
                    let m = r.view();
                    self.place(&mut st, m.properties, entry.commitlog_offset, entry.size)?;
                }
                _ => {}
            }
            st.queue_offset = queue_offset + 1;
            st.commit();
        }
        if let Some(&(last, _)) = deliveries.last() {
            let now = now_millis();
            let precision = self.config.precision_ms;
            let owned: Vec<_> = deliveries
                .into_iter()
                .map(|(_, r)| {
                    let m = r.view();
                    let out = property_i64(m.properties, PROPERTY_TIMER_OUT_MS).unwrap_or(now);
                    let due = exact_due(&m, self.config.floor(out), precision);
                    let parts = delivery(&m, i64::MAX, false, now);
                    parts.of(r, due)
                })
                .collect();
            let drafts: Vec<_> = owned.iter().map(|d| d.draft()).collect();
            store.put_batch(&drafts)?;
            for d in &owned {
                self.record_delivery(now - d.due);
            }
            let mut st = self.state();
            st.queue_offset = st.queue_offset.max(last + 1);
            st.commit();
        }
        Ok(true)
    }

    fn fate(&self, st: &Wheelhouse, properties: &[u8]) -> Fate {
        let Some(out) = property_i64(properties, PROPERTY_TIMER_OUT_MS) else {
            log::warn!("timer: a message in {TIMER_TOPIC} has no {PROPERTY_TIMER_OUT_MS}; skipped");
            return Fate::Skip;
        };
        if st.dequeuing && self.config.floor(out) < st.read_time_ms {
            if find_property(properties, PROPERTY_TIMER_DEL_UNIQKEY).is_some() {
                // Its message was delivered with its slot: nothing left to cancel.
                return Fate::Skip;
            }
            return Fate::Deliver;
        }
        Fate::Place
    }

    /// `doEnqueue`: a unit in the timer log for the message at `offset_py`, made its slot's
    /// last. A slot past the roll window takes a placeholder that rolls the message over.
    fn place(
        &self,
        st: &mut Wheelhouse,
        properties: &[u8],
        offset_py: i64,
        size_py: i32,
    ) -> Result<(), CommitLogError> {
        let precision = self.config.precision_ms;
        let write_time = self.config.floor(now_millis());
        let out = property_i64(properties, PROPERTY_TIMER_OUT_MS).unwrap_or(write_time);
        let mut slot_time = self.config.floor(out);
        let mut magic = MAGIC_DEFAULT;
        let window = self.config.roll_window();
        if slot_time - write_time >= window * precision {
            magic |= MAGIC_ROLL;
            // Rolled to the window's end, or half of it when the rest would come soon after.
            slot_time = if slot_time - write_time - window * precision < window / 3 * precision {
                write_time + window / 2 * precision
            } else {
                write_time + window * precision
            };
        }
        let delete = find_property(properties, PROPERTY_TIMER_DEL_UNIQKEY).is_some();
        if delete {
            magic |= MAGIC_DELETE;
        }
        let real_topic = find_property(properties, PROPERTY_REAL_TOPIC)
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        if st.wheel.is_none() {
            st.wheel = Some(TimerWheel::open(&self.root, precision)?);
        }
        let slot = st.wheel.as_ref().map_or(Slot::EMPTY, |w| w.slot(slot_time));
        let pos = st.log.append(&Unit {
            prev_pos: slot.last_pos,
            magic,
            enqueue_time: write_time,
            delayed_time: slot_time,
            offset_py,
            size_py,
            topic_hash: java_hash(&real_topic),
        })?;
        let delta = if delete { -1 } else { 1 };
        if let Some(w) = st.wheel.as_mut() {
            w.put(
                slot_time,
                &Slot {
                    time_ms: slot_time,
                    first_pos: if slot.first_pos == -1 {
                        pos
                    } else {
                        slot.first_pos
                    },
                    last_pos: pos,
                    num: slot.num + delta,
                    magic: slot.magic,
                },
            );
        }
        st.busy.insert(slot_time);
        st.metrics.add(&real_topic, i64::from(delta));
        if slot_time
            < self
                .dequeue_wake_before
                .load(std::sync::atomic::Ordering::SeqCst)
        {
            self.wake_dequeue();
        }
        Ok(())
    }
}
