//! RocketMQ's `BrokerMetadata` and `TempBrokerMetadata`: the broker id the controller gave
//! this broker, kept in `storePathBrokerIdentity` (`cluster#name#id`), and the id it is
//! claiming, in the same path with `-temp` (`cluster#name#id#checkCode`). A broker killed
//! between the claim and its confirmation claims the same id again with the same check
//! code, so the controller never gives one broker two ids.

use std::path::{Path, PathBuf};

use crate::protocol::config_file::write_atomically;

/// The content of either file; `check_code` only in the temporary one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMetadata {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub check_code: Option<String>,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum MetadataError {
    #[error("broker identity file {path}: {why}")]
    Damaged { path: PathBuf, why: String },
    #[error("broker identity file {path}: {why}")]
    Io { path: PathBuf, why: String },
    /// The store belongs to another group: its id means nothing to this one's controller.
    #[error("broker identity file {path} is of {found}, but broker.conf says {configured}: this store belongs to another broker group (move it away, or correct brokerClusterName / brokerName)")]
    OtherGroup {
        path: PathBuf,
        found: String,
        configured: String,
    },
}

/// The temporary file beside `path`.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-temp");
    PathBuf::from(name)
}

impl BrokerMetadata {
    fn encode(&self) -> String {
        let base = format!(
            "{}#{}#{}",
            self.cluster_name, self.broker_name, self.broker_id
        );
        match &self.check_code {
            Some(code) => format!("{base}#{code}"),
            None => base,
        }
    }

    /// Reads `path`; None when it does not exist (or is empty, as RocketMQ's clear leaves it).
    pub fn read(path: &Path, temporary: bool) -> Result<Option<Self>, MetadataError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) if text.trim().is_empty() => return Ok(None),
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(MetadataError::Io {
                    path: path.to_path_buf(),
                    why: e.to_string(),
                })
            }
        };
        let fields: Vec<&str> = text.trim_end().split('#').collect();
        let expected = if temporary { 4 } else { 3 };
        let damaged = |why: String| MetadataError::Damaged {
            path: path.to_path_buf(),
            why,
        };
        if fields.len() != expected || fields.iter().any(|f| f.is_empty()) {
            let shape = if temporary {
                "cluster#name#id#checkCode"
            } else {
                "cluster#name#id"
            };
            return Err(damaged(format!("{text:?} is not {shape}")));
        }
        let broker_id = fields[2]
            .parse()
            .map_err(|_| damaged(format!("broker id {:?} is not a number", fields[2])))?;
        Ok(Some(Self {
            cluster_name: fields[0].to_owned(),
            broker_name: fields[1].to_owned(),
            broker_id,
            check_code: fields.get(3).map(|c| (*c).to_owned()),
        }))
    }

    pub fn write(&self, path: &Path) -> Result<(), MetadataError> {
        write_atomically(path, self.encode().as_bytes()).map_err(|e| MetadataError::Io {
            path: path.to_path_buf(),
            why: e.to_string(),
        })
    }

    /// Refuses metadata of another group than the configured one.
    pub fn check_group(
        &self,
        path: &Path,
        cluster_name: &str,
        broker_name: &str,
    ) -> Result<(), MetadataError> {
        if self.cluster_name == cluster_name && self.broker_name == broker_name {
            return Ok(());
        }
        Err(MetadataError::OtherGroup {
            path: path.to_path_buf(),
            found: format!(
                "brokerClusterName={} brokerName={}",
                self.cluster_name, self.broker_name
            ),
            configured: format!("brokerClusterName={cluster_name} brokerName={broker_name}"),
        })
    }
}

/// Removes `path`; a file that is already gone is fine.
pub fn remove(path: &Path) -> Result<(), MetadataError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(MetadataError::Io {
            path: path.to_path_buf(),
            why: e.to_string(),
        }),
    }
}
