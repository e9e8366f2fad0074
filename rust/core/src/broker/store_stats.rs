//! RocketMQ's `StoreStatsService`: the broker's put and get counters, sampled once a second
//! (on the housekeeping thread) into the rates GET_BROKER_RUNTIME_INFO reports over 10 s,
//! 1 min and 10 min, in RocketMQ's strings (`putTps` is `"10s 1min 10min"`, each a Java
//! `double`), which `mqadmin clusterList` parses into its InTPS / OutTPS columns.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::broker_stats::{BrokerStatsManager, SAMPLE_INTERVAL_MILLIS};
use crate::sync::lock;

/// The windows each rate is reported over, in seconds.
const WINDOWS: [u64; 3] = [10, 60, 600];
/// `MAX_RECORDS_OF_SAMPLING + 1`: one snapshot a second for the longest window.
const MAX_SNAPSHOTS: usize = 601;

/// The counters at one sampling (`CallSnapshot`, one list for all four counters).
#[derive(Debug, Clone, Copy, Default)]
struct CallSnapshot {
    /// Milliseconds since boot: may be negative for the virtual snapshot before boot.
    millis: i64,
    put: u64,
    found: u64,
    miss: u64,
    transfered: u64,
}

pub(crate) struct StoreStatsService {
    boot: Instant,
    /// `bootTimestamp`, Unix milliseconds.
    boot_timestamp: u64,
    /// Messages stored through the client port (`putMessageTimesTotal`; a slave's replicated
    /// records are not puts, as in RocketMQ).
    put: AtomicU64,
    /// Pulls that found messages (`getMessageTimesTotalFound`) and that did not (`...Miss`).
    found: AtomicU64,
    miss: AtomicU64,
    /// Messages answered to pulls (`getMessageTransferedMsgCount`).
    transfered: AtomicU64,
    snapshots: Mutex<VecDeque<CallSnapshot>>,
    /// Per group and topic, sampled every 10 s with these counters.
    groups: BrokerStatsManager,
    /// When `groups` was last sampled (millis since boot).
    groups_sampled: AtomicI64,
}

impl Default for StoreStatsService {
    fn default() -> Self {
        let stats = Self {
            boot: Instant::now(),
            boot_timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            put: AtomicU64::new(0),
            found: AtomicU64::new(0),
            miss: AtomicU64::new(0),
            transfered: AtomicU64::new(0),
            snapshots: Mutex::default(),
            groups: BrokerStatsManager::default(),
            groups_sampled: AtomicI64::new(i64::MIN),
        };
        // The first snapshot at boot, so every rate has a last sample to end at.
        stats.sampling();
        stats
    }
}

impl StoreStatsService {
    pub(crate) fn add_put(&self, messages: u64) {
        self.put.fetch_add(messages, Ordering::Relaxed);
    }

    /// One pull's lookup: `messages` found, or a miss when 0.
    pub(crate) fn add_get(&self, messages: u64) {
        if messages == 0 {
            self.miss.fetch_add(1, Ordering::Relaxed);
        } else {
            self.found.fetch_add(1, Ordering::Relaxed);
            self.transfered.fetch_add(messages, Ordering::Relaxed);
        }
    }

    /// `msgPutTotalTodayNow`.
    pub(crate) fn put_total(&self) -> u64 {
        self.put.load(Ordering::Relaxed)
    }

    /// `msgGetTotalTodayNow`.
    pub(crate) fn get_total(&self) -> u64 {
        self.transfered.load(Ordering::Relaxed)
    }

    /// The per group and topic rates.
    pub(crate) fn groups(&self) -> &BrokerStatsManager {
        &self.groups
    }

    /// Takes a snapshot of the counters, dropping the oldest beyond 10 minutes; every 10 s,
    /// one of the groups' too.
    pub(crate) fn sampling(&self) {
        let millis = self.boot.elapsed().as_millis() as i64;
        let last = self.groups_sampled.load(Ordering::Relaxed);
        if millis.saturating_sub(last) >= SAMPLE_INTERVAL_MILLIS {
            self.groups_sampled.store(millis, Ordering::Relaxed);
            self.groups.sample(millis);
        }
        self.record(CallSnapshot {
            millis,
            put: self.put.load(Ordering::Relaxed),
            found: self.found.load(Ordering::Relaxed),
            miss: self.miss.load(Ordering::Relaxed),
            transfered: self.transfered.load(Ordering::Relaxed),
        });
    }

    fn record(&self, snapshot: CallSnapshot) {
        let mut snapshots = lock(&self.snapshots);
        snapshots.push_back(snapshot);
        if snapshots.len() > MAX_SNAPSHOTS {
            snapshots.pop_front();
        }
    }

    /// `getRuntimeInfo`'s rates and boot time. RocketMQ leaves a window's rate empty until the
    /// broker has run that long; here the counters are known to have been 0 before boot, so a
    /// window reaching back before it is measured from a zero snapshot at its start.
    pub(crate) fn runtime_info(&self, table: &mut BTreeMap<&'static str, String>) {
        let snapshots = lock(&self.snapshots);
        let last = *snapshots.back().expect("a snapshot is taken at boot");
        let rates = |count: fn(&CallSnapshot) -> f64| {
            WINDOWS
                .iter()
                .map(|&secs| {
                    let begin = match snapshots.len().checked_sub(secs as usize + 1) {
                        Some(i) => snapshots[i],
                        None => CallSnapshot {
                            millis: last.millis - 1000 * secs as i64,
                            ..CallSnapshot::default()
                        },
                    };
                    tps(count(&begin), count(&last), begin.millis, last.millis)
                })
                .collect::<Vec<_>>()
        };
        let join = |v: &[f64]| {
            v.iter()
                .map(|&x| java_double(x))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let found = rates(|s| s.found as f64);
        let miss = rates(|s| s.miss as f64);
        let total: Vec<f64> = found.iter().zip(&miss).map(|(f, m)| f + m).collect();
        let transfered = join(&rates(|s| s.transfered as f64));
        table.insert("putTps", join(&rates(|s| s.put as f64)));
        table.insert("getFoundTps", join(&found));
        table.insert("getMissTps", join(&miss));
        table.insert("getTotalTps", join(&total));
        // 5.x spells it right; 4.x's tools read the old key.
        table.insert("getTransferredTps", transfered.clone());
        table.insert("getTransferedTps", transfered);
        table.insert("bootTimestamp", self.boot_timestamp.to_string());
    }
}

/// `CallSnapshot.getTPS`: per second between two samples.
fn tps(begin: f64, end: f64, begin_millis: i64, end_millis: i64) -> f64 {
    let millis = end_millis - begin_millis;
    if millis <= 0 {
        return 0.0;
    }
    (end - begin) / millis as f64 * 1000.0
}

/// Java's `Double.toString` for the rates' range: the shortest digits, with a `.0` on whole
/// numbers (`0.0`, `1234.5`).
fn java_double(v: f64) -> String {
    let s = v.to_string();
    if s.contains('.') {
        s
    } else {
        s + ".0"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(millis: i64, put: u64) -> CallSnapshot {
        CallSnapshot {
            millis,
            put,
            ..CallSnapshot::default()
        }
    }

    fn info(stats: &StoreStatsService) -> BTreeMap<&'static str, String> {
        let mut table = BTreeMap::new();
        stats.runtime_info(&mut table);
        table
    }

    #[test]
    fn rates_are_java_doubles_over_10s_1min_10min_of_a_ring_of_10min() {
        let stats = StoreStatsService::default();
        assert_eq!(info(&stats)["putTps"], "0.0 0.0 0.0");
        lock(&stats.snapshots).clear();
        // 700 s at 5 puts a second, then 10 s at 10: the oldest fall out of the ring.
        let mut put = 0;
        for i in 0..=710 {
            put += if i > 700 {
                10
            } else if i > 0 {
                5
            } else {
                0
            };
            stats.record(snapshot(i * 1000, put));
        }
        assert_eq!(lock(&stats.snapshots).len(), MAX_SNAPSHOTS);
        let table = info(&stats);
        // 1 min: 50 s at 5 and 10 s at 10; 10 min: 590 s at 5 and 10 s at 10.
        assert_eq!(table["putTps"], "10.0 5.833333333333334 5.083333333333333");
        assert_eq!(table["getTransferedTps"], table["getTransferredTps"]);
    }

    #[test]
    fn a_window_longer_than_the_uptime_counts_from_zero_at_boot() {
        let stats = StoreStatsService::default();
        stats.add_put(30);
        stats.add_get(20);
        stats.add_get(0);
        stats.add_get(0);
        lock(&stats.snapshots).clear();
        stats.record(snapshot(0, 0));
        // Two seconds after boot.
        stats.record(CallSnapshot {
            millis: 2000,
            put: 30,
            found: 1,
            miss: 2,
            transfered: 20,
        });
        let table = info(&stats);
        let rates =
            |key: &str| -> Vec<f64> { table[key].split(' ').map(|x| x.parse().unwrap()).collect() };
        let near = |key: &str, want: [f64; 3]| {
            let got = rates(key);
            assert!(
                got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9),
                "{key}: {got:?} != {want:?}"
            );
        };
        // The messages of the last 2 s over each whole window.
        assert!(table["putTps"].starts_with("3.0 0.5 "), "{table:?}");
        near("putTps", [3.0, 0.5, 0.05]);
        near("getTransferedTps", [2.0, 1.0 / 3.0, 1.0 / 30.0]);
        near("getFoundTps", [0.1, 1.0 / 60.0, 1.0 / 600.0]);
        near("getMissTps", [0.2, 1.0 / 30.0, 1.0 / 300.0]);
        near("getTotalTps", [0.3, 0.05, 0.005]);
        assert_eq!((stats.put_total(), stats.get_total()), (30, 20));
    }
}
