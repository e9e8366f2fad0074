//! A broker's table that grows by the thousand (the topics, the subscription groups): RocketMQ's
//! JSON file (`config/topics.json`) plus a [`ConfigJournal`] beside it (`topics.journal`).
//!
//! A change is one line appended and synced, so it costs the same with 50,000 entries as with
//! 5 (RocketMQ rewrites the whole file each time). The file is rewritten (to a temporary file,
//! synced, renamed: a crash leaves the old file or the new one) when the journal outgrows it,
//! when a load found lines in it, when a slave takes its master's table, and at shutdown, so a
//! stopped broker's file holds the whole table, in RocketMQ's format. Each line carries the
//! table's data version after its change; a load replays the lines newer than the file's.
//!
//! The table also remembers its latest changes by version ([`History`]), so a slave that holds
//! one of those versions takes a [`Delta`] of what changed since instead of the whole table.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::protocol::body::DataVersion;
use crate::protocol::config_file::{remove_stale_temporaries, write_atomically, ConfigJournal};
use crate::sync::lock;

/// A table file's shape: named entries and a data version.
pub(crate) trait TableFile: Serialize + DeserializeOwned + Default + Send {
    type Entry: Serialize + DeserializeOwned + Clone + Send;
    /// What the file holds, for errors: "topic config", "subscription group".
    const WHAT: &'static str;
    fn entries(&self) -> &BTreeMap<String, Self::Entry>;
    fn entries_mut(&mut self) -> &mut BTreeMap<String, Self::Entry>;
    fn version(&self) -> &DataVersion;
    fn version_mut(&mut self) -> &mut DataVersion;
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a {what} file: {reason}")]
    BadFile {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
}

/// Changes a [`History`] keeps: a slave further behind takes the whole table.
const HISTORY: usize = 10_000;

/// The latest changes, each with the data version it made, oldest first.
struct History {
    /// The version before the oldest change kept.
    base: DataVersion,
    changes: VecDeque<(DataVersion, Option<String>)>,
}

impl History {
    fn starting_at(base: DataVersion) -> Self {
        Self {
            base,
            changes: VecDeque::new(),
        }
    }

    fn push(&mut self, version: &DataVersion, name: Option<&str>) {
        if self.changes.len() == HISTORY {
            if let Some((oldest, _)) = self.changes.pop_front() {
                self.base = oldest;
            }
        }
        self.changes
            .push_back((version.clone(), name.map(str::to_owned)));
    }

    /// The names changed after `version`; `None` when it is not one this history holds.
    /// Counter 0 is no change's version but every fresh table's, which a slave's and its
    /// master's share with different entries.
    fn names_since(&self, version: &DataVersion) -> Option<BTreeSet<String>> {
        if version.counter == 0 {
            return None;
        }
        let after = if *version == self.base {
            0
        } else {
            1 + self.changes.iter().position(|(v, _)| v == version)?
        };
        Some(
            self.changes
                .iter()
                .skip(after)
                .filter_map(|(_, name)| name.clone())
                .collect(),
        )
    }
}

/// The table and what of it is not on disk yet.
pub(crate) struct Unsaved<T> {
    pub(crate) table: T,
    names: BTreeSet<String>,
    version: bool,
    history: History,
}

impl<T: TableFile> Unsaved<T> {
    fn new(table: T) -> Self {
        let history = History::starting_at(table.version().clone());
        Self {
            table,
            names: BTreeSet::new(),
            version: false,
            history,
        }
    }

    /// `name` changed (set or removed by the caller): a new data version, to save.
    pub(crate) fn changed(&mut self, name: &str) {
        self.table.version_mut().bump();
        self.names.insert(name.to_owned());
        self.history.push(self.table.version(), Some(name));
    }

    /// A new data version with the same entries, to save.
    pub(crate) fn bump_version(&mut self) {
        self.table.version_mut().bump();
        self.version = true;
        self.history.push(self.table.version(), None);
    }

    /// What changed after `version`, each entry as it is now, under the current version;
    /// `None` when `version` is older than the history or not this table's.
    pub(crate) fn delta_since(&self, version: &DataVersion) -> Option<Delta<T::Entry>> {
        let names = self.history.names_since(version)?;
        Some(self.line_of(names))
    }

    /// A master's delta: its entries set or removed here and its version taken, to save.
    /// The names it changed.
    pub(crate) fn apply(&mut self, delta: Delta<T::Entry>) -> Vec<String> {
        if delta.data_version == *self.table.version() {
            return Vec::new();
        }
        let names: Vec<String> = delta.changes.keys().cloned().collect();
        apply_changes(&mut self.table, delta);
        self.names.extend(names.iter().cloned());
        self.version = true;
        self.history = History::starting_at(self.table.version().clone());
        names
    }

    fn line_of(&self, names: BTreeSet<String>) -> Delta<T::Entry> {
        let all = self.table.entries();
        Delta {
            data_version: self.table.version().clone(),
            changes: names
                .into_iter()
                .map(|name| {
                    let entry = all.get(&name).cloned();
                    (name, entry)
                })
                .collect(),
        }
    }

    fn is_saved(&self) -> bool {
        self.names.is_empty() && !self.version
    }

    /// The journal line of what is unsaved, which it no longer is.
    fn take_line(&mut self) -> Delta<T::Entry> {
        self.version = false;
        let names = std::mem::take(&mut self.names);
        self.line_of(names)
    }

    /// A line that did not reach the disk: its entries are unsaved again.
    fn unsave(&mut self, line: &Delta<T::Entry>) {
        self.names.extend(line.changes.keys().cloned());
        self.version = true;
    }
}

/// One line of the journal, and what a master sends a slave that is behind: the table's
/// version after some changes, and each entry they changed as it is now (`null`: removed).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Delta<E> {
    pub(crate) data_version: DataVersion,
    pub(crate) changes: BTreeMap<String, Option<E>>,
}

struct Writer {
    journal: ConfigJournal,
    /// Bytes of the file as last written or read.
    file_len: u64,
}

pub(crate) struct JournaledTable<T> {
    path: PathBuf,
    state: Mutex<Unsaved<T>>,
    /// One save at a time, taken before `state`: lines reach the journal in the order of the
    /// states they hold, and the file ends with the latest table, not an older one renamed
    /// last.
    writer: Mutex<Writer>,
}

impl<T: TableFile> JournaledTable<T> {
    /// Loads `path` (none yet: `T::default()`, then `init`) with its journal replayed, and
    /// folds the journal into the file if it held anything. `parse` reads the file.
    pub(crate) fn load(
        path: PathBuf,
        parse: impl FnOnce(&[u8]) -> Result<T, String>,
        init: impl FnOnce(&mut T),
    ) -> Result<Self, TableError> {
        remove_stale_temporaries(&path);
        let (mut table, file_len) = match std::fs::read(&path) {
            Ok(raw) => (
                parse(&raw).map_err(|e| bad_file::<T>(&path, e))?,
                raw.len() as u64,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (T::default(), 0),
            Err(source) => return Err(io(&path, source)),
        };
        let (journal, lines) = ConfigJournal::open(&path).map_err(|source| io(&path, source))?;
        replay(&mut table, &lines, journal.path())?;
        init(&mut table);
        let replayed = !journal.is_empty();
        let me = Self {
            path,
            state: Mutex::new(Unsaved::new(table)),
            writer: Mutex::new(Writer { journal, file_len }),
        };
        if replayed {
            // Folded into the file now: the lines are read once, and a torn last line goes.
            me.rewrite(&mut lock(&me.writer))?;
        }
        Ok(me)
    }

    /// The table, for reads and for changes saved later ([`Self::save_unsaved`]): no I/O,
    /// for a thread that must not wait for a disk.
    pub(crate) fn state(&self) -> MutexGuard<'_, Unsaved<T>> {
        lock(&self.state)
    }

    /// Runs `change` on the table and saves what it changed (and anything unsaved) before
    /// returning; `change` says with `Unsaved::changed` what it changed.
    pub(crate) fn change<R>(
        &self,
        change: impl FnOnce(&mut Unsaved<T>) -> R,
    ) -> Result<R, TableError> {
        let mut writer = lock(&self.writer);
        let (result, line) = {
            let mut state = lock(&self.state);
            let result = change(&mut state);
            if state.is_saved() {
                return Ok(result);
            }
            (result, state.take_line())
        };
        self.append(&mut writer, &line)?;
        Ok(result)
    }

    /// Saves what changed since the last save, if anything.
    pub(crate) fn save_unsaved(&self) -> Result<(), TableError> {
        self.change(|_| ())
    }

    /// `table` replaces the whole table (a slave's sync), rewritten at once.
    pub(crate) fn replace(&self, table: T) -> Result<(), TableError> {
        let mut writer = lock(&self.writer);
        *lock(&self.state) = Unsaved::new(table);
        self.rewrite(&mut writer)
    }

    /// At shutdown: what is unsaved, then the journal folded into the file, so the file
    /// alone holds the table (for RocketMQ's tools, or RocketMQ's broker on this store).
    pub(crate) fn close(&self) -> Result<(), TableError> {
        self.save_unsaved()?;
        let mut writer = lock(&self.writer);
        if writer.journal.is_empty() {
            return Ok(());
        }
        self.rewrite(&mut writer)
    }

    /// Appends `line` to the journal, and folds the journal into the file once it outgrew it.
    fn append(&self, writer: &mut Writer, line: &Delta<T::Entry>) -> Result<(), TableError> {
        let text =
            serde_json::to_vec(line).map_err(|e| bad_file::<T>(&self.path, e.to_string()))?;
        if let Err(source) = writer.journal.append(&text) {
            // Saved again by the next change, save or shutdown.
            lock(&self.state).unsave(line);
            return Err(io(writer.journal.path(), source));
        }
        if writer.journal.outgrew(writer.file_len) {
            self.rewrite(writer)?;
        }
        Ok(())
    }

    /// Writes the whole table to the file, then empties the journal it now holds.
    fn rewrite(&self, writer: &mut Writer) -> Result<(), TableError> {
        let (text, taken) = {
            let mut state = lock(&self.state);
            let taken = state.take_line();
            let text = serde_json::to_vec_pretty(&state.table);
            (
                text.map_err(|e| bad_file::<T>(&self.path, e.to_string())),
                taken,
            )
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
                lock(&self.state).unsave(&taken);
                Err(e)
            }
        }
    }
}

/// Applies the journal's lines newer than the file's version to `table`.
fn replay<T: TableFile>(
    table: &mut T,
    lines: &[Vec<u8>],
    journal: &Path,
) -> Result<(), TableError> {
    let base = table.version().counter;
    for (i, raw) in lines.iter().enumerate() {
        let line: Delta<T::Entry> = serde_json::from_slice(raw)
            .map_err(|e| bad_file::<T>(journal, format!("line {}: {e}", i + 1)))?;
        if line.data_version.counter <= base {
            continue; // Written into the file before a crash emptied the journal.
        }
        apply_changes(table, line);
    }
    Ok(())
}

/// Sets or removes each entry `delta` changed, and takes its version.
fn apply_changes<T: TableFile>(table: &mut T, delta: Delta<T::Entry>) {
    for (name, entry) in delta.changes {
        match entry {
            Some(entry) => table.entries_mut().insert(name, entry),
            None => table.entries_mut().remove(&name),
        };
    }
    *table.version_mut() = delta.data_version;
}

fn bad_file<T: TableFile>(path: &Path, reason: String) -> TableError {
    TableError::BadFile {
        path: path.to_owned(),
        what: T::WHAT,
        reason,
    }
}

fn io(path: &Path, source: std::io::Error) -> TableError {
    TableError::Io {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(counter: i64) -> DataVersion {
        DataVersion {
            counter,
            timestamp: 1000 + counter,
            ..DataVersion::default()
        }
    }

    #[test]
    fn a_history_answers_from_its_base_and_forgets_its_oldest_changes() {
        let mut history = History::starting_at(version(10));
        history.push(&version(11), Some("a"));
        history.push(&version(12), None);
        history.push(&version(13), Some("b"));
        let names = |h: &History, v| h.names_since(&v).map(|n| n.into_iter().collect::<Vec<_>>());
        assert_eq!(
            names(&history, version(10)),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(names(&history, version(12)), Some(vec!["b".into()]));
        assert_eq!(names(&history, version(13)), Some(vec![]));
        let same_counter_other_master = DataVersion {
            timestamp: 7,
            ..version(12)
        };
        assert_eq!(names(&history, same_counter_other_master), None);
        let fresh = History::starting_at(version(0));
        assert_eq!(
            names(&fresh, version(0)),
            None,
            "every fresh table's version"
        );
        for counter in 14..=HISTORY as i64 + 13 {
            history.push(&version(counter), Some("c"));
        }
        assert_eq!(names(&history, version(12)), None, "forgotten");
        assert_eq!(
            names(&history, version(13)),
            Some(vec!["c".into()]),
            "the new base"
        );
    }
}
