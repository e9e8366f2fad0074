//! RocketMQ's `slaveAckOffset` of every connection, counted per distinct slave, and
//! `push2SlaveMaxOffset`. Every change is pushed to the store's GroupTransferService, which is
//! what puts wait on; nothing here blocks.
//!
//! In controller mode it also keeps RocketMQ's `connectionCaughtUpTimeTable` (when each slave's
//! ack last reached the master's max offset) and tells a [`SyncStateListener`] what may change
//! the SyncStateSet: a slave outside it caught up, a slave's last connection closed. The
//! decision stays with the replicas manager, which looks when told and when a member's
//! `haMaxTimeSlaveNotCatchup` runs out, never on a timer.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::store::group_transfer::GroupTransferService;
use crate::store::MessageStore;
use crate::sync::lock;

pub struct AckTable {
    /// connection id -> (slave key, acked offset). The key is the slave's authenticated id, or
    /// the connection id without authentication.
    by_connection: Mutex<HashMap<u64, (u64, u64)>>,
    /// RocketMQ's `push2SlaveMaxOffset`: the highest offset any slave ever acked.
    push2slave_max_offset: AtomicU64,
    group_transfer: Arc<GroupTransferService>,
    /// Controller mode: the slaves (by broker id) of the master's SyncStateSet. With
    /// `allAckInSyncStateSet` only their acks count, and a put waits for every one of them.
    sync_state_set: Mutex<Option<SyncStateSet>>,
    /// The policy's `inSyncReplicas - 1` distinct slaves, for when there is no set.
    configured_slaves: usize,
    /// The master's store, told the confirm offset (see [`AckTable::confirm`]).
    store: Option<Arc<MessageStore>>,
    /// The confirm offset the store was last told, `u64::MAX` for none, [`UNTOLD`] before the
    /// first.
    confirmed: AtomicU64,
    /// When each slave caught up, and who hears of it.
    caught_up: Mutex<CaughtUp>,
}

/// What may change a controller-mode master's SyncStateSet, as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncStateEvent {
    /// A slave outside the set acked the master's max offset (once per set).
    CaughtUp(u64),
    /// A slave's last connection closed.
    Disconnected(u64),
}

/// Hears [`SyncStateEvent`]s; called outside the table's lock, from the HA loop's thread.
pub type SyncStateListener = Arc<dyn Fn(SyncStateEvent) + Send + Sync>;

/// RocketMQ's `connectionCaughtUpTimeTable`, and who is told of a catch-up.
#[derive(Default)]
struct CaughtUp {
    /// Slave key -> when its ack last reached the master's max offset.
    at: HashMap<u64, Instant>,
    /// Slaves whose catch-up was told since the set last changed: told once, not per ack.
    told: BTreeSet<u64>,
    listener: Option<SyncStateListener>,
}

/// No confirm offset told yet: the first is always told, as the store may still hold records
/// back from when this broker was a slave.
const UNTOLD: u64 = u64::MAX - 1;

/// A controller-mode master's SyncStateSet, less itself, and how puts wait on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStateSet {
    pub slaves: BTreeSet<u64>,
    /// `allAckInSyncStateSet`: a put waits for every slave of the set, and only for them.
    pub all_ack: bool,
}

impl SyncStateSet {
    /// The slaves whose acks count: the set's with `all_ack`, else any.
    fn counted(&self) -> Option<&BTreeSet<u64>> {
        self.all_ack.then_some(&self.slaves)
    }
}

/// Each distinct slave's best ack, highest first; only the slaves of `only` when given.
fn covered(by_connection: &HashMap<u64, (u64, u64)>, only: Option<&BTreeSet<u64>>) -> Vec<u64> {
    let mut best: HashMap<u64, u64> = HashMap::new();
    let counted = by_connection
        .values()
        .filter(|(k, _)| only.is_none_or(|set| set.contains(k)));
    for (k, off) in counted {
        let e = best.entry(*k).or_default();
        *e = (*e).max(*off);
    }
    let mut offsets: Vec<u64> = best.into_values().collect();
    offsets.sort_unstable_by(|a, b| b.cmp(a));
    offsets
}

impl AckTable {
    /// The acks of a master whose puts wait in `group_transfer`; with `store`, also what its
    /// consumers may read in controller mode.
    pub(crate) fn new(
        group_transfer: Arc<GroupTransferService>,
        store: Option<Arc<MessageStore>>,
    ) -> Self {
        Self {
            by_connection: Mutex::default(),
            push2slave_max_offset: AtomicU64::new(0),
            configured_slaves: group_transfer.policy().slaves,
            group_transfer,
            sync_state_set: Mutex::new(None),
            store,
            confirmed: AtomicU64::new(UNTOLD),
            caught_up: Mutex::default(),
        }
    }

    /// Controller mode: `listener` hears what may change the SyncStateSet.
    pub fn set_sync_state_listener(&self, listener: SyncStateListener) {
        lock(&self.caught_up).listener = Some(listener);
    }

    /// How long ago each slave's ack last reached the master's max offset (RocketMQ's
    /// `isSlaveCaughtUp` compares it with `haMaxTimeSlaveNotCatchup`); live slaves only.
    pub fn caught_up(&self) -> Vec<(u64, Duration)> {
        let now = Instant::now();
        let mut out: Vec<(u64, Duration)> = lock(&self.caught_up)
            .at
            .iter()
            .map(|(&slave, &at)| (slave, now.saturating_duration_since(at)))
            .collect();
        out.sort_unstable();
        out
    }

    /// Records a report of `slave` at `offset`; the event to tell, if any.
    fn note_report(&self, slave: u64, offset: u64) -> Option<(SyncStateListener, SyncStateEvent)> {
        let store = self.store.as_ref()?;
        if offset < store.max_offset() {
            return None;
        }
        let member = lock(&self.sync_state_set)
            .as_ref()
            .is_some_and(|set| set.slaves.contains(&slave));
        let mut caught_up = lock(&self.caught_up);
        caught_up.at.insert(slave, Instant::now());
        if member || !caught_up.told.insert(slave) {
            return None;
        }
        let listener = caught_up.listener.clone()?;
        Some((listener, SyncStateEvent::CaughtUp(slave)))
    }

    /// `slave` lost a connection; the event to tell when it was its last.
    fn note_closed(
        &self,
        table: &HashMap<u64, (u64, u64)>,
        slave: u64,
    ) -> Option<(SyncStateListener, SyncStateEvent)> {
        if table.values().any(|(k, _)| *k == slave) {
            return None;
        }
        let mut caught_up = lock(&self.caught_up);
        caught_up.at.remove(&slave);
        caught_up.told.remove(&slave);
        let listener = caught_up.listener.clone()?;
        Some((listener, SyncStateEvent::Disconnected(slave)))
    }

    /// RocketMQ's `computeConfirmOffset`, handed to the store, which dispatches up to it: with
    /// `allAckInSyncStateSet` and slaves in the set, what every member acked (unchanged while
    /// one has not reported); otherwise consumers read everything. Called under the table
    /// lock before the puts' verdicts, so a consumer can read a message once its put is
    /// acknowledged.
    fn confirm(&self, table: &HashMap<u64, (u64, u64)>) {
        let Some(store) = &self.store else {
            return;
        };
        let confirm = match lock(&self.sync_state_set).as_ref() {
            Some(set) if set.all_ack && !set.slaves.is_empty() => {
                // Each member's best ack; None while one has none (unchanged, as RocketMQ's).
                let held_by_all = set.slaves.iter().try_fold(store.max_offset(), |min, id| {
                    let best = table
                        .values()
                        .filter(|(k, _)| k == id)
                        .map(|(_, o)| *o)
                        .max();
                    best.map(|b| min.min(b))
                });
                Some(held_by_all.unwrap_or_else(|| store.confirm_offset()))
            }
            _ => None,
        };
        // Under the table lock: no other update is between the swap and the store.
        if self
            .confirmed
            .swap(confirm.unwrap_or(u64::MAX), Ordering::AcqRel)
            == confirm.unwrap_or(u64::MAX)
        {
            return;
        }
        if let Err(e) = store.set_confirm_offset(confirm) {
            log::error!("dispatching up to the confirm offset {confirm:?} failed: {e}");
        }
    }

    /// The acks the GroupTransferService counts (the SyncStateSet's, in controller mode).
    fn counted(&self, table: &HashMap<u64, (u64, u64)>) -> Vec<u64> {
        covered(
            table,
            lock(&self.sync_state_set)
                .as_ref()
                .and_then(SyncStateSet::counted),
        )
    }

    /// Controller mode: from now on puts follow this SyncStateSet. With `all_ack` a put waits
    /// for the acks of exactly its slaves (none for a master alone in its set), else for any
    /// `inSyncReplicas - 1`; either way never SLAVE_NOT_AVAILABLE, and a put is refused before
    /// its append while the set is below `minInSyncReplicas`. `None` goes back to classic HA.
    pub fn set_sync_state_set(&self, set: Option<SyncStateSet>) {
        let mut policy = self.group_transfer.policy();
        policy.slaves = match &set {
            Some(s) if s.all_ack => s.slaves.len(),
            _ => self.configured_slaves,
        };
        policy.in_sync_replicas = set.as_ref().map(|s| s.slaves.len() + 1);
        let changed = {
            let mut current = lock(&self.sync_state_set);
            let changed = *current != set;
            *current = set;
            changed
        };
        // A slave left out of a new set is told of again when it catches up; the same set
        // again (a change the controller did not take) tells nothing new.
        if changed {
            lock(&self.caught_up).told.clear();
        }
        self.group_transfer.set_policy(policy);
        let table = lock(&self.by_connection);
        self.confirm(&table);
        let completions = self.group_transfer.record_acks(self.counted(&table));
        drop(table);
        completions.run();
    }

    pub(crate) fn update(&self, connection: u64, slave_key: u64, offset: u64) {
        if let Some((listener, event)) = self.note_report(slave_key, offset) {
            listener(event);
        }
        let mut table = lock(&self.by_connection);
        let prev = table.insert(connection, (slave_key, offset));
        if prev.map(|p| p.1) != Some(offset) {
            self.push2slave_max_offset
                .fetch_max(offset, Ordering::AcqRel);
            // Recorded under the table lock, so the service sees the changes in their order;
            // completed after it, so that a completion (a response written to a client, a
            // callback that reads this table) never runs under it. `Completions` keeps the
            // completions in the order the verdicts were reached.
            self.confirm(&table);
            let completions = self.group_transfer.record_acks(self.counted(&table));
            drop(table);
            completions.run();
        }
    }

    pub(crate) fn remove(&self, connection: u64) {
        let mut table = lock(&self.by_connection);
        if let Some((slave, _)) = table.remove(&connection) {
            self.confirm(&table);
            let completions = self.group_transfer.record_acks(self.counted(&table));
            let closed = self.note_closed(&table, slave);
            drop(table);
            completions.run();
            if let Some((listener, event)) = closed {
                listener(event);
            }
        }
    }

    pub fn push2slave_max_offset(&self) -> u64 {
        self.push2slave_max_offset.load(Ordering::Acquire)
    }

    /// Blocks until `count` distinct slaves acked `offset`; false after `timeout`. Waits in the
    /// GroupTransferService, like every put.
    pub fn wait_for(&self, offset: u64, count: usize, timeout: Duration) -> bool {
        self.group_transfer.wait_for_acks(offset, count, timeout)
    }

    /// Acked offsets of live slaves (one per distinct slave, its best), highest first.
    /// Every slave's best ack, highest first, in the SyncStateSet or not.
    pub fn slave_offsets(&self) -> Vec<u64> {
        covered(&lock(&self.by_connection), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::group_transfer::{PutStatus, WaitPolicy};

    #[test]
    fn distinct_slaves_are_counted_once() {
        let t = AckTable::new(
            Arc::new(GroupTransferService::start(WaitPolicy::default(), 0)),
            None,
        );
        t.update(1, 100, 50);
        t.update(2, 100, 60); // the same slave on a second connection
        assert_eq!(t.slave_offsets(), vec![60]);
        t.update(3, 200, 70);
        assert_eq!(t.slave_offsets(), vec![70, 60]);
        assert_eq!(t.push2slave_max_offset(), 70);
        t.remove(3);
        assert_eq!(t.slave_offsets(), vec![60]);
    }

    #[test]
    fn a_completion_runs_outside_the_table_lock() {
        let g = Arc::new(GroupTransferService::start(
            WaitPolicy {
                slaves: 1,
                slave_timeout: Duration::from_secs(3600),
                ..WaitPolicy::default()
            },
            0,
        ));
        let t = Arc::new(AckTable::new(g.clone(), None));
        t.update(1, 1, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let table = t.clone();
        // Reads the ack table from inside the completion: under the table lock, a deadlock.
        g.submit(
            10,
            Box::new(move |status| {
                let _ = tx.send((status, table.slave_offsets()));
            }),
        );
        t.update(1, 1, 10);
        assert_eq!(rx.recv().unwrap(), (PutStatus::PutOk, vec![10]));
    }

    #[test]
    fn every_change_reaches_the_group_transfer_service() {
        let g = Arc::new(GroupTransferService::start(
            WaitPolicy {
                slaves: 2,
                ..WaitPolicy::default()
            },
            0,
        ));
        let t = AckTable::new(g.clone(), None);
        t.update(1, 1, 10);
        assert!(!g.in_sync(10), "one slave of two");
        t.update(2, 2, 10);
        assert!(g.in_sync(10));
        t.remove(2);
        assert!(!g.in_sync(10), "a closed connection no longer counts");
    }

    /// The verdict of a put ending at `next_offset`, once the service reaches it.
    fn submitted(
        g: &GroupTransferService,
        next_offset: u64,
    ) -> std::sync::mpsc::Receiver<PutStatus> {
        let (tx, rx) = std::sync::mpsc::channel();
        g.submit(
            next_offset,
            Box::new(move |status| {
                let _ = tx.send(status);
            }),
        );
        rx
    }

    fn all_ack(slaves: &[u64]) -> Option<SyncStateSet> {
        Some(SyncStateSet {
            slaves: slaves.iter().copied().collect(),
            all_ack: true,
        })
    }

    #[test]
    fn all_ack_in_sync_state_set_waits_for_every_member_and_only_them() {
        let g = Arc::new(GroupTransferService::start(
            WaitPolicy {
                slaves: 1,
                slave_timeout: Duration::from_secs(3600),
                ..WaitPolicy::default()
            },
            0,
        ));
        let t = AckTable::new(g.clone(), None);
        t.set_sync_state_set(all_ack(&[2, 3]));
        // Both members connected, neither has the put yet.
        t.update(2, 2, 0);
        t.update(3, 3, 0);
        let rx = submitted(&g, 10);
        // A slave outside the set acks: it does not count.
        t.update(1, 4, 10);
        t.update(2, 2, 10);
        assert!(rx.try_recv().is_err(), "one member of two acked");
        t.update(3, 3, 10);
        assert_eq!(rx.recv().unwrap(), PutStatus::PutOk);
        assert_eq!(t.slave_offsets(), vec![10, 10, 10]);
        // A master alone in its set waits for nobody.
        t.set_sync_state_set(all_ack(&[]));
        assert_eq!(submitted(&g, 20).recv().unwrap(), PutStatus::PutOk);
        // Back to inSyncReplicas: any one slave.
        t.set_sync_state_set(None);
        assert_eq!(g.policy().slaves, 1);
    }

    #[test]
    fn a_member_that_has_not_reported_yet_is_waited_for_not_refused() {
        let g = Arc::new(GroupTransferService::start(
            WaitPolicy {
                slaves: 1,
                slave_timeout: Duration::from_secs(3600),
                ..WaitPolicy::default()
            },
            0,
        ));
        let t = AckTable::new(g.clone(), None);
        // Classic: no slave connected is SLAVE_NOT_AVAILABLE at once.
        assert!(!g.in_sync(10));
        // Controller mode: a RocketMQ slave joined the set but reports only when it has
        // read something (or every haSendHeartbeatInterval): the put waits for it.
        t.set_sync_state_set(all_ack(&[2]));
        let rx = submitted(&g, 10);
        assert!(rx.try_recv().is_err(), "waiting, not refused");
        t.update(7, 2, 10);
        assert_eq!(rx.recv().unwrap(), PutStatus::PutOk);
    }

    #[test]
    fn without_all_ack_any_slave_counts_and_min_in_sync_replicas_gates_the_put() {
        let g = Arc::new(GroupTransferService::start(
            WaitPolicy {
                slaves: 1,
                slave_timeout: Duration::from_secs(3600),
                min_in_sync_replicas: 2,
                ..WaitPolicy::default()
            },
            0,
        ));
        let t = AckTable::new(g.clone(), None);
        assert_eq!(
            g.policy().admits(),
            Ok(()),
            "classic HA never refuses before the append"
        );
        // The master alone in its set: refused, naming both sizes.
        let alone = SyncStateSet {
            slaves: BTreeSet::new(),
            all_ack: false,
        };
        t.set_sync_state_set(Some(alone));
        assert_eq!(g.policy().admits(), Err((1, 2)));
        t.set_sync_state_set(Some(SyncStateSet {
            slaves: BTreeSet::from([2]),
            all_ack: false,
        }));
        assert_eq!(g.policy().admits(), Ok(()));
        assert_eq!(
            g.policy().slaves,
            1,
            "inSyncReplicas - 1, not the set's size"
        );
        // No slave connected: waited for, never SLAVE_NOT_AVAILABLE; a slave outside the set
        // counts as well as a member.
        assert!(g.in_sync(10));
        let rx = submitted(&g, 10);
        assert!(rx.try_recv().is_err(), "waiting, not refused");
        t.update(9, 4, 10);
        assert_eq!(rx.recv().unwrap(), PutStatus::PutOk);
    }

    #[test]
    fn with_all_ack_consumers_read_what_every_member_of_the_set_holds() {
        use crate::store::confirm::tests::{open, put, readable};
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path()));
        let g = store.group_transfer().unwrap().clone();
        // Held back as a slave, then promoted alone in its set: it dispatches all it holds.
        store.set_confirm_offset(Some(0)).unwrap();
        put(&store, b"0");
        assert!(readable(&store).is_empty());
        let t = AckTable::new(g, Some(store.clone()));
        t.set_sync_state_set(all_ack(&[]));
        assert_eq!(readable(&store).len(), 1);
        t.set_sync_state_set(all_ack(&[2, 3]));
        let a = put(&store, b"a");
        t.update(1, 2, a);
        t.update(2, 3, a - 1);
        assert_eq!(readable(&store).len(), 1, "one member of two holds it");
        t.update(2, 3, a);
        assert_eq!(readable(&store).len(), 2);
        // A member gone from its connection: nothing more is confirmed until the set drops it.
        t.remove(1);
        let b = put(&store, b"b");
        t.update(2, 3, b);
        assert_eq!(readable(&store).len(), 2);
        t.set_sync_state_set(all_ack(&[3]));
        assert_eq!(readable(&store).len(), 3);
        // Alone in its set, or without allAckInSyncStateSet: read as appended.
        put(&store, b"c");
        t.set_sync_state_set(all_ack(&[]));
        assert_eq!(readable(&store).len(), 4);
        t.set_sync_state_set(Some(SyncStateSet {
            slaves: BTreeSet::from([3]),
            all_ack: false,
        }));
        put(&store, b"d");
        assert_eq!(readable(&store).len(), 5);
    }

    #[test]
    fn a_catch_up_outside_the_set_and_a_last_close_are_told_once() {
        use crate::store::confirm::tests::{open, put};
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path()));
        let g = store.group_transfer().unwrap().clone();
        let t = AckTable::new(g, Some(store.clone()));
        let told = Arc::new(Mutex::new(Vec::new()));
        let sink = told.clone();
        t.set_sync_state_listener(Arc::new(move |e| lock(&sink).push(e)));
        t.set_sync_state_set(all_ack(&[2]));
        let a = put(&store, b"a");
        // Behind: nothing; caught up: told once, however often it reports so.
        t.update(1, 3, a - 1);
        assert!(lock(&told).is_empty());
        t.update(1, 3, a);
        t.update(1, 3, a);
        // A member's catch-up changes nothing to tell.
        t.update(2, 2, a);
        assert_eq!(*lock(&told), vec![SyncStateEvent::CaughtUp(3)]);
        let slaves: Vec<u64> = t.caught_up().into_iter().map(|(s, _)| s).collect();
        assert_eq!(slaves, vec![2, 3]);
        // The same set again (a change the controller did not take): nothing new to tell; a
        // new set: a slave still outside it is told of again.
        t.set_sync_state_set(all_ack(&[2]));
        t.update(1, 3, a);
        assert_eq!(lock(&told).len(), 1);
        t.set_sync_state_set(all_ack(&[2, 5]));
        t.update(1, 3, a);
        // Two connections of one slave: only the last close is told, and it is no longer
        // caught up.
        t.update(4, 2, a);
        t.remove(2);
        t.remove(4);
        assert_eq!(
            *lock(&told),
            vec![
                SyncStateEvent::CaughtUp(3),
                SyncStateEvent::CaughtUp(3),
                SyncStateEvent::Disconnected(2)
            ]
        );
        let slaves: Vec<u64> = t.caught_up().into_iter().map(|(s, _)| s).collect();
        assert_eq!(slaves, vec![3]);
    }
}
