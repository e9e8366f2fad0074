//! RocketMQ's `ConfigManager` file handling: a broker's JSON tables (`config/topics.json`,
//! `consumerOffset.json`, `subscriptionGroup.json`, `delayOffset.json`) are written whole or
//! not at all, and the temporaries a crash leaves between write and rename are swept at load.
//! A table that changes one entry at a time and grows large (the topics, the consumer groups)
//! keeps a [`ConfigJournal`] beside its file, so that a change does not rewrite the whole table.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `data` to `path` so that a crash at any point leaves the old file or the new one:
/// a temporary file beside it, synced, then renamed over it, then the directory synced.
/// Each call has a temporary file of its own: two threads persisting one file (a slave's
/// sync and a heartbeat's new group) would otherwise truncate each other's, and the second
/// rename would find it gone.
pub(crate) fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!(
        "{}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // A full disk or a failed rename: the half-written temporary must not pile up beside
        // the file, one per failed save.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::File::open(dir)?.sync_all()
}

/// Deletes the temporary files of `path` that a crash left between write and rename
/// (`write_atomically`'s `STEM.PID.N.tmp`, RocketMQ's `NAME.tmp`): they never were the file,
/// and a broker killed often would gather them. Called at load, before this process writes.
pub(crate) fn remove_stale_temporaries(path: &Path) {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem().and_then(|s| s.to_str())) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{stem}.");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&prefix) && name.ends_with(".tmp") {
            // Best effort: one left behind costs only its bytes, and the next load retries.
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// An append-only journal beside a table file (`topics.json` -> `topics.journal`): a change is
/// one line, appended and synced, so it costs the same whatever the table holds, where
/// rewriting the file costs all of it. Its owner rewrites the file and [`Self::clear`]s the
/// journal when the journal outgrows the file ([`Self::outgrew`]), so the cost of a change
/// stays constant on average. A line is whole or not there: a failed append is cut off again,
/// and a crash mid-append leaves an unterminated last line, which [`Self::open`] drops (its
/// change was never acknowledged; the owner rewrites the file and clears the journal before
/// appending to it again).
pub(crate) struct ConfigJournal {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Bytes in the journal.
    len: u64,
}

/// A journal shorter than this is never worth a rewrite of its table.
const JOURNAL_MIN_COMPACT: u64 = 64 * 1024;

impl ConfigJournal {
    /// The journal of the table file `table`, and its complete lines (none if it does not
    /// exist).
    pub(crate) fn open(table: &Path) -> std::io::Result<(Self, Vec<Vec<u8>>)> {
        let path = table.with_extension("journal");
        let raw = match std::fs::read(&path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let whole = raw.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let lines = raw[..whole]
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        let journal = Self {
            path,
            file: None,
            len: raw.len() as u64,
        };
        Ok((journal, lines))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (no newline in it) and syncs it; on failure the journal is cut back to
    /// where it was, so no half line stays in front of the next one.
    pub(crate) fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        debug_assert!(!line.contains(&b'\n'));
        if self.file.is_none() {
            let dir = self.path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)?;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            if self.len == 0 {
                // A new file's name must survive a crash too.
                std::fs::File::open(dir)?.sync_all()?;
            }
            self.file = Some(file);
        }
        let Some(file) = self.file.as_mut() else {
            return Err(std::io::Error::other("the journal is not open"));
        };
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        let written = file.write_all(&buf).and_then(|()| file.sync_data());
        if let Err(e) = written {
            // Best effort: if the cut fails too, the next append goes after a torn line,
            // which the next read refuses by name rather than misreading.
            let _ = file.set_len(self.len);
            self.file = None;
            return Err(e);
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Whether the journal is longer than the table file (`table_len` bytes) it follows:
    /// then rewriting the file costs less than the journal already does at each load.
    pub(crate) fn outgrew(&self, table_len: u64) -> bool {
        self.len >= table_len.max(JOURNAL_MIN_COMPACT)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the journal, once the table file holds everything in it.
    pub(crate) fn clear(&mut self) -> std::io::Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.file = None;
        let file = std::fs::OpenOptions::new().write(true).open(&self.path)?;
        file.set_len(0)?;
        file.sync_all()?;
        self.len = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_atomic_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: the rename over it fails.
        let path = dir.path().join("topics.json");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), b"x").unwrap();
        assert!(write_atomically(&path, b"{}").is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("topics.json")]);
    }

    #[test]
    fn stale_temporaries_of_the_file_go_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("consumerOffset.json");
        write_atomically(&path, b"{}").unwrap();
        let stale = ["consumerOffset.4242.7.tmp", "consumerOffset.json.tmp"];
        let kept = ["topics.4242.1.tmp", "consumerOffset.json.bak"];
        for name in stale.iter().chain(&kept) {
            std::fs::write(dir.path().join(name), b"{").unwrap();
        }
        remove_stale_temporaries(&path);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "consumerOffset.json",
                "consumerOffset.json.bak",
                "topics.4242.1.tmp"
            ]
        );
    }

    #[test]
    fn concurrent_atomic_writes_of_one_file_all_succeed_and_one_wins_whole() {
        // A slave's sync and a heartbeat's auto-created group persist the same file from two
        // threads: each write needs a temporary file of its own.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("subscriptionGroup.json");
        let bodies: Vec<Vec<u8>> = (0..4u8).map(|i| vec![b'a' + i; 64 * 1024]).collect();
        std::thread::scope(|s| {
            for body in &bodies {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..50 {
                        write_atomically(path, body).unwrap();
                    }
                });
            }
        });
        let got = std::fs::read(&path).unwrap();
        assert!(
            bodies.contains(&got),
            "a mix of writes: {} bytes",
            got.len()
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "temporary files left: {left:?}");
    }

    #[test]
    fn a_journal_keeps_whole_lines_and_drops_a_torn_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("topics.json");
        let (mut journal, lines) = ConfigJournal::open(&table).unwrap();
        assert!(lines.is_empty() && journal.is_empty());
        journal.append(b"{\"a\":1}").unwrap();
        journal.append(b"{\"b\":2}").unwrap();
        assert_eq!(journal.path(), dir.path().join("topics.journal"));
        // A crash in the middle of a third append.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(journal.path())
            .unwrap();
        f.write_all(b"{\"c\":").unwrap();
        let (mut journal, lines) = ConfigJournal::open(&table).unwrap();
        assert_eq!(lines, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        assert!(!journal.outgrew(1), "under the minimum");
        journal.clear().unwrap();
        let (journal, lines) = ConfigJournal::open(&table).unwrap();
        assert!(lines.is_empty() && journal.is_empty());
    }

    #[test]
    fn a_journal_outgrows_its_table() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = ConfigJournal::open(&dir.path().join("t.json")).unwrap();
        let line = vec![b'x'; 1023];
        for _ in 0..64 {
            journal.append(&line).unwrap();
        }
        assert!(
            journal.outgrew(64 * 1024),
            "64 KiB of lines against a 64 KiB table"
        );
        assert!(!journal.outgrew(64 * 1024 + 1));
    }
}
