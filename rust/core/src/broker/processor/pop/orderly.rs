//! An orderly (FIFO) pop's ack and invisible-time change: RocketMQ's `ackOrderly` and
//! `processChangeInvisibleTimeForOrder`, under the queue lock pops take.

use super::*;

impl PopMessageProcessor {
    /// `ackOrderly`: an orderly pop's message acked; the group's offset moves past what is
    /// acked, and a pop held for the queue runs again. `Err` with the remark for an offset
    /// the pop did not take.
    pub(crate) fn ack_orderly(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        ack_offset: i64,
        pop_time: i64,
    ) -> Result<(), String> {
        let offsets = &self.consume.offsets;
        let committed = || offsets.query_offset(group, topic, queue_id).unwrap_or(-1);
        if ack_offset < committed() {
            return Ok(());
        }
        // A pop reading the queue now would hand the message out again after this ack.
        let _lock = self.queue_locks.lock(polling_key(topic, group, queue_id));
        let old = committed();
        if ack_offset < old {
            return Ok(());
        }
        match self
            .order_info
            .commit_and_next(topic, group, queue_id, ack_offset, pop_time)
        {
            CommitAndNext::Next(next) => {
                offsets.commit_offset(group, topic, queue_id, next);
                self.polling.wake_queue(topic, group, queue_id);
                Ok(())
            }
            CommitAndNext::Stale => Ok(()),
            CommitAndNext::NotPopped => Err(format!(
                "offset is illegal, key:{}, old:{old}, commit:{ack_offset}, next:-1: the \
                 queue's last orderly pop did not take it",
                polling_key(topic, group, queue_id)
            )),
        }
    }

    /// An orderly pop's message invisible until `next_visible_time`; false when the pop is
    /// not the queue's last (nothing to change).
    pub(crate) fn change_invisible_orderly(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        offset: i64,
        pop_time: i64,
        next_visible_time: i64,
    ) -> bool {
        let _lock = self.queue_locks.lock(polling_key(topic, group, queue_id));
        self.order_info.update_next_visible_time(
            topic,
            group,
            queue_id,
            offset,
            pop_time,
            next_visible_time,
        )
    }
}
