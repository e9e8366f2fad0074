//! RocketMQ's `KVConfigManager`: the name server's namespaced key/value settings (`mqadmin
//! updateKvConfig` / `deleteKvConfig`; RocketMQ 5's `deleteSubGroup` clears its entries too),
//! served by PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE and,
//! with a path, kept in RocketMQ's file shape (`{"configTable":{"ns":{"k":"v"}}}`), written
//! atomically at each change and read at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::protocol::config_file::{remove_stale_temporaries, write_atomically};
use crate::protocol::json::parse_lenient;
use crate::sync::lock;

type ConfigTable = BTreeMap<String, BTreeMap<String, String>>;

/// `KVConfigSerializeWrapper`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct KvConfigSerializeWrapper {
    config_table: ConfigTable,
}

pub(crate) struct KvConfigManager {
    /// `kvConfigPath`; `None`: kept in memory only.
    path: Option<PathBuf>,
    table: Mutex<ConfigTable>,
}

impl KvConfigManager {
    /// Loads `path` when given and present; a file that is not a KV config is refused.
    pub(crate) fn load(path: Option<&Path>) -> std::io::Result<Self> {
        let mut table = ConfigTable::new();
        if let Some(path) = path {
            remove_stale_temporaries(path);
            match std::fs::read(path) {
                Ok(raw) => {
                    let wrapper: KvConfigSerializeWrapper =
                        parse_lenient(&raw, "KVConfigSerializeWrapper").map_err(|e| {
                            let why = format!("{} is not a KV config file: {e}", path.display());
                            std::io::Error::new(std::io::ErrorKind::InvalidData, why)
                        })?;
                    table = wrapper.config_table;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Self {
            path: path.map(Path::to_path_buf),
            table: Mutex::new(table),
        })
    }

    /// `putKVConfig`.
    pub(crate) fn put(&self, namespace: &str, key: &str, value: &str) -> std::io::Result<()> {
        let mut table = lock(&self.table);
        table
            .entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), value.to_owned());
        self.persist(&table)
    }

    /// `getKVConfig`.
    pub(crate) fn get(&self, namespace: &str, key: &str) -> Option<String> {
        lock(&self.table).get(namespace)?.get(key).cloned()
    }

    /// `deleteKVConfig`: a key that is not there is no error, as in RocketMQ.
    pub(crate) fn delete(&self, namespace: &str, key: &str) -> std::io::Result<()> {
        let mut table = lock(&self.table);
        let Some(keys) = table.get_mut(namespace) else {
            return Ok(());
        };
        if keys.remove(key).is_none() {
            return Ok(());
        }
        if keys.is_empty() {
            table.remove(namespace);
        }
        self.persist(&table)
    }

    /// `getKVListByNamespace`: `None` for a namespace with no key.
    pub(crate) fn list(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        lock(&self.table).get(namespace).cloned()
    }

    /// Under the table's lock, so the file ends with the latest table.
    fn persist(&self, table: &ConfigTable) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let wrapper = KvConfigSerializeWrapper {
            config_table: table.clone(),
        };
        let text = serde_json::to_vec_pretty(&wrapper).unwrap_or_default();
        write_atomically(path, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_put_read_listed_deleted_and_kept_in_rocketmqs_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv/kvConfig.json");
        let kv = KvConfigManager::load(Some(&path)).unwrap();
        kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4").unwrap();
        kv.put("ns", "a", "1").unwrap();
        kv.put("ns", "b", "2").unwrap();
        kv.delete("ns", "a").unwrap();
        kv.delete("ns", "never").unwrap();
        assert_eq!(
            kv.get("ORDER_TOPIC_CONFIG", "T").as_deref(),
            Some("broker-a:4")
        );
        assert_eq!(kv.get("ns", "a"), None);
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(written["configTable"]["ns"], serde_json::json!({"b": "2"}));

        let again = KvConfigManager::load(Some(&path)).unwrap();
        assert_eq!(again.list("ns").unwrap().len(), 1);
        assert_eq!(again.list("nobody"), None);
        std::fs::write(&path, b"not json").unwrap();
        let err = KvConfigManager::load(Some(&path)).err().unwrap();
        assert!(err.to_string().contains("is not a KV config file"), "{err}");
        assert!(KvConfigManager::load(None)
            .unwrap()
            .get("ns", "b")
            .is_none());
    }
}
