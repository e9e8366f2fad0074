//! RocketMQ's `SubscriptionGroupManager`: the consumer groups a broker serves, created on first
//! use when `autoCreateSubscriptionGroup` is on, persisted in
//! `STORE/config/subscriptionGroup.json` (`{"subscriptionGroupTable":{...},"dataVersion":{...}}`)
//! and replaced on a slave by its master's at every sync.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::topic_config::{bump, remove_stale_temporaries, write_atomically};
use super::BrokerSettings;
use crate::protocol::body::DataVersion;
use crate::protocol::json::parse_lenient;
use crate::sync::lock;

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

#[derive(Debug, thiserror::Error)]
pub(crate) enum SubscriptionGroupError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a subscription group file: {reason}")]
    BadFile { path: PathBuf, reason: String },
}

pub(crate) struct SubscriptionGroupManager {
    path: PathBuf,
    /// `autoCreateSubscriptionGroup`, and `whichBrokerWhenConsumeSlowly` of the groups this
    /// broker creates.
    settings: Arc<BrokerSettings>,
    /// Lookups on the loop thread, replacement from the sync thread.
    table: Mutex<SubscriptionGroupWrapper>,
    /// Held from snapshot to rename: the sync thread and the loop thread persist the file at
    /// once, and the later snapshot must be the one left on disk.
    persisting: Mutex<()>,
}

impl SubscriptionGroupManager {
    pub(crate) fn load(
        root: &Path,
        settings: Arc<BrokerSettings>,
    ) -> Result<Self, SubscriptionGroupError> {
        let path = root.join("config").join("subscriptionGroup.json");
        remove_stale_temporaries(&path);
        let table = match std::fs::read(&path) {
            Ok(raw) => parse_lenient(&raw, "SubscriptionGroupWrapper").map_err(|e| {
                SubscriptionGroupError::BadFile {
                    path: path.clone(),
                    reason: e.to_string(),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                SubscriptionGroupWrapper::default()
            }
            Err(source) => return Err(SubscriptionGroupError::Io { path, source }),
        };
        Ok(Self {
            path,
            settings,
            table: Mutex::new(table),
            persisting: Mutex::new(()),
        })
    }

    /// `findSubscriptionGroupConfig`: the group's config, created (and persisted) when unknown
    /// and `autoCreateSubscriptionGroup` is on; `None` when unknown and it is off.
    pub(crate) fn find(
        &self,
        group: &str,
    ) -> Result<Option<SubscriptionGroupConfig>, SubscriptionGroupError> {
        let created = {
            let mut table = lock(&self.table);
            if let Some(config) = table.subscription_group_table.get(group) {
                return Ok(Some(config.clone()));
            }
            if !self.settings.auto_create_subscription_group.get() {
                return Ok(None);
            }
            let config = SubscriptionGroupConfig {
                group_name: group.to_owned(),
                which_broker_when_consume_slowly: self.settings.which_broker_when_consume_slowly,
                ..SubscriptionGroupConfig::default()
            };
            table
                .subscription_group_table
                .insert(group.to_owned(), config.clone());
            bump(&mut table.data_version);
            config
        };
        self.persist()?;
        Ok(Some(created))
    }

    /// The group's config, without creating it.
    pub(crate) fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        lock(&self.table)
            .subscription_group_table
            .get(group)
            .cloned()
    }

    /// `containsSubscriptionGroup`: known, without creating it.
    pub(crate) fn contains(&self, group: &str) -> bool {
        lock(&self.table)
            .subscription_group_table
            .contains_key(group)
    }

    /// What GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers.
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&*lock(&self.table)).unwrap_or_default()
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: `config` replaces its group's, or creates it.
    pub(crate) fn update_or_create(
        &self,
        config: SubscriptionGroupConfig,
    ) -> Result<(), SubscriptionGroupError> {
        {
            let mut table = lock(&self.table);
            table
                .subscription_group_table
                .insert(config.group_name.clone(), config);
            bump(&mut table.data_version);
        }
        self.persist()
    }

    /// DELETE_SUBSCRIPTIONGROUP: false when there was no such group.
    pub(crate) fn delete(&self, group: &str) -> Result<bool, SubscriptionGroupError> {
        {
            let mut table = lock(&self.table);
            if table.subscription_group_table.remove(group).is_none() {
                return Ok(false);
            }
            bump(&mut table.data_version);
        }
        self.persist()?;
        Ok(true)
    }

    /// A slave's sync: the master's groups replace these, then are persisted.
    pub(crate) fn replace(
        &self,
        wrapper: SubscriptionGroupWrapper,
    ) -> Result<(), SubscriptionGroupError> {
        *lock(&self.table) = wrapper;
        self.persist()
    }

    fn persist(&self) -> Result<(), SubscriptionGroupError> {
        let _persisting = lock(&self.persisting);
        let text = serde_json::to_vec_pretty(&*lock(&self.table)).unwrap_or_default();
        write_atomically(&self.path, &text).map_err(|source| SubscriptionGroupError::Io {
            path: self.path.clone(),
            source,
        })
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
