//! RocketMQ 5's `EpochFileCache`: which master epoch wrote which range of the commit log.
//!
//! In controller mode every election gives the new master a higher epoch, and the master
//! records `(epoch, startOffset)` — its max offset when it took over — before it writes. Two
//! brokers agree on the log up to the end of the last epoch both hold with the same start: a
//! slave truncates to that point before it replicates, so a log written by a deposed master
//! is never kept past where the new master's differs. That is the answer to the seeds'
//! divergent slave, decided by the controller instead of a person.
//!
//! The file is RocketMQ's `CheckpointFile`: the entry count on the first line, the CRC32 of the
//! entry lines (masked to 31 bits, 0 meaning "not checked") on the second, then one
//! `epoch-startOffset` line per entry. The previous content is kept as `FILE.bak`, read when
//! the file is missing, empty or damaged. Unlike RocketMQ's writer, each write is atomic (a
//! temporary renamed over the file), and an emptied cache is written as such, backup too:
//! RocketMQ skips the write of an empty list, so a full truncation came back after a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::protocol::config_file::write_atomically;

/// One epoch: the master of `epoch` wrote `[start_offset, end_offset)`; the last entry's
/// end is open (`u64::MAX`) until set to a max offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: u64,
    pub end_offset: u64,
}

impl EpochEntry {
    pub fn new(epoch: i32, start_offset: u64) -> Self {
        Self {
            epoch,
            start_offset,
            end_offset: u64::MAX,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EpochFileError {
    #[error("epoch file {path}: {why}")]
    Damaged { path: PathBuf, why: String },
    #[error("epoch file {path}: {why}")]
    Io { path: PathBuf, why: String },
    /// An entry must start a higher epoch at a higher offset than the last one.
    #[error("epoch entry {new_epoch}-{new_start} does not follow the last entry {last_epoch}-{last_start}")]
    NotAfterLast {
        new_epoch: i32,
        new_start: u64,
        last_epoch: i32,
        last_start: u64,
    },
}

/// The epochs this broker's log holds, kept in `path` (none: in memory only, as for the
/// entries a master sends in its handshake).
#[derive(Debug)]
pub struct EpochFileCache {
    path: Option<PathBuf>,
    entries: Mutex<BTreeMap<i32, EpochEntry>>,
}

impl EpochFileCache {
    /// Reads `path` (or its `.bak` when `path` is missing, empty or damaged); a broker that
    /// never ran in controller mode has neither and starts empty.
    pub fn load(path: &Path) -> Result<Self, EpochFileError> {
        let entries = match read_checkpoint(path) {
            Ok(Some(entries)) if !entries.is_empty() => entries,
            first => match read_checkpoint(&backup(path)) {
                Ok(Some(entries)) => entries,
                // No backup: the file's own verdict stands (an error names the file itself).
                Ok(None) => first?.unwrap_or_default(),
                Err(e) => return Err(first.err().unwrap_or(e)),
            },
        };
        Ok(Self {
            path: Some(path.to_path_buf()),
            entries: Mutex::new(chain(entries)),
        })
    }

    /// A cache of someone else's entries (a master's handshake), never written anywhere.
    pub fn in_memory(entries: impl IntoIterator<Item = (i32, u64)>) -> Self {
        let entries = entries.into_iter().map(|(e, s)| EpochEntry::new(e, s));
        Self {
            path: None,
            entries: Mutex::new(chain(entries.collect())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<i32, EpochEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `epoch` starts writing at `start_offset` (a new master's max offset).
    /// Refused, as by RocketMQ, when the last epoch is not older and started strictly
    /// before: an epoch that wrote nothing keeps its entry, and peers compare the same lists.
    pub fn append(&self, epoch: i32, start_offset: u64) -> Result<(), EpochFileError> {
        let mut entries = self.lock();
        if let Some(last) = entries.values_mut().next_back() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                return Err(EpochFileError::NotAfterLast {
                    new_epoch: epoch,
                    new_start: start_offset,
                    last_epoch: last.epoch,
                    last_start: last.start_offset,
                });
            }
            last.end_offset = start_offset;
        }
        entries.insert(epoch, EpochEntry::new(epoch, start_offset));
        self.flush(&entries)
    }

    /// Closes the last epoch at `end_offset` (the log's max offset), as a master does before
    /// it compares or sends its entries.
    pub fn set_last_end_offset(&self, end_offset: u64) {
        if let Some(last) = self.lock().values_mut().next_back() {
            if last.start_offset <= end_offset {
                last.end_offset = end_offset;
            }
        }
    }

    pub fn entries(&self) -> Vec<EpochEntry> {
        self.lock().values().copied().collect()
    }

    pub fn last_entry(&self) -> Option<EpochEntry> {
        self.lock().values().next_back().copied()
    }

    /// The last epoch, -1 when there is none (RocketMQ's `lastEpoch`).
    pub fn last_epoch(&self) -> i32 {
        self.last_entry().map_or(-1, |e| e.epoch)
    }

    /// The epoch whose range holds `offset`.
    pub fn entry_by_offset(&self, offset: u64) -> Option<EpochEntry> {
        self.lock()
            .values()
            .find(|e| e.start_offset <= offset && offset < e.end_offset)
            .copied()
    }

    /// The first epoch after `epoch`.
    pub fn next_entry(&self, epoch: i32) -> Option<EpochEntry> {
        let entries = self.lock();
        let next = entries.range(epoch.saturating_add(1)..).next();
        next.map(|(_, e)| *e)
    }

    /// The offset up to which this log and `other`'s agree: the end of the newest epoch both
    /// hold with the same start (the smaller of the two ends); None when no epoch is shared.
    pub fn find_consistent_point(&self, other: &EpochFileCache) -> Option<u64> {
        let theirs = other.lock().clone();
        let ours = self.lock();
        ours.values().rev().find_map(|mine| {
            let same = theirs
                .get(&mine.epoch)
                .filter(|t| t.start_offset == mine.start_offset)?;
            Some(mine.end_offset.min(same.end_offset))
        })
    }

    /// Drops the epochs that start at or after `offset` (the log was cut there); the last one
    /// left is open again.
    pub fn truncate_suffix_by_offset(&self, offset: u64) -> Result<(), EpochFileError> {
        self.truncate_suffix(|e| e.start_offset >= offset)
    }

    /// Drops `epoch` and every later one.
    pub fn truncate_suffix_by_epoch(&self, epoch: i32) -> Result<(), EpochFileError> {
        self.truncate_suffix(|e| e.epoch >= epoch)
    }

    fn truncate_suffix(&self, cut: impl Fn(&EpochEntry) -> bool) -> Result<(), EpochFileError> {
        let mut entries = self.lock();
        entries.retain(|_, e| !cut(e));
        // RocketMQ reopens a copy of the last entry, so its end stays where the removed next
        // one began; an open end is what the entry means now.
        if let Some(last) = entries.values_mut().next_back() {
            last.end_offset = u64::MAX;
        }
        self.flush(&entries)
    }

    /// Drops the epochs that end at or before `offset` (retention deleted their records).
    pub fn truncate_prefix_by_offset(&self, offset: u64) -> Result<(), EpochFileError> {
        let mut entries = self.lock();
        entries.retain(|_, e| e.end_offset > offset);
        self.flush(&entries)
    }

    fn flush(&self, entries: &BTreeMap<i32, EpochEntry>) -> Result<(), EpochFileError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let io = |e: std::io::Error| EpochFileError::Io {
            path: path.clone(),
            why: e.to_string(),
        };
        let content = encode(entries.values());
        // The previous content becomes the backup first, as RocketMQ's `string2File` keeps it.
        // An emptied cache empties the backup too: readers (RocketMQ's and ours) take the
        // backup when the file holds no entry.
        let previous = match std::fs::read(path) {
            Ok(_) if entries.is_empty() => Some(content.clone().into_bytes()),
            Ok(previous) => Some(previous),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(e)),
        };
        if let Some(previous) = previous {
            write_atomically(&backup(path), &previous).map_err(io)?;
        }
        write_atomically(path, content.as_bytes()).map_err(io)
    }
}

fn backup(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

/// Each entry ends where the next begins; the last one is open.
fn chain(mut entries: Vec<EpochEntry>) -> BTreeMap<i32, EpochEntry> {
    for i in 1..entries.len() {
        entries[i - 1].end_offset = entries[i].start_offset;
    }
    entries.into_iter().map(|e| (e.epoch, e)).collect()
}

/// Java's `UtilAll.crc32`: CRC32 masked to a non-negative int.
fn masked_crc(bytes: &[u8]) -> i32 {
    (crc32fast::hash(bytes) & 0x7FFF_FFFF) as i32
}

fn encode<'a>(entries: impl Iterator<Item = &'a EpochEntry>) -> String {
    let mut lines = String::new();
    let mut count = 0;
    for e in entries {
        lines.push_str(&format!("{}-{}\n", e.epoch, e.start_offset));
        count += 1;
    }
    format!("{count}\n{}\n{lines}", masked_crc(lines.as_bytes()))
}

/// The entries of a checkpoint file; None when it does not exist.
fn read_checkpoint(path: &Path) -> Result<Option<Vec<EpochEntry>>, EpochFileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(EpochFileError::Io {
                path: path.to_path_buf(),
                why: e.to_string(),
            })
        }
    };
    let damaged = |why: String| EpochFileError::Damaged {
        path: path.to_path_buf(),
        why,
    };
    let mut lines = text.lines();
    let mut number = |what: &str| -> Result<i64, EpochFileError> {
        let line = lines.next().unwrap_or("");
        line.trim()
            .parse()
            .map_err(|_| damaged(format!("{what} line {line:?} is not a number")))
    };
    let count = number("the entry count")?;
    let crc = number("the CRC")?;
    let mut entries = Vec::new();
    let mut body = String::new();
    for line in lines {
        body.push_str(line);
        body.push('\n');
        let parsed = line.split_once('-').and_then(|(e, s)| {
            let entry = EpochEntry::new(e.parse().ok()?, s.parse().ok()?);
            Some(entry)
        });
        let entry = parsed.ok_or_else(|| damaged(format!("{line:?} is not epoch-startOffset")))?;
        if let Some(last) = entries
            .last()
            .filter(|l: &&EpochEntry| l.epoch >= entry.epoch || l.start_offset > entry.start_offset)
        {
            return Err(damaged(format!(
                "entry {}-{} does not follow {}-{}",
                entry.epoch, entry.start_offset, last.epoch, last.start_offset
            )));
        }
        entries.push(entry);
    }
    if entries.len() as i64 != count {
        return Err(damaged(format!(
            "the first line says {count} entries, the file holds {}",
            entries.len()
        )));
    }
    if crc != 0 && crc != i64::from(masked_crc(body.as_bytes())) {
        return Err(damaged(format!(
            "CRC {crc} does not match the entries' {}",
            masked_crc(body.as_bytes())
        )));
    }
    Ok(Some(entries))
}

#[cfg(test)]
mod tests;
