//! RocketMQ's `ReputMessageService` and `CommitLogDispatcher`: the consume queue entries of
//! the records in the commit log, written in log order under the put lock. A put dispatches its
//! own record; a replica what it copies; the open what a crash may have left undispatched; the
//! confirm offset what it releases.

use std::borrow::Cow;

use super::{MessageStore, PutState, TopicQueueTable};
use crate::commitlog::record::RecordView;
use crate::consume_queue::CqEntry;
use crate::error::CommitLogError;

impl MessageStore {
    /// Dispatches the records from the reput offset that end at or before `until`.
    pub(super) fn dispatch_until(
        &self,
        st: &mut PutState,
        until: u64,
    ) -> Result<(), CommitLogError> {
        if st.reput_offset >= until {
            return Ok(());
        }
        let mut next = st.reput_offset;
        let mut records = self.commit_log.iter_from(next, false);
        let result = loop {
            let rec = match records.next() {
                // Past the last record: a segment's end blank is skipped too (else a store whose
                // records end there would keep what follows held forever).
                None => {
                    next = next.max(records.offset().min(until));
                    break Ok(());
                }
                Some(Err(e)) => break Err(e),
                Some(Ok(rec)) => rec,
            };
            let view = rec.view();
            let end = rec.offset() + view.total_size as u64;
            if end > until {
                break Ok(());
            }
            if let Err(e) = self.dispatch(&mut st.queues, &view) {
                break Err(e);
            }
            next = end;
        };
        st.reput_offset = next;
        result
    }

    /// Writes the consume queue entry of one record (RocketMQ's `CommitLogDispatcher`).
    pub(super) fn dispatch(
        &self,
        queues: &mut TopicQueueTable,
        r: &RecordView<'_>,
    ) -> Result<(), CommitLogError> {
        let topic = match std::str::from_utf8(r.topic) {
            Ok(t) => Cow::Borrowed(t),
            Err(_) => String::from_utf8_lossy(r.topic),
        };
        let entry = CqEntry {
            commitlog_offset: r.physical_offset,
            size: r.total_size,
            tags_code: r.tags_code(&self.config.message_delay_level),
        };
        let slot = match queues
            .get_mut(topic.as_ref())
            .and_then(|q| q.get_mut(&r.queue_id))
        {
            Some(slot) => slot,
            None => {
                let cq = self.consume_queues.get_or_create(&topic, r.queue_id)?;
                queues
                    .entry(topic.to_string())
                    .or_default()
                    .entry(r.queue_id)
                    .or_insert((0, cq))
            }
        };
        slot.1.put(r.queue_offset, entry)?;
        slot.0 = slot.0.max(r.queue_offset + 1);
        self.arrived(
            &topic,
            r.queue_id,
            r.queue_offset + 1,
            entry.tags_code,
            r.properties,
        );
        self.timer_arrived(&topic);
        Ok(())
    }
}
