//! RocketMQ's `queryMessage`: messages by key, through the index files.

use super::index::{record_has_key, KeyQuery, QueryOffsetResult};
use super::MessageStore;
use crate::commitlog::OwnedRecord;
use crate::error::CommitLogError;

impl MessageStore {
    /// [`Self::query_message`] once the index covers every message stored before the call
    /// (waiting at most a second for it): what a caller in this process, which just stored
    /// the message, expects.
    pub fn find(&self, q: &KeyQuery<'_>) -> Result<Vec<OwnedRecord>, CommitLogError> {
        if let Some(index) = &self.index {
            index.catch_up(self.confirm_offset());
        }
        Ok(self.query_message(q)?.0)
    }

    /// RocketMQ's `queryMessage`: the messages the query asks for, oldest first, and the
    /// index's last update, as the index stands now. Entries whose hash matches but whose message does not
    /// carry the key (another key with the same hash) are left out here rather than by the
    /// client.
    pub fn query_message(
        &self,
        q: &KeyQuery<'_>,
    ) -> Result<(Vec<OwnedRecord>, QueryOffsetResult), CommitLogError> {
        let Some(index) = self.index.as_ref() else {
            return Err(CommitLogError::Config(
                "messageIndexEnable is false: this store keeps no index to find messages by key"
                    .into(),
            ));
        };
        let offsets = index.query_offsets(q)?;
        let records = offsets
            .phy_offsets
            .iter()
            .filter_map(|&o| self.look_message_by_offset(u64::try_from(o).ok()?))
            .filter(|rec| record_has_key(&rec.view(), q.topic, q.key, q.unique))
            .collect();
        Ok((records, offsets))
    }
}
