//! RocketMQ's `TopicConfigManager`: the broker's topics with their queue counts and permissions,
//! persisted in `STORE/config/topics.json` and sent to the name server.
//!
//! A change is one line appended to `config/topics.journal` and synced, so creating a topic
//! costs the same with 50,000 topics as with 5 (RocketMQ rewrites the whole file each time).
//! `topics.json` is rewritten (to a temporary file, synced, renamed: a crash leaves the old
//! file or the new one) when the journal outgrows it, when a load found lines in it, when a
//! slave takes its master's table, and at shutdown, so a stopped broker's `topics.json` holds
//! every topic, in RocketMQ's format. Each line carries the table's data version; a load
//! replays the lines newer than the file's.
//!
//! A topic a send creates is persisted off the remoting loop thread, as RocketMQ persists it
//! asynchronously too: by the register loop, woken by the change, before it tells the name
//! servers (so a route they hand out is on the broker's disk), and at shutdown. The name
//! servers learn a change from that loop with the changed topics only
//! (`registerIncrementBrokerData`), and the whole table every period.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::protocol::body::{perm, DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use crate::protocol::config_file::ConfigJournal;
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
    table: Mutex<Table>,
    /// One save at a time, taken before `table`: lines reach the journal in the order of the
    /// states they hold, and the file ends with the latest table, not an older one renamed
    /// last.
    writer: Mutex<Writer>,
}

struct Table {
    topics: TopicConfigSerializeWrapper,
    /// Topics changed since the last save, and whether the version changed without them
    /// ([`TopicConfigManager::persist_unsaved`]). Taken under this lock, so a save clears
    /// only what it wrote.
    unsaved: BTreeSet<String>,
    version_unsaved: bool,
    /// Topics changed since the last registration; `None` when the next must carry the whole
    /// table (a topic deleted, the permissions changed, the table replaced).
    unregistered: Option<BTreeSet<String>>,
}

struct Writer {
    journal: ConfigJournal,
    /// Bytes of `topics.json` as last written or read.
    file_len: u64,
}

/// One line of `topics.journal`: the table's version after a change, and each topic it
/// changed as it is now (`null`: deleted).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JournalLine {
    data_version: DataVersion,
    topics: BTreeMap<String, Option<TopicConfig>>,
}

/// What the name servers have not been told ([`TopicConfigManager::take_unregistered`]).
#[derive(Debug, PartialEq)]
pub(crate) enum Unregistered {
    /// These topics changed; the rest is as last registered.
    Topics(TopicConfigSerializeWrapper),
    /// The whole table is due.
    All,
}

/// Past this many changed topics, an increment costs about what the whole table does.
const MAX_INCREMENT: usize = 1000;

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
    /// Loads `ROOT/config/topics.json` (none yet: no topics) and replays `topics.journal` on
    /// it. With `auto_create`, the `TBW102` template is there too, with `default_queue_nums`
    /// queues, as RocketMQ's broker adds it when `autoCreateTopicEnable` is on.
    pub(crate) fn load(root: &Path, settings: &BrokerSettings) -> Result<Self, TopicConfigError> {
        let path = root.join("config").join("topics.json");
        remove_stale_temporaries(&path);
        let (mut topics, file_len) = match std::fs::read(&path) {
            Ok(raw) => {
                let table = serde_json::from_slice::<TopicConfigSerializeWrapper>(&raw)
                    .map_err(|e| bad_file(&path, e.to_string()))?;
                (table, raw.len() as u64)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Default::default(),
            Err(source) => return Err(TopicConfigError::Io { path, source }),
        };
        let (journal, lines) = ConfigJournal::open(&path).map_err(|source| io(&path, source))?;
        replay(&mut topics, &lines, journal.path())?;
        add_builtin_topics(&mut topics, settings);
        let manager = Self {
            path,
            table: Mutex::new(Table {
                topics,
                unsaved: BTreeSet::new(),
                version_unsaved: false,
                unregistered: None,
            }),
            writer: Mutex::new(Writer { journal, file_len }),
        };
        if !lock(&manager.writer).journal.is_empty() {
            // Folded into the file now: the lines are read once, and a torn last line goes.
            manager.rewrite(&mut lock(&manager.writer))?;
        }
        Ok(manager)
    }

    pub(crate) fn select(&self, topic: &str) -> Option<TopicConfig> {
        lock(&self.table)
            .topics
            .topic_config_table
            .get(topic)
            .cloned()
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
        if let Some(existing) = table.topics.topic_config_table.get(topic) {
            return Some(existing.clone());
        }
        let template = table.topics.topic_config_table.get(default_topic)?;
        if template.perm & PERM_INHERIT == 0 {
            return None;
        }
        let nums = queue_nums.clamp(1, template.write_queue_nums.max(1));
        let perm = template.perm & !PERM_INHERIT;
        Some(table.insert_created(topic, nums, perm, topic_sys_flag))
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
        if let Some(existing) = table.topics.topic_config_table.get(topic) {
            return existing.clone();
        }
        table.insert_created(topic, queue_nums, perm, topic_sys_flag)
    }

    /// Persists the topics sends created since the last save, if any.
    pub(crate) fn persist_unsaved(&self) -> Result<(), TopicConfigError> {
        let mut writer = lock(&self.writer);
        let line = {
            let mut table = lock(&self.table);
            if table.unsaved.is_empty() && !table.version_unsaved {
                return Ok(());
            }
            table.take_line()
        };
        self.append(&mut writer, &line)
    }

    /// UPDATE_AND_CREATE_TOPIC. Persisted before it returns: an operator's SUCCESS means the
    /// topic is on disk (as RocketMQ's admin processor persists it). False when the topic was
    /// already exactly so: nothing changed, nothing to register (RocketMQ's idempotent
    /// answer).
    pub(crate) fn update_or_create(&self, config: TopicConfig) -> Result<bool, TopicConfigError> {
        let mut writer = lock(&self.writer);
        let line = {
            let mut table = lock(&self.table);
            let name = config.topic_name.clone();
            if table.topics.topic_config_table.get(&name) == Some(&config) {
                return Ok(false);
            }
            table.topics.topic_config_table.insert(name.clone(), config);
            table.changed(&name);
            table.take_line()
        };
        self.append(&mut writer, &line)?;
        Ok(true)
    }

    /// A new data version with the same topics: the name servers take a registration only
    /// when its version is new, and the topics' permissions changed with `brokerPermission`.
    /// The register loop persists it and registers the whole table.
    pub(crate) fn next_version(&self) {
        let mut table = lock(&self.table);
        bump(&mut table.topics.data_version);
        table.version_unsaved = true;
        table.unregistered = None;
    }

    /// `deleteTopicConfig`: false when there was no such topic.
    pub(crate) fn delete(&self, topic: &str) -> Result<bool, TopicConfigError> {
        let mut writer = lock(&self.writer);
        let line = {
            let mut table = lock(&self.table);
            if table.topics.topic_config_table.remove(topic).is_none() {
                return Ok(false);
            }
            table.changed(topic);
            // A registration never removes a topic from the name servers' routes (RocketMQ's
            // `deleteTopicWithBrokerRegistration` is off): the admin asks them to.
            table.unregistered = None;
            table.take_line()
        };
        self.append(&mut writer, &line)?;
        Ok(true)
    }

    /// A slave's sync: the master's table replaces this one when its data version differs
    /// (and takes its version), then is persisted whole.
    pub(crate) fn replace(
        &self,
        master: TopicConfigSerializeWrapper,
    ) -> Result<(), TopicConfigError> {
        let mut writer = lock(&self.writer);
        {
            let mut table = lock(&self.table);
            if table.topics.data_version == master.data_version {
                return Ok(());
            }
            table.topics = master;
            table.unregistered = None;
        }
        self.rewrite(&mut writer)
    }

    /// Bumped by every change: the controller re-registers when it moved.
    pub(crate) fn data_version(&self) -> DataVersion {
        lock(&self.table).topics.data_version.clone()
    }

    /// What REGISTER_BROKER sends the name server, and GET_ALL_TOPIC_CONFIG a slave.
    pub(crate) fn wrapper(&self) -> TopicConfigSerializeWrapper {
        lock(&self.table).topics.clone()
    }

    /// What changed since the last call, for the next registration; the next call answers
    /// from then on.
    pub(crate) fn take_unregistered(&self) -> Unregistered {
        let mut table = lock(&self.table);
        let changed = table.unregistered.replace(BTreeSet::new());
        match changed {
            Some(names) if names.len() <= MAX_INCREMENT => {
                let all = &table.topics.topic_config_table;
                Unregistered::Topics(TopicConfigSerializeWrapper {
                    topic_config_table: names
                        .into_iter()
                        .filter_map(|n| all.get(&n).map(|c| (n, c.clone())))
                        .collect(),
                    data_version: table.topics.data_version.clone(),
                })
            }
            _ => Unregistered::All,
        }
    }

    /// The next registration carries the whole table (the last one did not reach every name
    /// server).
    pub(crate) fn register_all_next(&self) {
        lock(&self.table).unregistered = None;
    }

    /// At shutdown: what is unsaved, then the journal folded into `topics.json`, so the file
    /// alone holds every topic (for RocketMQ's tools, or RocketMQ's broker on this store).
    pub(crate) fn close(&self) -> Result<(), TopicConfigError> {
        self.persist_unsaved()?;
        let mut writer = lock(&self.writer);
        if writer.journal.is_empty() {
            return Ok(());
        }
        self.rewrite(&mut writer)
    }

    /// Appends `line` to the journal, and folds the journal into the file once it outgrew it.
    fn append(&self, writer: &mut Writer, line: &JournalLine) -> Result<(), TopicConfigError> {
        let text = serde_json::to_vec(line).map_err(|e| bad_file(&self.path, e.to_string()))?;
        if let Err(source) = writer.journal.append(&text) {
            // Saved again at the next registration or shutdown.
            lock(&self.table).unsave(line);
            return Err(io(writer.journal.path(), source));
        }
        if writer.journal.outgrew(writer.file_len) {
            self.rewrite(writer)?;
        }
        Ok(())
    }

    /// Writes the whole table to `topics.json`, then empties the journal it now holds.
    fn rewrite(&self, writer: &mut Writer) -> Result<(), TopicConfigError> {
        let (text, taken) = {
            let mut table = lock(&self.table);
            let taken = table.take_line();
            let text = serde_json::to_vec_pretty(&table.topics);
            (text.map_err(|e| bad_file(&self.path, e.to_string())), taken)
        };
        let written = text.and_then(|text| {
            write_atomically(&self.path, &text).map_err(|source| io(&self.path, source))?;
            Ok(text.len() as u64)
        });
        match written {
            Ok(len) => {
                writer.file_len = len;
                let path = writer.journal.path().to_owned();
                writer.journal.clear().map_err(|source| io(&path, source))
            }
            Err(e) => {
                lock(&self.table).unsave(&taken);
                Err(e)
            }
        }
    }
}

impl Table {
    /// A topic a request created: in the table under a new data version, persisted by the
    /// register loop.
    fn insert_created(
        &mut self,
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
        self.topics
            .topic_config_table
            .insert(topic.to_owned(), config.clone());
        self.changed(topic);
        config
    }

    /// `topic` changed: a new data version, to save and to register.
    fn changed(&mut self, topic: &str) {
        bump(&mut self.topics.data_version);
        self.unsaved.insert(topic.to_owned());
        if let Some(names) = self.unregistered.as_mut() {
            names.insert(topic.to_owned());
        }
    }

    /// The journal line of what is unsaved, which it no longer is.
    fn take_line(&mut self) -> JournalLine {
        self.version_unsaved = false;
        let all = &self.topics.topic_config_table;
        JournalLine {
            data_version: self.topics.data_version.clone(),
            topics: std::mem::take(&mut self.unsaved)
                .into_iter()
                .map(|name| {
                    let config = all.get(&name).cloned();
                    (name, config)
                })
                .collect(),
        }
    }

    /// A line that did not reach the disk: its topics are unsaved again.
    fn unsave(&mut self, line: &JournalLine) {
        self.unsaved.extend(line.topics.keys().cloned());
        self.version_unsaved = true;
    }
}

/// Applies the journal's lines newer than the file's version to `topics`.
fn replay(
    topics: &mut TopicConfigSerializeWrapper,
    lines: &[Vec<u8>],
    journal: &Path,
) -> Result<(), TopicConfigError> {
    let base = topics.data_version.counter;
    for (i, raw) in lines.iter().enumerate() {
        let line: JournalLine = serde_json::from_slice(raw)
            .map_err(|e| bad_file(journal, format!("line {}: {e}", i + 1)))?;
        if line.data_version.counter <= base {
            continue; // Written into the file before a crash emptied the journal.
        }
        for (name, config) in line.topics {
            match config {
                Some(config) => topics.topic_config_table.insert(name, config),
                None => topics.topic_config_table.remove(&name),
            };
        }
        topics.data_version = line.data_version;
    }
    Ok(())
}

/// The topics every RocketMQ broker holds: the system topics, the `TBW102` template when
/// topics are auto-created, and the cluster's and the broker's own.
fn add_builtin_topics(table: &mut TopicConfigSerializeWrapper, settings: &BrokerSettings) {
    for topic in SYSTEM_TOPICS {
        insert_missing(table, topic, 1, perm::PERM_READ | perm::PERM_WRITE);
    }
    if settings.auto_create_topic.get() {
        let nums = settings.default_topic_queue_nums;
        let all = perm::PERM_READ | perm::PERM_WRITE | PERM_INHERIT;
        insert_missing(table, AUTO_CREATE_TOPIC_KEY_TOPIC, nums, all);
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
            insert_missing(table, name, nums, rw(on));
        }
    }
}

fn bad_file(path: &Path, reason: String) -> TopicConfigError {
    TopicConfigError::BadFile {
        path: path.to_owned(),
        reason,
    }
}

fn io(path: &Path, source: std::io::Error) -> TopicConfigError {
    TopicConfigError::Io {
        path: path.to_owned(),
        source,
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

    fn topic(name: &str, queues: i32) -> TopicConfig {
        TopicConfig {
            topic_name: name.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            ..TopicConfig::default()
        }
    }

    fn journal_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join("config/topics.journal")).map_or(0, |m| m.len())
    }

    #[test]
    fn a_change_is_a_journal_line_and_a_load_replays_it() {
        let dir = tempfile::tempdir().unwrap();
        let settings = BrokerSettings::default();
        let topics = TopicConfigManager::load(dir.path(), &settings).unwrap();
        let file_before = std::fs::read(dir.path().join("config/topics.json")).ok();
        assert!(topics.update_or_create(topic("a", 4)).unwrap());
        assert!(topics.update_or_create(topic("b", 2)).unwrap());
        assert!(topics.delete("a").unwrap());
        assert!(journal_len(dir.path()) > 0);
        assert_eq!(
            std::fs::read(dir.path().join("config/topics.json")).ok(),
            file_before,
            "the file is not rewritten per change"
        );
        let version = topics.data_version();
        // As a crash would leave it: no shutdown.
        let again = TopicConfigManager::load(dir.path(), &settings).unwrap();
        assert_eq!(again.select("b"), Some(topic("b", 2)));
        assert!(again.select("a").is_none(), "the deletion replayed");
        assert_eq!(again.data_version(), version);
        assert_eq!(
            journal_len(dir.path()),
            0,
            "the load folded it into the file"
        );
        let file = std::fs::read(dir.path().join("config/topics.json")).unwrap();
        let table: TopicConfigSerializeWrapper = serde_json::from_slice(&file).unwrap();
        assert_eq!(table.topic_config_table.get("b"), Some(&topic("b", 2)));
    }

    #[test]
    fn the_same_config_again_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        assert!(topics.update_or_create(topic("a", 4)).unwrap());
        let version = topics.data_version();
        assert!(!topics.update_or_create(topic("a", 4)).unwrap());
        assert_eq!(topics.data_version(), version);
        assert!(topics.update_or_create(topic("a", 8)).unwrap());
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_broken_one_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let settings = BrokerSettings::default();
        let topics = TopicConfigManager::load(dir.path(), &settings).unwrap();
        topics.update_or_create(topic("kept", 1)).unwrap();
        drop(topics);
        let journal = dir.path().join("config/topics.journal");
        let whole = std::fs::read(&journal).unwrap();
        let mut torn = whole.clone();
        torn.extend_from_slice(br#"{"dataVersion":{"counter":99"#);
        std::fs::write(&journal, &torn).unwrap();
        let again = TopicConfigManager::load(dir.path(), &settings).unwrap();
        assert_eq!(again.select("kept"), Some(topic("kept", 1)));
        drop(again);
        let mut broken = b"{not json\n".to_vec();
        broken.extend_from_slice(&whole);
        std::fs::write(&journal, &broken).unwrap();
        let err = TopicConfigManager::load(dir.path(), &settings)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("topics.journal") && err.contains("line 1"),
            "{err}"
        );
    }

    #[test]
    fn lines_the_file_already_holds_are_skipped() {
        // A crash after the file was rewritten and before the journal was emptied.
        let dir = tempfile::tempdir().unwrap();
        let settings = BrokerSettings::default();
        let topics = TopicConfigManager::load(dir.path(), &settings).unwrap();
        topics.update_or_create(topic("a", 4)).unwrap();
        let journal = std::fs::read(dir.path().join("config/topics.journal")).unwrap();
        topics.update_or_create(topic("a", 8)).unwrap();
        topics.close().unwrap();
        assert_eq!(journal_len(dir.path()), 0, "shutdown folds the journal");
        std::fs::write(dir.path().join("config/topics.journal"), journal).unwrap();
        let again = TopicConfigManager::load(dir.path(), &settings).unwrap();
        assert_eq!(
            again.select("a"),
            Some(topic("a", 8)),
            "not the older line's"
        );
    }

    #[test]
    fn the_journal_is_folded_once_it_outgrows_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        let mut largest = 0;
        for i in 0..2000 {
            topics.update_or_create(topic(&format!("t{i}"), 4)).unwrap();
            largest = largest.max(journal_len(dir.path()));
        }
        let file = std::fs::metadata(dir.path().join("config/topics.json")).unwrap();
        assert!(
            largest <= file.len().max(64 * 1024) + 1024,
            "{largest} vs {}",
            file.len()
        );
        let again = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        assert_eq!(again.select("t1999"), Some(topic("t1999", 4)));
        assert_eq!(again.select("t0"), Some(topic("t0", 4)));
    }

    #[test]
    fn registrations_carry_the_changed_topics_until_the_whole_table_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        assert_eq!(
            topics.take_unregistered(),
            Unregistered::All,
            "the first is whole"
        );
        topics.update_or_create(topic("a", 4)).unwrap();
        topics
            .create_in_send("b", AUTO_CREATE_TOPIC_KEY_TOPIC, 2, 0)
            .unwrap();
        let Unregistered::Topics(changed) = topics.take_unregistered() else {
            panic!("an increment")
        };
        let names: Vec<_> = changed.topic_config_table.keys().cloned().collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(changed.data_version, topics.data_version());
        let Unregistered::Topics(none) = topics.take_unregistered() else {
            panic!("an empty increment")
        };
        assert!(none.topic_config_table.is_empty());
        topics.delete("a").unwrap();
        assert_eq!(topics.take_unregistered(), Unregistered::All, "a deletion");
        topics.update_or_create(topic("c", 1)).unwrap();
        topics.register_all_next();
        assert_eq!(topics.take_unregistered(), Unregistered::All, "asked for");
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
