//! RocketMQ's `TopicConfigManager`: the broker's topics with their queue counts, permissions and
//! attributes (RocketMQ 5's `message.type`, ...), persisted in `STORE/config/topics.json` with
//! its journal (a [`JournaledTable`]: a change costs one synced line, whatever the number of
//! topics) and sent to the name server.
//!
//! A topic a send creates is persisted off the remoting loop thread, as RocketMQ persists it
//! asynchronously too: by the register loop, woken by the change, before it tells the name
//! servers (so a route they hand out is on the broker's disk), and at shutdown. The name
//! servers learn a change from that loop with the changed topics only
//! (`registerIncrementBrokerData`), and the whole table every period.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;

use super::attribute::{alter_current_attributes, AttributeChange, AttributeError};
pub(crate) use super::journaled_table::TableError as TopicConfigError;
use super::journaled_table::{Delta, JournaledTable, TableFile, Unsaved};
use super::topic_attributes::TOPIC_ATTRIBUTES;
use super::BrokerSettings;
use crate::protocol::body::{perm, DataVersion, TopicConfig, TopicConfigSerializeWrapper};
pub(crate) use crate::protocol::config_file::{remove_stale_temporaries, write_atomically};
pub(crate) use crate::protocol::AUTO_CREATE_TOPIC_KEY_TOPIC;
use crate::sync::lock;

/// `TopicValidator.TOPIC_MAX_LENGTH`.
const TOPIC_MAX_LENGTH: usize = 127;

/// System topics every RocketMQ broker holds (`TopicValidator`), one queue each. Besides
/// matching Java's table, they keep a broker's first registration from carrying a single
/// topic, which the name server reads as an incremental update of an unknown broker and
/// refuses.
const SYSTEM_TOPICS: [&str; 2] = ["SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"];
/// `PermName.PERM_INHERIT`: topics created from this one inherit its permission.
pub(crate) const PERM_INHERIT: i32 = 1;
/// Past this many changed topics, an increment costs about what the whole table does.
const MAX_INCREMENT: usize = 1000;

impl TableFile for TopicConfigSerializeWrapper {
    type Entry = TopicConfig;
    const WHAT: &'static str = "topic config";
    fn entries(&self) -> &BTreeMap<String, TopicConfig> {
        &self.topic_config_table
    }
    fn entries_mut(&mut self) -> &mut BTreeMap<String, TopicConfig> {
        &mut self.topic_config_table
    }
    fn version(&self) -> &DataVersion {
        &self.data_version
    }
    fn version_mut(&mut self) -> &mut DataVersion {
        &mut self.data_version
    }
}

pub(crate) struct TopicConfigManager {
    table: JournaledTable<TopicConfigSerializeWrapper>,
    /// Topics changed since the last registration; `None` when the next must carry the whole
    /// table (a topic deleted, the permissions changed, the table replaced). Locked after
    /// the table.
    unregistered: Mutex<Option<BTreeSet<String>>>,
}

/// What the name servers have not been told ([`TopicConfigManager::take_unregistered`]).
#[derive(Debug, PartialEq)]
pub(crate) enum Unregistered {
    /// These topics changed; the rest is as last registered.
    Topics(TopicConfigSerializeWrapper),
    /// The whole table is due.
    All,
}

/// Why UPDATE_AND_CREATE_TOPIC changed nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpdateTopicError {
    #[error(transparent)]
    Attribute(#[from] AttributeError),
    #[error(transparent)]
    Table(#[from] TopicConfigError),
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
    /// Loads `ROOT/config/topics.json` (none yet: no topics) and replays `topics.journal` on
    /// it. With `auto_create`, the `TBW102` template is there too, with `default_queue_nums`
    /// queues, as RocketMQ's broker adds it when `autoCreateTopicEnable` is on.
    pub(crate) fn load(root: &Path, settings: &BrokerSettings) -> Result<Self, TopicConfigError> {
        let table = JournaledTable::load(
            root.join("config").join("topics.json"),
            |raw| serde_json::from_slice(raw).map_err(|e| e.to_string()),
            |table| add_builtin_topics(table, settings),
        )?;
        Ok(Self {
            table,
            unregistered: Mutex::new(None),
        })
    }

    pub(crate) fn select(&self, topic: &str) -> Option<TopicConfig> {
        self.table
            .state()
            .table
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
        let mut state = self.table.state();
        let all = &state.table.topic_config_table;
        if let Some(existing) = all.get(topic) {
            return Some(existing.clone());
        }
        let template = all.get(default_topic)?;
        if template.perm & PERM_INHERIT == 0 {
            return None;
        }
        let nums = queue_nums.clamp(1, template.write_queue_nums.max(1));
        let perm = template.perm & !PERM_INHERIT;
        Some(self.insert_created(&mut state, topic, nums, perm, topic_sys_flag))
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
        let mut state = self.table.state();
        if let Some(existing) = state.table.topic_config_table.get(topic) {
            return existing.clone();
        }
        self.insert_created(&mut state, topic, queue_nums, perm, topic_sys_flag)
    }

    /// Persists the topics sends created since the last save, if any.
    pub(crate) fn persist_unsaved(&self) -> Result<(), TopicConfigError> {
        self.table.save_unsaved()
    }

    /// UPDATE_AND_CREATE_TOPIC (`updateTopicConfig`): `config` with its attributes as
    /// `changes` make them of the topic's (`alterCurrentAttributes`; a new topic takes only
    /// `+key=value`). Persisted before it returns: an operator's SUCCESS means the topic is on
    /// disk (as RocketMQ's admin processor persists it). False when the topic was already
    /// exactly so: nothing changed, nothing to register (RocketMQ's idempotent answer).
    pub(crate) fn update_or_create(
        &self,
        mut config: TopicConfig,
        changes: &[AttributeChange],
    ) -> Result<bool, UpdateTopicError> {
        let changed: Result<bool, AttributeError> = self.table.change(|state| {
            let name = config.topic_name.clone();
            let current = state.table.topic_config_table.get(&name);
            let held = current.map(|c| &c.attributes);
            config.attributes = alter_current_attributes(
                held.is_none(),
                TOPIC_ATTRIBUTES,
                held.unwrap_or(&BTreeMap::new()),
                changes,
            )?;
            if current == Some(&config) {
                return Ok(false);
            }
            state.table.topic_config_table.insert(name.clone(), config);
            self.changed(state, &name);
            Ok(true)
        })?;
        Ok(changed?)
    }

    /// A new data version with the same topics: the name servers take a registration only
    /// when its version is new, and the topics' permissions changed with `brokerPermission`.
    /// The register loop persists it and registers the whole table.
    pub(crate) fn next_version(&self) {
        self.table.state().bump_version();
        self.register_all_next();
    }

    /// `deleteTopicConfig`: false when there was no such topic.
    pub(crate) fn delete(&self, topic: &str) -> Result<bool, TopicConfigError> {
        self.table.change(|state| {
            if state.table.topic_config_table.remove(topic).is_none() {
                return false;
            }
            state.changed(topic);
            // A registration never removes a topic from the name servers' routes (RocketMQ's
            // `deleteTopicWithBrokerRegistration` is off): the admin asks them to.
            self.register_all_next();
            true
        })
    }

    /// A slave's sync: the master's table replaces this one when its data version differs
    /// (and takes its version), then is persisted whole.
    pub(crate) fn replace(
        &self,
        master: TopicConfigSerializeWrapper,
    ) -> Result<(), TopicConfigError> {
        if self.table.state().table.data_version == master.data_version {
            return Ok(());
        }
        self.register_all_next();
        self.table.replace(master)
    }

    /// What changed after a slave's `version`, for its sync; `None`: it takes the whole table.
    pub(crate) fn delta_since(&self, version: &DataVersion) -> Option<Delta<TopicConfig>> {
        self.table.state().delta_since(version)
    }

    /// A slave's sync from a master that sent only what changed: applied under the master's
    /// version, saved as one journal line, and registered next (whole if a topic went).
    pub(crate) fn apply_delta(&self, delta: Delta<TopicConfig>) -> Result<(), TopicConfigError> {
        let removed = delta.changes.values().any(Option::is_none);
        self.table.change(|state| {
            let names = state.apply(delta);
            if removed {
                self.register_all_next();
            } else if let Some(unregistered) = lock(&self.unregistered).as_mut() {
                unregistered.extend(names);
            }
        })
    }

    /// Bumped by every change: the controller re-registers when it moved.
    pub(crate) fn data_version(&self) -> DataVersion {
        self.table.state().table.data_version.clone()
    }

    /// What REGISTER_BROKER sends the name server, and GET_ALL_TOPIC_CONFIG a slave.
    pub(crate) fn wrapper(&self) -> TopicConfigSerializeWrapper {
        self.table.state().table.clone()
    }

    /// What changed since the last call, for the next registration; the next call answers
    /// from then on.
    pub(crate) fn take_unregistered(&self) -> Unregistered {
        let state = self.table.state();
        let changed = lock(&self.unregistered).replace(BTreeSet::new());
        match changed {
            Some(names) if names.len() <= MAX_INCREMENT => {
                let all = &state.table.topic_config_table;
                Unregistered::Topics(TopicConfigSerializeWrapper {
                    topic_config_table: names
                        .into_iter()
                        .filter_map(|n| all.get(&n).map(|c| (n, c.clone())))
                        .collect(),
                    data_version: state.table.data_version.clone(),
                })
            }
            _ => Unregistered::All,
        }
    }

    /// The next registration carries the whole table (the last one did not reach every name
    /// server, or the table changed in a way an increment cannot say).
    pub(crate) fn register_all_next(&self) {
        *lock(&self.unregistered) = None;
    }

    /// The whole table is being registered: changes from now on are the next increment's.
    /// Called before the table is read, so a change in between is in both.
    pub(crate) fn registering_whole(&self) {
        *lock(&self.unregistered) = Some(BTreeSet::new());
    }

    /// At shutdown: what is unsaved, then the journal folded into `topics.json`.
    pub(crate) fn close(&self) -> Result<(), TopicConfigError> {
        self.table.close()
    }

    /// A topic a request created: in the table under a new data version, persisted by the
    /// register loop.
    fn insert_created(
        &self,
        state: &mut Unsaved<TopicConfigSerializeWrapper>,
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
        state
            .table
            .topic_config_table
            .insert(topic.to_owned(), config.clone());
        self.changed(state, topic);
        config
    }

    /// `topic` changed: a new data version, to save and to register.
    fn changed(&self, state: &mut Unsaved<TopicConfigSerializeWrapper>, topic: &str) {
        state.changed(topic);
        if let Some(names) = lock(&self.unregistered).as_mut() {
            names.insert(topic.to_owned());
        }
    }
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
        assert!(topics.update_or_create(topic("a", 4), &[]).unwrap());
        assert!(topics.update_or_create(topic("b", 2), &[]).unwrap());
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
        assert!(topics.update_or_create(topic("a", 4), &[]).unwrap());
        let version = topics.data_version();
        assert!(!topics.update_or_create(topic("a", 4), &[]).unwrap());
        assert_eq!(topics.data_version(), version);
        assert!(topics.update_or_create(topic("a", 8), &[]).unwrap());
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_broken_one_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let settings = BrokerSettings::default();
        let topics = TopicConfigManager::load(dir.path(), &settings).unwrap();
        topics.update_or_create(topic("kept", 1), &[]).unwrap();
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
        topics.update_or_create(topic("a", 4), &[]).unwrap();
        let journal = std::fs::read(dir.path().join("config/topics.journal")).unwrap();
        topics.update_or_create(topic("a", 8), &[]).unwrap();
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
            topics
                .update_or_create(topic(&format!("t{i}"), 4), &[])
                .unwrap();
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
        topics.update_or_create(topic("a", 4), &[]).unwrap();
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
        topics.update_or_create(topic("c", 1), &[]).unwrap();
        topics.register_all_next();
        assert_eq!(topics.take_unregistered(), Unregistered::All, "asked for");
    }

    #[test]
    fn a_slave_takes_only_what_changed_since_its_version() {
        let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let settings = BrokerSettings::default();
        let master = TopicConfigManager::load(m.path(), &settings).unwrap();
        let slave = TopicConfigManager::load(s.path(), &settings).unwrap();
        master.update_or_create(topic("kept", 4), &[]).unwrap();
        slave.replace(master.wrapper()).unwrap();
        let unchanged = master.delta_since(&slave.data_version()).unwrap();
        assert!(unchanged.changes.is_empty(), "nothing changed since");

        master.update_or_create(topic("gone", 1), &[]).unwrap();
        master.update_or_create(topic("new", 2), &[]).unwrap();
        master.delete("gone").unwrap();
        let delta = master.delta_since(&slave.data_version()).unwrap();
        let names: Vec<_> = delta.changes.keys().map(String::as_str).collect();
        assert_eq!(names, ["gone", "new"], "only the changed topics");
        assert_eq!(delta.changes["gone"], None, "a deletion is a null");
        slave.apply_delta(delta).unwrap();
        assert_eq!(
            slave.wrapper(),
            master.wrapper(),
            "the same table, the same version"
        );
        assert!(journal_len(s.path()) > 0, "one journal line, not a rewrite");
        assert_eq!(
            TopicConfigManager::load(s.path(), &settings)
                .unwrap()
                .wrapper(),
            master.wrapper(),
            "the slave's journal replays it"
        );

        let foreign = DataVersion {
            counter: 1,
            ..DataVersion::default()
        };
        assert!(
            master.delta_since(&foreign).is_none(),
            "not a version it made"
        );
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

    /// `topics.json` as RocketMQ 5.4.0's broker writes it (`TopicConfigSerializeWrapper
    /// .toJson(true)`, printed by its own classes), topics with attributes among them.
    const ROCKETMQ_TOPICS_JSON: &str = r#"{
	"dataVersion":{
		"counter":5,
		"stateVersion":0,
		"timestamp":1700000000000
	},
	"topicConfigTable":{
		"Plain":{
			"attributes":{
				
			},
			"order":false,
			"perm":6,
			"readQueueNums":2,
			"topicFilterType":"SINGLE_TAG",
			"topicName":"Plain",
			"topicSysFlag":0,
			"writeQueueNums":2
		},
		"DelayTopic":{
			"attributes":{
				"message.type":"DELAY"
			},
			"order":false,
			"perm":6,
			"readQueueNums":8,
			"topicFilterType":"SINGLE_TAG",
			"topicName":"DelayTopic",
			"topicSysFlag":0,
			"writeQueueNums":8
		},
		"FifoTopic":{
			"attributes":{
				"message.type":"FIFO",
				"queue.type":"SimpleCQ",
				"reserve.time":"72"
			},
			"order":true,
			"perm":6,
			"readQueueNums":4,
			"topicFilterType":"SINGLE_TAG",
			"topicName":"FifoTopic",
			"topicSysFlag":0,
			"writeQueueNums":4
		}
	}
}"#;

    fn changes(text: &str) -> Vec<AttributeChange> {
        crate::broker::attribute::parse(text).unwrap()
    }

    fn attributes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_rocketmq_topics_json_with_attributes_loads_and_is_written_back_alike() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        let file = dir.path().join("config/topics.json");
        std::fs::write(&file, ROCKETMQ_TOPICS_JSON).unwrap();
        let settings = BrokerSettings::default();
        let topics = TopicConfigManager::load(dir.path(), &settings).unwrap();
        let delay = topics.select("DelayTopic").unwrap();
        assert_eq!(delay.attributes, attributes(&[("message.type", "DELAY")]));
        let fifo = topics.select("FifoTopic").unwrap();
        assert!(fifo.order);
        assert_eq!(
            fifo.attributes,
            attributes(&[
                ("message.type", "FIFO"),
                ("queue.type", "SimpleCQ"),
                ("reserve.time", "72")
            ]),
            "kept whole, reserve.time too, though rocketha would not set it"
        );
        assert!(topics.select("Plain").unwrap().attributes.is_empty());
        assert_eq!(topics.data_version().counter, 5);

        assert!(topics
            .update_or_create(delay.clone(), &changes("+message.type=NORMAL"))
            .unwrap());
        topics.close().unwrap();
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(
            written["topicConfigTable"]["DelayTopic"]["attributes"],
            serde_json::json!({"message.type": "NORMAL"}),
            "RocketMQ's field and shape"
        );
        let again = TopicConfigManager::load(dir.path(), &settings).unwrap();
        assert_eq!(
            again.select("DelayTopic").unwrap().attributes,
            attributes(&[("message.type", "NORMAL")])
        );
        assert_eq!(again.select("FifoTopic"), Some(fifo));
    }

    #[test]
    fn attributes_change_as_rocketmq_alters_them() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicConfigManager::load(dir.path(), &BrokerSettings::default()).unwrap();
        let set = |text: &str| topics.update_or_create(topic("t", 4), &changes(text));
        assert!(set("+message.type=FIFO,+queue.type=SimpleCQ").unwrap());
        let held = || topics.select("t").unwrap().attributes;
        assert_eq!(
            held(),
            attributes(&[("message.type", "FIFO"), ("queue.type", "SimpleCQ")])
        );
        assert!(
            !set("").unwrap(),
            "no attributes asked: they stay, nothing changed"
        );
        assert!(
            !set("+message.type=FIFO").unwrap(),
            "the same value: idempotent"
        );
        let version = topics.data_version();
        for (text, why) in [
            (
                "+queue.type=BatchCQ",
                "attempt to update an unchangeable attribute. key: queue.type",
            ),
            (
                "-queue.type",
                "attempt to update an unchangeable attribute. key: queue.type",
            ),
            (
                "+cleanup.policy=DELETE",
                "attempt to update an unchangeable attribute. key: cleanup.policy",
            ),
            (
                "-reserve.time",
                "attempt to delete a nonexistent key: reserve.time",
            ),
            (
                "+message.type=DELAY,+colour=red",
                "unsupported key: colour (supported: cleanup.policy, message.type, \
                 queue.type, reserve.time)",
            ),
            (
                "+message.type=LATER",
                "attribute message.type=LATER: value is not in set: [UNSPECIFIED, NORMAL, \
                 FIFO, DELAY, TRANSACTION, MIXED]",
            ),
        ] {
            assert_eq!(set(text).unwrap_err().to_string(), why, "{text}");
        }
        assert_eq!(topics.data_version(), version, "a refusal changes nothing");
        assert_eq!(held()["message.type"], "FIFO");
        assert!(set("-message.type").unwrap());
        assert_eq!(held(), attributes(&[("queue.type", "SimpleCQ")]));

        let new = topics.update_or_create(topic("new", 1), &changes("-message.type"));
        assert_eq!(
            new.unwrap_err().to_string(),
            "only add attribute is supported while creating topic. key: message.type"
        );
        assert!(topics.select("new").is_none());
    }

    #[test]
    fn a_slave_takes_the_attributes_with_its_masters_topics() {
        let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let settings = BrokerSettings::default();
        let master = TopicConfigManager::load(m.path(), &settings).unwrap();
        let slave = TopicConfigManager::load(s.path(), &settings).unwrap();
        master
            .update_or_create(topic("later", 2), &changes("+message.type=DELAY"))
            .unwrap();
        slave.replace(master.wrapper()).unwrap();
        assert_eq!(slave.select("later"), master.select("later"));
        master
            .update_or_create(topic("later", 2), &changes("+message.type=MIXED"))
            .unwrap();
        slave
            .apply_delta(master.delta_since(&slave.data_version()).unwrap())
            .unwrap();
        assert_eq!(
            slave.select("later").unwrap().attributes,
            attributes(&[("message.type", "MIXED")])
        );
    }
}
