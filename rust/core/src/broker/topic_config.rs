//! RocketMQ's `TopicConfigManager`: the broker's topics with their queue counts and permissions,
//! persisted in `STORE/config/topics.json` (written to a temporary file, synced, renamed: a
//! crash leaves the old file or the new one, never half of one) and sent to the name server.
//!
//! A topic a send creates is persisted off the remoting loop thread, as RocketMQ persists it
//! asynchronously too: by the register loop, woken by the change, before it tells the name
//! servers (so a route they hand out is on the broker's disk), and at shutdown.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::protocol::body::{perm, DataVersion, TopicConfig, TopicConfigSerializeWrapper};
pub(crate) use crate::protocol::config_file::{remove_stale_temporaries, write_atomically};
use crate::protocol::now_millis;
pub(crate) use crate::protocol::AUTO_CREATE_TOPIC_KEY_TOPIC;
use crate::sync::lock;

use super::BrokerSettings;

/// `TopicValidator.TOPIC_MAX_LENGTH`.
const TOPIC_MAX_LENGTH: usize = 127;

/// System topics every RocketMQ broker holds (`TopicValidator`), one queue each. Besides
/// matching Java's table, they keep a broker's first registration from carrying a single
/// topic, which the name server reads as an incremental update of an unknown broker and
/// refuses.
const SYSTEM_TOPICS: [&str; 2] = ["SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"];
/// `PermName.PERM_INHERIT`: topics created from this one inherit its permission.
pub(crate) const PERM_INHERIT: i32 = 1;

#[derive(Debug, thiserror::Error)]
pub(crate) enum TopicConfigError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a topic config file: {reason}")]
    BadFile { path: PathBuf, reason: String },
}

pub(crate) struct TopicConfigManager {
    path: PathBuf,
    table: Mutex<TopicConfigSerializeWrapper>,
    /// A send created a topic the file does not have yet ([`Self::persist_unsaved`]). Set and
    /// cleared under the table lock, so a persist clears only what it serialized.
    unsaved: AtomicBool,
    /// One persist at a time, so that the file ends with the latest table serialized, not an
    /// older one renamed last.
    writer: Mutex<()>,
}

/// `TopicValidator.validateTopic`.
pub(crate) fn validate_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("The specified topic is blank.".into());
    }
    if topic.len() > TOPIC_MAX_LENGTH {
        return Err(format!(
            "The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
        ));
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'%' || b == b'-' || b == b'_' || b == b'|')
    {
        return Err(format!(
            "The specified topic[{topic}] contains illegal characters, allowing only \
             ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    Ok(())
}

fn insert_missing(table: &mut TopicConfigSerializeWrapper, topic: &str, nums: i32, perm: i32) {
    table
        .topic_config_table
        .entry(topic.to_owned())
        .or_insert_with(|| TopicConfig {
            topic_name: topic.to_owned(),
            read_queue_nums: nums,
            write_queue_nums: nums,
            perm,
            ..TopicConfig::default()
        });
}

impl TopicConfigManager {
    /// Loads `ROOT/config/topics.json` (none yet: no topics). With `auto_create`, the
    /// `TBW102` template is there too, with `default_queue_nums` queues, as RocketMQ's broker
    /// adds it when `autoCreateTopicEnable` is on.
    pub(crate) fn load(root: &Path, settings: &BrokerSettings) -> Result<Self, TopicConfigError> {
        let path = root.join("config").join("topics.json");
        remove_stale_temporaries(&path);
        let mut table = match std::fs::read(&path) {
            Ok(raw) => {
                serde_json::from_slice::<TopicConfigSerializeWrapper>(&raw).map_err(|e| {
                    TopicConfigError::BadFile {
                        path: path.clone(),
                        reason: e.to_string(),
                    }
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                TopicConfigSerializeWrapper::default()
            }
            Err(source) => return Err(TopicConfigError::Io { path, source }),
        };
        for topic in SYSTEM_TOPICS {
            table
                .topic_config_table
                .entry(topic.to_owned())
                .or_insert_with(|| TopicConfig {
                    topic_name: topic.to_owned(),
                    read_queue_nums: 1,
                    write_queue_nums: 1,
                    ..TopicConfig::default()
                });
        }
        if settings.auto_create_topic.get() {
            let nums = settings.default_topic_queue_nums;
            let all = perm::PERM_READ | perm::PERM_WRITE | PERM_INHERIT;
            insert_missing(&mut table, AUTO_CREATE_TOPIC_KEY_TOPIC, nums, all);
        }
        // `TopicConfigManager.init`: one topic named after the cluster (16 queues) and one
        // after the broker (1), which admin tools resolve to find the brokers to act on.
        let rw = |on: bool| {
            PERM_INHERIT
                | if on {
                    perm::PERM_READ | perm::PERM_WRITE
                } else {
                    0
                }
        };
        for (name, nums, on) in [
            (&settings.cluster_name, 16, settings.cluster_topic_enable),
            (&settings.broker_name, 1, settings.broker_topic_enable),
        ] {
            // A name RocketMQ's topic charset cannot carry is no topic (it would be refused).
            if validate_topic(name).is_ok() {
                insert_missing(&mut table, name, nums, rw(on));
            }
        }
        Ok(Self {
            path,
            table: Mutex::new(table),
            unsaved: AtomicBool::new(false),
            writer: Mutex::new(()),
        })
    }

    pub(crate) fn select(&self, topic: &str) -> Option<TopicConfig> {
        lock(&self.table).topic_config_table.get(topic).cloned()
    }

    /// `createTopicInSendMessageMethod`: a send to an unknown topic that names a template
    /// allowed to spawn topics (`PERM_INHERIT`) creates it with at most the template's queues.
    /// `None` when the template does not exist or does not allow it. Not persisted here (the
    /// loop thread would wait for an fsync): see [`Self::persist_unsaved`].
    pub(crate) fn create_in_send(
        &self,
        topic: &str,
        default_topic: &str,
        queue_nums: i32,
        topic_sys_flag: i32,
    ) -> Option<TopicConfig> {
        let mut table = lock(&self.table);
        if let Some(existing) = table.topic_config_table.get(topic) {
            return Some(existing.clone());
        }
        let template = table.topic_config_table.get(default_topic)?;
        if template.perm & PERM_INHERIT == 0 {
            return None;
        }
        let nums = queue_nums.clamp(1, template.write_queue_nums.max(1));
        let perm = template.perm & !PERM_INHERIT;
        Some(self.insert_created(&mut table, topic, nums, perm, topic_sys_flag))
    }

    /// `createTopicInSendMessageBackMethod`: the topic, created with `queue_nums` queues and
    /// `perm` when unknown (a group's retry topic, its dead-letter queue). Persisted as
    /// [`Self::create_in_send`]'s are.
    pub(crate) fn create_in_send_back(
        &self,
        topic: &str,
        queue_nums: i32,
        perm: i32,
        topic_sys_flag: i32,
    ) -> TopicConfig {
        let mut table = lock(&self.table);
        if let Some(existing) = table.topic_config_table.get(topic) {
            return existing.clone();
        }
        self.insert_created(&mut table, topic, queue_nums, perm, topic_sys_flag)
    }

    /// A topic a request created: in the table under a new data version, persisted by the
    /// register loop.
    fn insert_created(
        &self,
        table: &mut TopicConfigSerializeWrapper,
        topic: &str,
        queue_nums: i32,
        perm: i32,
        topic_sys_flag: i32,
    ) -> TopicConfig {
        let config = TopicConfig {
            topic_name: topic.to_owned(),
            read_queue_nums: queue_nums,
            write_queue_nums: queue_nums,
            perm,
            topic_sys_flag,
            ..TopicConfig::default()
        };
        table
            .topic_config_table
            .insert(topic.to_owned(), config.clone());
        bump(&mut table.data_version);
        self.unsaved.store(true, Ordering::Release);
        config
    }

    /// Persists the topics sends created since the last persist, if any.
    pub(crate) fn persist_unsaved(&self) -> Result<(), TopicConfigError> {
        if self.unsaved.load(Ordering::Acquire) {
            self.persist()
        } else {
            Ok(())
        }
    }

    /// UPDATE_AND_CREATE_TOPIC. Persisted before it returns: an operator's SUCCESS means the
    /// topic is on disk (as RocketMQ's admin processor persists it), and the request is rare.
    pub(crate) fn update_or_create(&self, config: TopicConfig) -> Result<(), TopicConfigError> {
        {
            let mut table = lock(&self.table);
            table
                .topic_config_table
                .insert(config.topic_name.clone(), config);
            bump(&mut table.data_version);
        }
        self.persist()
    }

    /// A new data version with the same topics: the name servers take a registration only
    /// when its version is new, and the topics' permissions changed with `brokerPermission`.
    /// The register loop persists it.
    pub(crate) fn next_version(&self) {
        let mut table = lock(&self.table);
        bump(&mut table.data_version);
        self.unsaved.store(true, Ordering::Release);
    }

    /// `deleteTopicConfig`: false when there was no such topic.
    pub(crate) fn delete(&self, topic: &str) -> Result<bool, TopicConfigError> {
        {
            let mut table = lock(&self.table);
            if table.topic_config_table.remove(topic).is_none() {
                return Ok(false);
            }
            bump(&mut table.data_version);
        }
        self.persist()?;
        Ok(true)
    }

    /// A slave's sync: the master's table replaces this one when its data version differs
    /// (and takes its version), then is persisted.
    pub(crate) fn replace(
        &self,
        master: TopicConfigSerializeWrapper,
    ) -> Result<(), TopicConfigError> {
        {
            let mut table = lock(&self.table);
            if table.data_version == master.data_version {
                return Ok(());
            }
            *table = master;
        }
        self.persist()
    }

    /// Bumped by every change: the controller re-registers when it moved.
    pub(crate) fn data_version(&self) -> DataVersion {
        lock(&self.table).data_version.clone()
    }

    /// What REGISTER_BROKER sends the name server, and GET_ALL_TOPIC_CONFIG a slave.
    pub(crate) fn wrapper(&self) -> TopicConfigSerializeWrapper {
        lock(&self.table).clone()
    }

    fn persist(&self) -> Result<(), TopicConfigError> {
        let _writer = lock(&self.writer);
        let text = {
            let table = lock(&self.table);
            self.unsaved.store(false, Ordering::Release);
            serde_json::to_vec_pretty(&*table).map_err(|e| TopicConfigError::BadFile {
                path: self.path.clone(),
                reason: e.to_string(),
            })
        };
        let written = text.and_then(|text| {
            write_atomically(&self.path, &text).map_err(|source| TopicConfigError::Io {
                path: self.path.clone(),
                source,
            })
        });
        if written.is_err() {
            // Tried again at the next registration or shutdown.
            self.unsaved.store(true, Ordering::Release);
        }
        written
    }
}

pub(crate) fn bump(version: &mut DataVersion) {
    version.timestamp = now_millis();
    version.counter += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_create_topics_from_the_template_and_they_persist() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        assert!(topics.select("orders").is_none());
        let created = topics
            .create_in_send("orders", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 0)
            .unwrap();
        assert_eq!((created.write_queue_nums, created.read_queue_nums), (4, 4));
        assert_eq!(created.perm & PERM_INHERIT, 0, "the child does not inherit");
        let wide = topics
            .create_in_send("wide", AUTO_CREATE_TOPIC_KEY_TOPIC, 64, 0)
            .unwrap();
        assert_eq!(wide.write_queue_nums, 8, "at most the template's queues");
        assert!(
            topics.create_in_send("x", "orders", 4, 0).is_none(),
            "a topic without PERM_INHERIT is no template"
        );
        let unsaved = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        assert!(
            unsaved.select("orders").is_none(),
            "not persisted by the send"
        );
        topics.persist_unsaved().unwrap();
        let again = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        assert_eq!(again.select("orders"), Some(created));
        assert!(again.wrapper().data_version.counter >= 2);
    }

    fn no_auto_create() -> BrokerSettings {
        BrokerSettings {
            auto_create_topic: false.into(),
            ..BrokerSettings::default()
        }
    }

    #[test]
    fn the_cluster_and_the_broker_name_topics_exist_as_rocketmqs_do() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        let cluster = topics.select("DefaultCluster").unwrap();
        assert_eq!((cluster.read_queue_nums, cluster.perm), (16, 7));
        let broker = topics.select("broker-a").unwrap();
        assert_eq!((broker.write_queue_nums, broker.perm), (1, 7));
        let closed = BrokerSettings {
            cluster_topic_enable: false,
            broker_topic_enable: false,
            cluster_name: "has space".into(),
            ..BrokerSettings::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &closed).unwrap();
        assert_eq!(topics.select("broker-a").unwrap().perm, PERM_INHERIT);
        assert!(topics.select("has space").is_none(), "not a topic name");
    }

    #[test]
    fn without_auto_create_there_is_no_template() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &no_auto_create()).unwrap();
        assert!(topics.select(AUTO_CREATE_TOPIC_KEY_TOPIC).is_none());
        assert!(topics
            .create_in_send("orders", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 0)
            .is_none());
    }

    #[test]
    fn a_corrupt_file_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/topics.json"), b"{not json").unwrap();
        let err = TopicConfigManager::load(dir.path(), &BrokerSettings::default())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("topics.json"), "{err}");
    }
}
