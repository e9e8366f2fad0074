//! RocketMQ's `ConsumerOrderInfoManager`: FIFO pops (`order=true`) of a queue, one at a time.
//!
//! An orderly pop writes no checkpoint: the queue's `OrderInfo` remembers what the pop took
//! (its offsets, pop time, invisible time and attempt id) and the queue is blocked for the
//! group until every one of them is acked or its invisible time has passed; then the next pop
//! takes the first message not acked, again, counting how often each was handed out (the
//! consumer's reconsume count, `orderCountInfo`). The group's offset stays at the pop's start
//! until an ack moves it past the acked prefix. Kept in `config/consumerOrderInfo.json`, in
//! RocketMQ's JSON (fastjson's short names), written with the consumer offsets.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::protocol::config_file::write_atomically;
use crate::protocol::json::parse_lenient;
use crate::protocol::now_millis;
use crate::sync::lock;

/// `OrderInfo`: one orderly pop of a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OrderInfo {
    #[serde(rename = "popTime")]
    pop_time: i64,
    #[serde(rename = "i", default)]
    invisible_time: Option<i64>,
    /// The first message's queue offset, then each other's distance from it.
    #[serde(rename = "o", default)]
    offset_list: Vec<i64>,
    /// Queue offset -> when it becomes visible again (an invisible-time change).
    #[serde(rename = "ot", default, skip_serializing_if = "Option::is_none")]
    offset_next_visible_time: Option<BTreeMap<i64, i64>>,
    /// Queue offset -> times handed out before (only those above 0).
    #[serde(rename = "oc", default, skip_serializing_if = "Option::is_none")]
    offset_consumed_count: Option<BTreeMap<i64, i32>>,
    #[serde(rename = "l", default)]
    last_consume_timestamp: i64,
    /// A bit per offset acked.
    #[serde(rename = "cm", default)]
    commit_offset_bit: i64,
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    attempt_id: Option<String>,
}

impl OrderInfo {
    fn queue_offset(&self, i: usize) -> i64 {
        match i {
            0 => self.offset_list[0],
            _ => self.offset_list[0] + self.offset_list[i],
        }
    }

    fn acked(&self, i: usize) -> bool {
        i < 64 && self.commit_offset_bit & (1 << i) != 0
    }

    /// `needBlock`: a message of the pop neither acked nor visible again yet (the same
    /// attempt, a client's retry of the same receive, is let through).
    fn need_block(&self, attempt_id: Option<&str>, invisible_time: i64, now: i64) -> bool {
        if self.offset_list.is_empty() {
            return false;
        }
        if self.attempt_id.is_some() && self.attempt_id.as_deref() == attempt_id {
            return false;
        }
        let invisible = self
            .invisible_time
            .filter(|&t| t > 0)
            .unwrap_or(invisible_time);
        (0..self.offset_list.len()).any(|i| {
            if self.acked(i) {
                return false;
            }
            let visible_at = self
                .offset_next_visible_time
                .as_ref()
                .and_then(|m| m.get(&self.queue_offset(i)).copied())
                .unwrap_or(self.pop_time + invisible);
            now < visible_at
        })
    }

    /// `getNextOffset`: the first offset not acked, or past the last when all are.
    fn next_offset(&self) -> i64 {
        let n = self.offset_list.len();
        match (0..n).find(|&i| !self.acked(i)) {
            Some(i) => self.queue_offset(i),
            None => self.queue_offset(n - 1) + 1,
        }
    }
}

/// `ConsumerOrderInfoManager`'s file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct OrderInfoWrapper {
    #[serde(default)]
    table: HashMap<String, BTreeMap<i32, OrderInfo>>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsumerOrderInfoError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a consumer order info file: {reason}")]
    BadFile { path: PathBuf, reason: String },
}

/// What an ack of an orderly pop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitAndNext {
    /// The group's offset moves here.
    Next(i64),
    /// The offset is not one of the pop's (`-1`): MESSAGE_ILLEGAL.
    NotPopped,
    /// The pop time is not the queue's last pop (a stale ack, `-2`): ignored.
    Stale,
}

pub(crate) struct ConsumerOrderInfoManager {
    path: PathBuf,
    /// `topic@group` -> queue id -> the queue's last orderly pop. Pops and acks on the loop
    /// thread, the file written by the housekeeping thread.
    table: Mutex<HashMap<String, BTreeMap<i32, OrderInfo>>>,
    dirty: AtomicBool,
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl ConsumerOrderInfoManager {
    /// Loads `ROOT/config/consumerOrderInfo.json`; none yet means no orderly pop.
    pub(crate) fn load(root: &Path) -> Result<Self, ConsumerOrderInfoError> {
        let path = root.join("config").join("consumerOrderInfo.json");
        let table = match std::fs::read(&path) {
            Ok(raw) => {
                parse_lenient::<OrderInfoWrapper>(&raw, "ConsumerOrderInfoManager")
                    .map_err(|e| ConsumerOrderInfoError::BadFile {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?
                    .table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(source) => return Err(ConsumerOrderInfoError::Io { path, source }),
        };
        Ok(Self {
            path,
            table: Mutex::new(table),
            dirty: AtomicBool::new(false),
        })
    }

    /// `checkBlock`: whether the queue's last orderly pop still holds it.
    pub(crate) fn check_block(
        &self,
        attempt_id: Option<&str>,
        topic: &str,
        group: &str,
        queue_id: i32,
        invisible_time: i64,
    ) -> bool {
        lock(&self.table)
            .get(&key(topic, group))
            .and_then(|q| q.get(&queue_id))
            .is_some_and(|info| info.need_block(attempt_id, invisible_time, now_millis()))
    }

    /// `update`: a pop took `offsets` from the queue; returns how often each was handed out
    /// before (offsets not listed: never), for `orderCountInfo`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        &self,
        attempt_id: Option<&str>,
        topic: &str,
        group: &str,
        queue_id: i32,
        pop_time: i64,
        invisible_time: i64,
        offsets: &[i64],
    ) -> BTreeMap<i64, i32> {
        let Some(&first) = offsets.first() else {
            return BTreeMap::new();
        };
        let mut offset_list = vec![first];
        offset_list.extend(offsets[1..].iter().map(|o| o - first));
        let mut table = lock(&self.table);
        let queues = table.entry(key(topic, group)).or_default();
        let counts = match queues.get(&queue_id) {
            // A retry of the same receive keeps its counts.
            Some(prev) if prev.attempt_id.is_some() && prev.attempt_id.as_deref() == attempt_id => {
                prev.offset_consumed_count.clone().unwrap_or_default()
            }
            Some(prev) => {
                let before: Vec<i64> = (0..prev.offset_list.len())
                    .map(|i| prev.queue_offset(i))
                    .collect();
                let prev_counts = prev.offset_consumed_count.clone().unwrap_or_default();
                offsets
                    .iter()
                    .filter(|o| before.contains(o))
                    .map(|&o| (o, prev_counts.get(&o).copied().unwrap_or(0) + 1))
                    .collect()
            }
            None => BTreeMap::new(),
        };
        queues.insert(
            queue_id,
            OrderInfo {
                pop_time,
                invisible_time: Some(invisible_time),
                offset_list,
                offset_next_visible_time: None,
                offset_consumed_count: (!counts.is_empty()).then(|| counts.clone()),
                last_consume_timestamp: now_millis(),
                commit_offset_bit: 0,
                attempt_id: attempt_id.map(str::to_owned),
            },
        );
        self.dirty.store(true, Ordering::Release);
        counts
    }

    /// `commitAndNext`: `queue_offset` of the pop at `pop_time` acked.
    pub(crate) fn commit_and_next(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        queue_offset: i64,
        pop_time: i64,
    ) -> CommitAndNext {
        let mut table = lock(&self.table);
        let Some(info) = table
            .get_mut(&key(topic, group))
            .and_then(|q| q.get_mut(&queue_id))
        else {
            return CommitAndNext::Next(queue_offset + 1);
        };
        if info.offset_list.is_empty() {
            return CommitAndNext::NotPopped;
        }
        if info.pop_time != pop_time {
            return CommitAndNext::Stale;
        }
        let Some(i) = (0..info.offset_list.len()).find(|&i| info.queue_offset(i) == queue_offset)
        else {
            return CommitAndNext::NotPopped;
        };
        if i < 64 {
            info.commit_offset_bit |= 1 << i;
        }
        info.last_consume_timestamp = now_millis();
        self.dirty.store(true, Ordering::Release);
        CommitAndNext::Next(info.next_offset())
    }

    /// `updateNextVisibleTime`: an invisible-time change of one message of the last pop.
    pub(crate) fn update_next_visible_time(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        queue_offset: i64,
        pop_time: i64,
        next_visible_time: i64,
    ) -> bool {
        let mut table = lock(&self.table);
        let Some(info) = table
            .get_mut(&key(topic, group))
            .and_then(|q| q.get_mut(&queue_id))
            .filter(|info| info.pop_time == pop_time)
        else {
            return false;
        };
        info.offset_next_visible_time
            .get_or_insert_with(BTreeMap::new)
            .insert(queue_offset, next_visible_time);
        self.dirty.store(true, Ordering::Release);
        true
    }

    /// `clearBlock`: an operator's reset of the queue frees it.
    pub(crate) fn clear_block(&self, topic: &str, group: &str, queue_id: i32) {
        if let Some(q) = lock(&self.table).get_mut(&key(topic, group)) {
            q.remove(&queue_id);
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// Writes the file if anything changed since the last write.
    pub(crate) fn persist(&self) -> Result<(), ConsumerOrderInfoError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let wrapper = OrderInfoWrapper {
            table: lock(&self.table).clone(),
        };
        let text = serde_json::to_vec_pretty(&wrapper).unwrap_or_default();
        write_atomically(&self.path, &text).map_err(|source| {
            self.dirty.store(true, Ordering::Release);
            ConsumerOrderInfoError::Io {
                path: self.path.clone(),
                source,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_blocked_until_its_pop_is_acked_and_its_counts_grow_on_each_repop() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOrderInfoManager::load(dir.path()).unwrap();
        assert!(!m.check_block(None, "T", "G", 0, 1000));
        let counts = m.update(Some("a1"), "T", "G", 0, now_millis(), 60_000, &[5, 6]);
        assert!(counts.is_empty(), "first delivery");
        assert!(
            m.check_block(Some("a2"), "T", "G", 0, 60_000),
            "held by the pop"
        );
        assert!(
            !m.check_block(Some("a1"), "T", "G", 0, 60_000),
            "its own retry"
        );
        assert!(
            !m.check_block(None, "T", "G", 1, 60_000),
            "other queues are free"
        );
        // Handed out again (the invisible time passed): counted.
        let again = m.update(Some("a3"), "T", "G", 0, 7, 60_000, &[5, 6]);
        assert_eq!(again, BTreeMap::from([(5, 1), (6, 1)]));
        assert_eq!(m.commit_and_next("T", "G", 0, 6, 8), CommitAndNext::Stale);
        assert_eq!(
            m.commit_and_next("T", "G", 0, 9, 7),
            CommitAndNext::NotPopped
        );
        assert_eq!(m.commit_and_next("T", "G", 0, 6, 7), CommitAndNext::Next(5));
        assert_eq!(m.commit_and_next("T", "G", 0, 5, 7), CommitAndNext::Next(7));
        assert!(!m.check_block(None, "T", "G", 0, 60_000), "all acked");
        m.persist().unwrap();
        let back = ConsumerOrderInfoManager::load(dir.path()).unwrap();
        assert_eq!(
            lock(&back.table).get("T@G").unwrap().get(&0),
            lock(&m.table).get("T@G").unwrap().get(&0)
        );
        let raw: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join("config/consumerOrderInfo.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(raw["table"]["T@G"]["0"]["o"], serde_json::json!([5, 1]));
        assert_eq!(raw["table"]["T@G"]["0"]["cm"], 3);
    }

    #[test]
    fn an_invisible_time_change_moves_one_messages_visibility() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOrderInfoManager::load(dir.path()).unwrap();
        let pop_time = now_millis() - 10_000;
        m.update(None, "T", "G", 0, pop_time, 1_000, &[0]);
        assert!(
            !m.check_block(None, "T", "G", 0, 1_000),
            "its invisible time passed"
        );
        assert!(m.update_next_visible_time("T", "G", 0, 0, pop_time, now_millis() + 60_000));
        assert!(m.check_block(None, "T", "G", 0, 1_000));
        assert!(
            !m.update_next_visible_time("T", "G", 0, 0, pop_time + 1, 0),
            "stale"
        );
    }
}
