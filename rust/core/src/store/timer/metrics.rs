//! RocketMQ's `TimerMetrics`: `ROOT/config/timermetrics`, the timer messages waiting per real
//! topic (`{"dataVersion":{...},"timingCount":{"topic":{"count":n,"timeStamp":ms}}}`), kept
//! by the enqueue (+1), the dequeue (-1) and delete marks (-1); GET_TIMER_METRICS answers it
//! and a slave takes its master's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::CommitLogError;
use crate::protocol::body::DataVersion;
use crate::protocol::config_file::{remove_stale_temporaries, write_atomically};
use crate::protocol::json::parse_lenient;
use crate::protocol::now_millis;

/// `TimerMetrics.Metric`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Metric {
    pub(crate) count: i64,
    pub(crate) time_stamp: i64,
}

/// `TimerMetricsSerializeWrapper`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct TimerMetricsWrapper {
    pub(crate) data_version: DataVersion,
    pub(crate) timing_count: BTreeMap<String, Metric>,
}

pub(crate) struct TimerMetrics {
    path: PathBuf,
    pub(crate) value: TimerMetricsWrapper,
    dirty: bool,
}

impl TimerMetrics {
    /// Loads `ROOT/config/timermetrics` (none yet: no topic counted); a file that is not one
    /// fails the open, naming it.
    pub(crate) fn load(root: &Path) -> Result<Self, CommitLogError> {
        let path = root.join("config").join("timermetrics");
        remove_stale_temporaries(&path);
        let value = match std::fs::read(&path) {
            Ok(raw) => decode(&raw).map_err(|reason| CommitLogError::BadConfigFile {
                path: path.clone(),
                reason,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TimerMetricsWrapper::default(),
            Err(e) => return Err(CommitLogError::io(&path, e)),
        };
        Ok(Self {
            path,
            value,
            dirty: false,
        })
    }

    /// `addAndGet`: `delta` more timer messages wait for `topic`.
    pub(crate) fn add(&mut self, topic: &str, delta: i64) {
        let now = now_millis();
        let metric = match self.value.timing_count.get_mut(topic) {
            Some(m) => m,
            None => self.value.timing_count.entry(topic.to_owned()).or_default(),
        };
        metric.count += delta;
        metric.time_stamp = now;
        self.value.data_version.bump();
        self.dirty = true;
    }

    /// The waiting timer messages of every topic.
    pub(crate) fn total(&self) -> i64 {
        self.value
            .timing_count
            .values()
            .map(|m| m.count.max(0))
            .sum()
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&self.value).unwrap_or_default()
    }

    /// A slave's sync: its master's metrics (a GET_TIMER_METRICS body) replace these.
    pub(crate) fn replace(&mut self, body: &[u8]) -> Result<(), String> {
        let value = decode(body)?;
        if value.data_version != self.value.data_version {
            self.value = value;
            self.dirty = true;
        }
        Ok(())
    }

    /// Writes the file when something changed since the last write.
    pub(crate) fn persist(&mut self) -> std::io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let text = serde_json::to_vec_pretty(&self.value).unwrap_or_default();
        write_atomically(&self.path, &text)?;
        self.dirty = false;
        Ok(())
    }
}

fn decode(raw: &[u8]) -> Result<TimerMetricsWrapper, String> {
    parse_lenient::<TimerMetricsWrapper>(raw, "TimerMetricsSerializeWrapper")
        .map_err(|e| e.to_string())
}
