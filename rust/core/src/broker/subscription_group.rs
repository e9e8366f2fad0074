//! RocketMQ's `SubscriptionGroupManager`: the consumer groups a broker serves, created on first
//! use when `autoCreateSubscriptionGroup` is on, persisted in
//! `STORE/config/subscriptionGroup.json` (`{"subscriptionGroupTable":{...},"dataVersion":{...}}`)
//! with its journal (a [`JournaledTable`]: a new group costs one synced line, whatever the
//! number of groups) and replaced on a slave by its master's at every sync.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub(crate) use super::journaled_table::TableError as SubscriptionGroupError;
use super::journaled_table::{Delta, JournaledTable, TableFile};
use super::BrokerSettings;
use crate::protocol::body::DataVersion;
use crate::protocol::json::parse_lenient;

/// `SubscriptionGroupConfig`, Java's defaults for whatever a file leaves out; fields of newer
/// RocketMQ versions are kept as they came, so a slave hands them on unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct SubscriptionGroupConfig {
    pub(crate) group_name: String,
    pub(crate) consume_enable: bool,
    pub(crate) consume_from_min_enable: bool,
    pub(crate) consume_broadcast_enable: bool,
    pub(crate) consume_message_orderly: bool,
    pub(crate) retry_queue_nums: i32,
    pub(crate) retry_max_times: i32,
    /// The broker a consumer that keeps up reads from (`MixAll.MASTER_ID`).
    pub(crate) broker_id: i64,
    /// The broker a consumer that lags is sent to.
    pub(crate) which_broker_when_consume_slowly: i64,
    pub(crate) notify_consumer_ids_changed_enable: bool,
    pub(crate) group_sys_flag: i32,
    #[serde(flatten)]
    pub(crate) other: serde_json::Map<String, serde_json::Value>,
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        Self {
            group_name: String::new(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            consume_message_orderly: false,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            group_sys_flag: 0,
            other: serde_json::Map::new(),
        }
    }
}

/// The file's shape and GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct SubscriptionGroupWrapper {
    pub(crate) subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
    pub(crate) data_version: DataVersion,
}

impl TableFile for SubscriptionGroupWrapper {
    type Entry = SubscriptionGroupConfig;
    const WHAT: &'static str = "subscription group";
    fn entries(&self) -> &BTreeMap<String, SubscriptionGroupConfig> {
        &self.subscription_group_table
    }
    fn entries_mut(&mut self) -> &mut BTreeMap<String, SubscriptionGroupConfig> {
        &mut self.subscription_group_table
    }
    fn version(&self) -> &DataVersion {
        &self.data_version
    }
    fn version_mut(&mut self) -> &mut DataVersion {
        &mut self.data_version
    }
}

pub(crate) struct SubscriptionGroupManager {
    /// `autoCreateSubscriptionGroup`, and `whichBrokerWhenConsumeSlowly` of the groups this
    /// broker creates.
    settings: Arc<BrokerSettings>,
    /// Lookups on the loop thread, changes from it and from admin requests, replacement from
    /// the sync thread.
    table: JournaledTable<SubscriptionGroupWrapper>,
}

impl SubscriptionGroupManager {
    pub(crate) fn load(
        root: &Path,
        settings: Arc<BrokerSettings>,
    ) -> Result<Self, SubscriptionGroupError> {
        let table = JournaledTable::load(
            root.join("config").join("subscriptionGroup.json"),
            |raw| parse_lenient(raw, "SubscriptionGroupWrapper").map_err(|e| e.to_string()),
            |_| {},
        )?;
        Ok(Self { settings, table })
    }

    /// `findSubscriptionGroupConfig`: the group's config, created (and persisted) when unknown
    /// and `autoCreateSubscriptionGroup` is on; `None` when unknown and it is off.
    pub(crate) fn find(
        &self,
        group: &str,
    ) -> Result<Option<SubscriptionGroupConfig>, SubscriptionGroupError> {
        if let Some(config) = self.get(group) {
            return Ok(Some(config));
        }
        if !self.settings.auto_create_subscription_group.get() {
            return Ok(None);
        }
        self.table.change(|state| {
            let all = &mut state.table.subscription_group_table;
            if let Some(config) = all.get(group) {
                return Some(config.clone()); // another request created it meanwhile
            }
            let config = SubscriptionGroupConfig {
                group_name: group.to_owned(),
                which_broker_when_consume_slowly: self.settings.which_broker_when_consume_slowly,
                ..SubscriptionGroupConfig::default()
            };
            all.insert(group.to_owned(), config.clone());
            state.changed(group);
            Some(config)
        })
    }

    /// The group's config, without creating it.
    pub(crate) fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        let state = self.table.state();
        state.table.subscription_group_table.get(group).cloned()
    }

    /// `containsSubscriptionGroup`: known, without creating it.
    pub(crate) fn contains(&self, group: &str) -> bool {
        let state = self.table.state();
        state.table.subscription_group_table.contains_key(group)
    }

    /// What GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers.
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&self.table.state().table).unwrap_or_default()
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: `config` replaces its group's, or creates it.
    pub(crate) fn update_or_create(
        &self,
        config: SubscriptionGroupConfig,
    ) -> Result<(), SubscriptionGroupError> {
        self.table.change(|state| {
            let name = config.group_name.clone();
            state
                .table
                .subscription_group_table
                .insert(name.clone(), config);
            state.changed(&name);
        })
    }

    /// DELETE_SUBSCRIPTIONGROUP: false when there was no such group.
    pub(crate) fn delete(&self, group: &str) -> Result<bool, SubscriptionGroupError> {
        self.table.change(|state| {
            let removed = state.table.subscription_group_table.remove(group).is_some();
            if removed {
                state.changed(group);
            }
            removed
        })
    }

    /// A slave's sync: the master's groups replace these when its data version differs
    /// (as RocketMQ's `syncSubscriptionGroupConfig`), then are persisted.
    pub(crate) fn replace(
        &self,
        wrapper: SubscriptionGroupWrapper,
    ) -> Result<(), SubscriptionGroupError> {
        if self.table.state().table.data_version == wrapper.data_version {
            return Ok(());
        }
        self.table.replace(wrapper)
    }

    pub(crate) fn data_version(&self) -> DataVersion {
        self.table.state().table.data_version.clone()
    }

    /// What changed after a slave's `version`; `None`: it takes every group.
    pub(crate) fn delta_since(
        &self,
        version: &DataVersion,
    ) -> Option<Delta<SubscriptionGroupConfig>> {
        self.table.state().delta_since(version)
    }

    /// A slave's sync from a master that sent only what changed.
    pub(crate) fn apply_delta(
        &self,
        delta: Delta<SubscriptionGroupConfig>,
    ) -> Result<(), SubscriptionGroupError> {
        self.table.change(|state| {
            state.apply(delta);
        })
    }

    /// At shutdown: the journal folded into `subscriptionGroup.json`.
    pub(crate) fn close(&self) -> Result<(), SubscriptionGroupError> {
        self.table.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_created_on_first_use_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::load(dir.path(), settings(true)).unwrap();
        let g = m.find("cg").unwrap().unwrap();
        assert!(g.consume_enable);
        assert_eq!((g.broker_id, g.which_broker_when_consume_slowly), (0, 1));
        let again = SubscriptionGroupManager::load(dir.path(), settings(false)).unwrap();
        assert!(again.contains("cg"));
        assert!(again.find("other").unwrap().is_none());
        assert!(!again.contains("other"));
    }

    fn settings(auto_create: bool) -> Arc<BrokerSettings> {
        Arc::new(BrokerSettings {
            auto_create_subscription_group: auto_create.into(),
            ..BrokerSettings::default()
        })
    }

    #[test]
    fn groups_are_updated_deleted_and_stay_so_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::load(dir.path(), settings(false)).unwrap();
        m.update_or_create(SubscriptionGroupConfig {
            group_name: "cg".into(),
            retry_max_times: 3,
            ..SubscriptionGroupConfig::default()
        })
        .unwrap();
        m.update_or_create(SubscriptionGroupConfig {
            group_name: "gone".into(),
            ..SubscriptionGroupConfig::default()
        })
        .unwrap();
        assert!(m.delete("gone").unwrap());
        assert!(!m.delete("gone").unwrap());
        let again = SubscriptionGroupManager::load(dir.path(), settings(false)).unwrap();
        assert_eq!(again.find("cg").unwrap().unwrap().retry_max_times, 3);
        assert!(!again.contains("gone"));
    }

    #[test]
    fn a_new_group_is_a_journal_line_until_the_shutdown_folds_it_in() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config/subscriptionGroup.json");
        let journal = dir.path().join("config/subscriptionGroup.journal");
        let m = SubscriptionGroupManager::load(dir.path(), settings(true)).unwrap();
        for i in 0..100 {
            m.find(&format!("g{i}")).unwrap().unwrap();
        }
        assert!(!file.exists(), "no rewrite per group");
        assert!(std::fs::metadata(&journal).unwrap().len() > 0);
        // Killed here: the next load replays the journal.
        let again = SubscriptionGroupManager::load(dir.path(), settings(false)).unwrap();
        assert!(again.contains("g0") && again.contains("g99"));
        again
            .update_or_create(SubscriptionGroupConfig {
                group_name: "g0".into(),
                retry_max_times: 2,
                ..SubscriptionGroupConfig::default()
            })
            .unwrap();
        again.close().unwrap();
        assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("\"g99\""), "the file alone holds every group");
        let last = SubscriptionGroupManager::load(dir.path(), settings(false)).unwrap();
        assert_eq!(last.get("g0").unwrap().retry_max_times, 2);
    }

    #[test]
    fn auto_create_follows_the_setting_while_the_broker_runs() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(false);
        let m = SubscriptionGroupManager::load(dir.path(), s.clone()).unwrap();
        assert!(m.find("cg").unwrap().is_none());
        s.auto_create_subscription_group.set(true);
        assert!(m.find("cg").unwrap().is_some());
    }

    #[test]
    fn a_rocketmq_5_group_keeps_the_fields_rocketha_does_not_act_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("config/subscriptionGroup.json"),
            br#"{"subscriptionGroupTable":{"cg":{"groupName":"cg","consumeEnable":false,
                 "consumeTimeoutMinute":15,"attributes":{}}},
                 "dataVersion":{"counter":2,"timestamp":5,"stateVersion":0}}"#,
        )
        .unwrap();
        let m = SubscriptionGroupManager::load(dir.path(), settings(true)).unwrap();
        assert!(!m.find("cg").unwrap().unwrap().consume_enable);
        let body: serde_json::Value = serde_json::from_slice(&m.encode()).unwrap();
        let cg = &body["subscriptionGroupTable"]["cg"];
        assert_eq!(cg["consumeTimeoutMinute"], 15);
        assert_eq!(cg["retryMaxTimes"], 16);
        assert_eq!(body["dataVersion"]["counter"], 2);
    }
}
