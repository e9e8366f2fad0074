//! Controller mode's confirm offset: what consumers may read. RocketMQ 5's controller-mode
//! broker dispatches to its consume queues only up to it (`getReputEndOffset`): on a master
//! with `allAckInSyncStateSet` and slaves in its SyncStateSet, what every member holds; on a
//! slave, what its master last named in a frame header. A consumer thus never reads a message
//! that an election may still lose, and whose put was therefore not yet acknowledged.
//!
//! Without a confirm offset (classic HA, and a controller-mode master alone in its set or
//! without `allAckInSyncStateSet`) every record is dispatched as it is appended, as before.

use std::sync::atomic::Ordering;

use super::confirm_offset::{readable_end, Confirm};
use super::{MessageStore, PutState};
use crate::error::CommitLogError;

impl PutState {
    /// Where records are complete: appends and replication continue from here.
    pub(super) fn complete(&self) -> u64 {
        self.confirm.map_or(self.reput_offset, |c| c.complete)
    }
}

impl MessageStore {
    /// From now on consumers read up to `confirm` (`None`: everything, as appended). Records
    /// held so far that it covers are dispatched now, and the pulls waiting on their queues
    /// woken. A record already dispatched stays so, whatever `confirm` says.
    pub fn set_confirm_offset(&self, confirm: Option<u64>) -> Result<(), CommitLogError> {
        let mut st = self.lock_put();
        let complete = st.complete();
        let until = match confirm {
            None => {
                st.confirm = None;
                complete
            }
            Some(offset) => {
                st.confirm = Some(Confirm { offset, complete });
                offset.min(complete)
            }
        };
        let dispatched = self.dispatch_until(&mut st, until);
        if st.confirm.is_none() {
            // Whatever could not be dispatched stays held, at its old confirm offset.
            st.confirm = (st.reput_offset < complete).then_some(Confirm {
                offset: st.reput_offset,
                complete,
            });
        }
        self.publish_confirm(&st);
        drop(st);
        if let Some(index) = &self.index {
            index.published();
        }
        dispatched
    }

    /// Where consumers read up to: the end of the last record dispatched while records are
    /// held for the confirm offset, else the log's end.
    pub fn confirm_offset(&self) -> u64 {
        readable_end(&self.confirmed, self.commit_log.max_offset())
    }

    /// Whether records are held for a confirm offset.
    pub(crate) fn holds_for_confirm(&self) -> bool {
        self.confirmed.load(Ordering::Acquire) != u64::MAX
    }

    pub(super) fn publish_confirm(&self, st: &PutState) {
        let held = st.confirm.map_or(u64::MAX, |_| st.reput_offset);
        self.confirmed.store(held, Ordering::Release);
    }

    /// Dispatches what the confirm offset covers of what was held (after an append).
    pub(super) fn dispatch_confirmed(&self, st: &mut PutState) -> Result<(), CommitLogError> {
        match st.confirm {
            Some(c) => self.dispatch_until(st, c.offset.min(c.complete)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::commitlog::record::MessageDraft;
    use crate::store::StoreConfig;

    pub(crate) fn open(dir: &std::path::Path) -> MessageStore {
        let mut config = StoreConfig::new(dir);
        config.mapped_file_size = 64 * 1024;
        MessageStore::open(config).unwrap()
    }

    /// Puts `body` to queue 0 of `t`; the record's end.
    pub(crate) fn put(store: &MessageStore, body: &[u8]) -> u64 {
        let draft = MessageDraft {
            topic: "t",
            body,
            properties: b"",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: SocketAddr::from(([127, 0, 0, 1], 1)),
            reconsume_times: 0,
            prepared_tx_offset: 0,
        };
        store.put(&draft).unwrap().next_offset()
    }

    /// The bodies a consumer of queue 0 reads, with their queue offsets.
    pub(crate) fn readable(store: &MessageStore) -> Vec<(i64, Vec<u8>)> {
        let read = store.get_messages("t", 0, 0, 100).unwrap();
        read.iter()
            .map(|(qo, r)| (*qo, r.view().body.to_vec()))
            .collect()
    }

    fn bodies(n: &[(i64, &str)]) -> Vec<(i64, Vec<u8>)> {
        n.iter().map(|(q, b)| (*q, b.as_bytes().to_vec())).collect()
    }

    #[test]
    fn a_master_dispatches_up_to_the_confirm_offset_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let a = put(&store, b"a");
        assert_eq!(
            readable(&store),
            bodies(&[(0, "a")]),
            "none held: read as appended"
        );
        assert_eq!(store.confirm_offset(), a);
        store.set_confirm_offset(Some(a)).unwrap();
        let b = put(&store, b"b");
        let c = put(&store, b"c");
        assert_eq!(
            readable(&store),
            bodies(&[(0, "a")]),
            "held past the confirm offset"
        );
        assert_eq!((store.confirm_offset(), store.max_offset()), (a, c));
        // Only whole records: a confirm offset inside c dispatches b.
        store.set_confirm_offset(Some(b + 1)).unwrap();
        assert_eq!(readable(&store), bodies(&[(0, "a"), (1, "b")]));
        store.set_confirm_offset(Some(a)).unwrap();
        assert_eq!(readable(&store).len(), 2, "what was dispatched stays");
        store.set_confirm_offset(None).unwrap();
        assert_eq!(readable(&store), bodies(&[(0, "a"), (1, "b"), (2, "c")]));
        assert_eq!(store.confirm_offset(), c);
        let d = put(&store, b"d");
        assert_eq!(readable(&store).len(), 4, "none held again");
        assert_eq!(store.confirm_offset(), d);
    }

    #[test]
    fn a_replica_holds_what_it_copies_until_its_master_confirms_it() {
        let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (master, slave) = (open(m.path()), open(s.path()));
        let ends: Vec<u64> = ["a", "b", "c"]
            .iter()
            .map(|b| put(&master, b.as_bytes()))
            .collect();
        let raw = master.read_raw(0, 1 << 20).unwrap();
        slave.set_confirm_offset(Some(0)).unwrap();
        // Two appends, the second completing a record the first left cut.
        let cut = ends[1] as usize + 5;
        slave.append_raw(0, &raw.bytes()[..cut], false).unwrap();
        assert!(readable(&slave).is_empty());
        slave.set_confirm_offset(Some(ends[0])).unwrap();
        assert_eq!(readable(&slave), bodies(&[(0, "a")]));
        // A confirm offset past what it holds dispatches what it holds whole, then the rest
        // as it comes.
        slave.set_confirm_offset(Some(ends[2])).unwrap();
        assert_eq!(readable(&slave).len(), 2);
        assert_eq!(slave.confirm_offset(), ends[1]);
        slave
            .append_raw(cut as u64, &raw.bytes()[cut..], false)
            .unwrap();
        assert_eq!(readable(&slave), bodies(&[(0, "a"), (1, "b"), (2, "c")]));
        // Cut back (a deposed master's tail): the confirm offset with it.
        slave.truncate_to(ends[1]).unwrap();
        assert_eq!(slave.confirm_offset(), ends[1]);
        assert_eq!(readable(&slave).len(), 2);
    }

    #[test]
    fn a_replica_whose_copy_ends_at_a_segment_blank_is_released_whole() {
        let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (master, slave) = (open(m.path()), open(s.path()));
        let body = vec![b'x'; 10_000];
        while master.max_offset() < 64 * 1024 {
            put(&master, &body);
        }
        let first = master.read_raw(0, 1 << 20).unwrap();
        assert_eq!(
            first.len(),
            64 * 1024,
            "the first segment, its end blank included"
        );
        slave.set_confirm_offset(Some(0)).unwrap();
        slave.append_raw(0, first.bytes(), false).unwrap();
        // Promoted: nothing is held any more, whatever follows the blank.
        slave.set_confirm_offset(None).unwrap();
        let held = readable(&slave).len();
        let rest = master.read_raw(64 * 1024, 1 << 20).unwrap();
        slave.append_raw(64 * 1024, rest.bytes(), false).unwrap();
        assert_eq!(readable(&slave).len(), readable(&master).len());
        assert!(readable(&slave).len() > held);
    }
}
