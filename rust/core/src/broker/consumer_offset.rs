//! RocketMQ's `ConsumerOffsetManager`: the offset each consumer group committed per topic queue,
//! kept under `topic@group` keys and persisted in `STORE/config/consumerOffset.json` in
//! RocketMQ's shape (`{"offsetTable":{"topic@group":{"0":12}}}`), written atomically every
//! `flushConsumerOffsetInterval` and at shutdown, loaded at start (the temporary files of writes
//! a crash cut short are deleted then, never read). A slave's table is replaced by
//! its master's at every sync (`GET_ALL_CONSUMER_OFFSET`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::topic_config::{remove_stale_temporaries, write_atomically};
use crate::protocol::body::DataVersion;
use crate::protocol::json::parse_lenient;
use crate::protocol::now_millis;
use crate::sync::lock;

/// `TOPIC_GROUP_SEPARATOR`.
const TOPIC_GROUP_SEPARATOR: char = '@';

/// `topic@group` -> queue id -> committed offset.
pub(crate) type OffsetTable = BTreeMap<String, BTreeMap<i32, i64>>;

/// `ConsumerOffsetSerializeWrapper`: the file's shape and GET_ALL_CONSUMER_OFFSET's body.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ConsumerOffsetSerializeWrapper {
    #[serde(rename = "offsetTable")]
    pub(crate) offset_table: OffsetTable,
    /// RocketMQ 5's slave takes it with the offsets (and fails on a body without one).
    #[serde(rename = "dataVersion")]
    pub(crate) data_version: DataVersion,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsumerOffsetError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a consumer offset file: {reason}")]
    BadFile { path: PathBuf, reason: String },
}

pub(crate) struct ConsumerOffsetManager {
    path: PathBuf,
    /// Commits come from the loop thread, persists from the housekeeping thread.
    table: Mutex<OffsetTable>,
    /// Something changed since the last persist: an idle broker does not rewrite the file.
    dirty: AtomicBool,
    /// `resetOffsetTable`: offsets an operator reset, held until the group's next pull of
    /// the queue takes them; meanwhile the group's own commits of the queue are ignored, so
    /// a consumer still running cannot write its old position over the reset.
    reset: Mutex<OffsetTable>,
}

impl ConsumerOffsetManager {
    /// Loads `ROOT/config/consumerOffset.json`; none yet means no offsets.
    pub(crate) fn load(root: &Path) -> Result<Self, ConsumerOffsetError> {
        let path = root.join("config").join("consumerOffset.json");
        remove_stale_temporaries(&path);
        let table = match std::fs::read(&path) {
            // fastjson writes the queue ids as bare integer keys: a file RocketMQ wrote loads.
            Ok(raw) => {
                parse_lenient::<ConsumerOffsetSerializeWrapper>(
                    &raw,
                    "ConsumerOffsetSerializeWrapper",
                )
                .map_err(|e| ConsumerOffsetError::BadFile {
                    path: path.clone(),
                    reason: e.to_string(),
                })?
                .offset_table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => OffsetTable::new(),
            Err(source) => return Err(ConsumerOffsetError::Io { path, source }),
        };
        Ok(Self {
            path,
            table: Mutex::new(table),
            dirty: AtomicBool::new(false),
            reset: Mutex::default(),
        })
    }

    /// A group's commit; false, and ignored, while an operator's reset of the queue waits
    /// for the group's next pull (`hasOffsetReset`).
    pub(crate) fn commit_offset(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> bool {
        let key = key(topic, group);
        if lock(&self.reset)
            .get(&key)
            .is_some_and(|q| q.contains_key(&queue_id))
        {
            return false;
        }
        self.set(key, queue_id, offset);
        true
    }

    fn set(&self, key: String, queue_id: i32, offset: i64) {
        lock(&self.table)
            .entry(key)
            .or_default()
            .insert(queue_id, offset);
        self.dirty.store(true, Ordering::Release);
    }

    /// `assignResetOffset`: the group's offset of the queue is `offset` now, and its next pull
    /// of the queue is told to move there.
    pub(crate) fn assign_reset_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let key = key(topic, group);
        lock(&self.reset)
            .entry(key.clone())
            .or_default()
            .insert(queue_id, offset);
        self.set(key, queue_id, offset);
    }

    /// `queryThenEraseResetOffset`: a reset waiting for this pull, taken.
    pub(crate) fn take_reset_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let mut reset = lock(&self.reset);
        let key = key(topic, group);
        let queues = reset.get_mut(&key)?;
        let offset = queues.remove(&queue_id);
        if queues.is_empty() {
            reset.remove(&key);
        }
        offset
    }

    /// The committed offset, `None` when the group never committed for this queue.
    pub(crate) fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        lock(&self.table)
            .get(&key(topic, group))
            .and_then(|q| q.get(&queue_id).copied())
    }

    /// Every committed offset: (group, topic, queue id, offset).
    pub(crate) fn all(&self) -> Vec<(String, String, i32, i64)> {
        let table = lock(&self.table);
        let mut out = Vec::new();
        for (k, queues) in table.iter() {
            if let Some((topic, group)) = k.rsplit_once(TOPIC_GROUP_SEPARATOR) {
                for (&queue_id, &offset) in queues {
                    out.push((group.to_owned(), topic.to_owned(), queue_id, offset));
                }
            }
        }
        out
    }

    /// `whichTopicByConsumer`: the topics `group` committed an offset in.
    pub(crate) fn topics_of(&self, group: &str) -> BTreeSet<String> {
        self.pairs(|_, g| g == group, |topic, _| topic)
    }

    /// `whichGroupByTopic`: the groups that committed an offset in `topic`.
    pub(crate) fn groups_of(&self, topic: &str) -> BTreeSet<String> {
        self.pairs(|t, _| t == topic, |_, group| group)
    }

    /// One side of each (topic, group) of the table that `matches` picks.
    fn pairs(
        &self,
        matches: impl Fn(&str, &str) -> bool,
        side: impl for<'k> Fn(&'k str, &'k str) -> &'k str,
    ) -> BTreeSet<String> {
        lock(&self.table)
            .keys()
            .filter_map(|k| k.rsplit_once(TOPIC_GROUP_SEPARATOR))
            .filter(|(topic, group)| matches(topic, group))
            .map(|(topic, group)| side(topic, group).to_owned())
            .collect()
    }

    /// `cleanOffsetByTopic` (a topic deleted) and `removeOffset` (a group deleted): drops the
    /// offsets of every (topic, group) `matches` picks; the next persist writes the rest.
    pub(crate) fn remove_where(&self, matches: impl Fn(&str, &str) -> bool) {
        let keep = |k: &String, _: &mut BTreeMap<i32, i64>| {
            !k.rsplit_once(TOPIC_GROUP_SEPARATOR)
                .is_some_and(|(topic, group)| matches(topic, group))
        };
        lock(&self.table).retain(keep);
        lock(&self.reset).retain(keep);
        self.dirty.store(true, Ordering::Release);
    }

    /// What GET_ALL_CONSUMER_OFFSET answers.
    /// The table as the file and GET_ALL_CONSUMER_OFFSET carry it. rocketha keeps no version
    /// of its offsets (a slave takes them whole at each sync): the one given says when they
    /// were read.
    fn wrapper(&self) -> ConsumerOffsetSerializeWrapper {
        ConsumerOffsetSerializeWrapper {
            offset_table: lock(&self.table).clone(),
            data_version: DataVersion {
                timestamp: now_millis(),
                ..DataVersion::default()
            },
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let wrapper = self.wrapper();
        // A map of strings to maps of integers always serializes.
        serde_json::to_vec(&wrapper).unwrap_or_default()
    }

    /// A slave's sync: the master's offsets overwrite these key by key (`putAll`), then are
    /// persisted.
    pub(crate) fn put_all(&self, table: OffsetTable) -> Result<(), ConsumerOffsetError> {
        lock(&self.table).extend(table);
        self.dirty.store(true, Ordering::Release);
        self.persist()
    }

    /// Writes the file if anything changed since the last write.
    pub(crate) fn persist(&self) -> Result<(), ConsumerOffsetError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let text = serde_json::to_vec_pretty(&self.wrapper()).unwrap_or_default();
        write_atomically(&self.path, &text).map_err(|source| {
            // Not written: the next period tries again.
            self.dirty.store(true, Ordering::Release);
            ConsumerOffsetError::Io {
                path: self.path.clone(),
                source,
            }
        })
    }
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}{TOPIC_GROUP_SEPARATOR}{group}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_persist_in_rocketmqs_shape_and_load_back() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::load(dir.path()).unwrap();
        assert_eq!(m.query_offset("g", "T", 0), None);
        m.commit_offset("g", "T", 0, 12);
        m.commit_offset("g", "T", 3, 7);
        m.persist().unwrap();
        let raw = std::fs::read(dir.path().join("config/consumerOffset.json")).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(
            json["offsetTable"],
            serde_json::json!({"T@g": {"0": 12, "3": 7}})
        );
        // RocketMQ 5's slave reads the version beside the table (and fails without it).
        assert!(
            json["dataVersion"]["timestamp"].as_i64().unwrap() > 0,
            "{json}"
        );
        let again = ConsumerOffsetManager::load(dir.path()).unwrap();
        assert_eq!(again.query_offset("g", "T", 3), Some(7));
        assert_eq!(again.query_offset("g", "T", 1), None);
    }

    #[test]
    fn a_file_written_by_rocketmq_loads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        // fastjson's own text: bare integer keys, and RocketMQ 5's dataVersion beside the table.
        std::fs::write(
            dir.path().join("config/consumerOffset.json"),
            br#"{"dataVersion":{"counter":3,"timestamp":1},
                 "offsetTable":{"%RETRY%cg@cg":{0:0},"TopicTest@cg":{1:250,0:249}}}"#,
        )
        .unwrap();
        let m = ConsumerOffsetManager::load(dir.path()).unwrap();
        assert_eq!(m.query_offset("cg", "TopicTest", 1), Some(250));
        std::fs::write(
            dir.path().join("config/consumerOffset.json"),
            b"{offsetTable",
        )
        .unwrap();
        let err = ConsumerOffsetManager::load(dir.path())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("consumerOffset.json is not a consumer offset file"),
            "{err}"
        );
    }

    #[test]
    fn a_clean_table_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::load(dir.path()).unwrap();
        m.persist().unwrap();
        assert!(!dir.path().join("config/consumerOffset.json").exists());
    }
}
