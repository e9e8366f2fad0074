//! The rate of RocketMQ's `BrokerStatsManager` that `mqadmin consumerProgress` prints as a
//! group's consume TPS: messages each group got from each topic (`GROUP_GET_NUMS`, counted
//! when a pull is answered), as a per-second rate over the last minute
//! (`getStatsDataInMinute().getTps()`: samples every 10 s, the oldest of 7 to the newest).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::sync::lock;

/// `StatsItem`'s minute list: 7 samples 10 s apart span the last minute.
const MINUTE_SAMPLES: usize = 7;
/// Milliseconds between two samples.
pub(crate) const SAMPLE_INTERVAL_MILLIS: i64 = 10_000;

#[derive(Default)]
struct Counter {
    total: u64,
    /// (millis, total) at each sampling, oldest first.
    samples: VecDeque<(i64, u64)>,
}

/// `GROUP_GET_NUMS` by topic, then group: a pull's count finds its counter without building a
/// `topic@group` key.
#[derive(Default)]
pub(crate) struct BrokerStatsManager {
    counters: Mutex<HashMap<String, HashMap<String, Counter>>>,
}

impl BrokerStatsManager {
    /// `incGroupGetNums`: a pull of `group` answered `messages` of `topic`.
    pub(crate) fn inc_group_get_nums(&self, group: &str, topic: &str, messages: u64) {
        if messages == 0 {
            return;
        }
        let mut counters = lock(&self.counters);
        let groups = match counters.get_mut(topic) {
            Some(groups) => groups,
            None => counters.entry(topic.to_owned()).or_default(),
        };
        match groups.get_mut(group) {
            Some(counter) => counter.total += messages,
            None => groups.entry(group.to_owned()).or_default().total += messages,
        }
    }

    /// Takes a sample of every counter at `millis` (every [`SAMPLE_INTERVAL_MILLIS`]).
    pub(crate) fn sample(&self, millis: i64) {
        for counter in lock(&self.counters)
            .values_mut()
            .flat_map(|g| g.values_mut())
        {
            counter.samples.push_back((millis, counter.total));
            if counter.samples.len() > MINUTE_SAMPLES {
                counter.samples.pop_front();
            }
        }
    }

    /// `tpsGroupGetNums`: messages a second over the samples of the last minute; 0 before two.
    pub(crate) fn tps_group_get_nums(&self, group: &str, topic: &str) -> f64 {
        let counters = lock(&self.counters);
        let Some(samples) = counters
            .get(topic)
            .and_then(|g| g.get(group))
            .map(|c| &c.samples)
        else {
            return 0.0;
        };
        match (samples.front(), samples.back()) {
            (Some(&(t0, first)), Some(&(t1, last))) if t1 > t0 => {
                (last - first) as f64 / (t1 - t0) as f64 * 1000.0
            }
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_rate_spans_the_samples_of_the_last_minute() {
        let stats = BrokerStatsManager::default();
        stats.inc_group_get_nums("g", "T", 0);
        assert_eq!(stats.tps_group_get_nums("g", "T"), 0.0);
        // 8 samples 10 s apart, 50 messages between each: the oldest falls out.
        for i in 0..8 {
            stats.inc_group_get_nums("g", "T", if i == 0 { 1000 } else { 50 });
            stats.sample(i * SAMPLE_INTERVAL_MILLIS);
        }
        assert_eq!(stats.tps_group_get_nums("g", "T"), 5.0);
        assert_eq!(stats.tps_group_get_nums("g", "other"), 0.0);
        assert_eq!(stats.tps_group_get_nums("other", "T"), 0.0);
    }
}
