//! RocketMQ's `ConfigManager` file handling: a broker's JSON tables (`config/topics.json`,
//! `consumerOffset.json`, `subscriptionGroup.json`, `delayOffset.json`) are written whole or
//! not at all, and the temporaries a crash leaves between write and rename are swept at load.

use std::io::Write;
use std::path::Path;
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
}
