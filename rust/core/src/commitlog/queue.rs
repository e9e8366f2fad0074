//! The ordered list of segment files of one log: RocketMQ's `MappedFileQueue`.
//!
//! Both the commit log and every consume queue are one of these. The next segment is created
//! on a background thread (RocketMQ's `AllocateMappedFileService`) so an append that rolls over
//! finds it ready instead of stalling on fallocate, and blocks are reserved and pages
//! prefaulted a window ahead of the writer, in steps, so appends stall on neither a page fault
//! nor fallocate, and a segment takes disk only as far as the writer got (plus the window).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use super::mapped_file::{MappedFile, PREFAULT_STEP};
use crate::error::CommitLogError;
use crate::sync::{lock, read, write};

type Prealloc = (u64, JoinHandle<Result<MappedFile, CommitLogError>>);

/// How far ahead of the writer blocks are reserved and pages prefaulted. Not a whole segment:
/// pages prefaulted long before the writer reaches them are dirty zeros that writeback may
/// store twice, a 1 GiB segment prepared at once costs as much CPU as the appends that fill it,
/// and blocks reserved far ahead are disk a store does not use yet. A prefault takes about
/// 1 ms a MiB, so 16 MiB keeps far ahead of any writer (200 ms of appends at 80 MB/s).
pub(crate) const PREFAULT_WINDOW: usize = 16 << 20;

pub(crate) struct MappedFileQueue {
    dir: PathBuf,
    file_size: usize,
    /// The setting `file_size` comes from (`mappedFileSizeCommitLog`, ...), for errors.
    size_key: &'static str,
    writable: bool,
    preallocate: bool,
    /// Readers clone an `Arc` out under the read lock and drop the lock before touching bytes;
    /// only rollover and truncation take the write lock.
    files: RwLock<Vec<Arc<MappedFile>>>,
    /// The segment being prepared ahead of the writer.
    next: Mutex<Option<Prealloc>>,
    /// The prefault running ahead of the writer, if any.
    prefaulting: Mutex<Option<JoinHandle<()>>>,
    /// Start offset of the last segment preparation requested (only the writer touches it).
    prepared: AtomicU64,
}

impl MappedFileQueue {
    /// Maps every segment found in `dir`, in offset order, checking names, sizes and contiguity.
    pub(crate) fn load(
        dir: &Path,
        file_size: usize,
        size_key: &'static str,
        writable: bool,
        preallocate: bool,
    ) -> Result<Self, CommitLogError> {
        if writable {
            std::fs::create_dir_all(dir).map_err(|e| CommitLogError::io(dir, e))?;
        }
        let mut found = list_segments(dir, writable)?;
        // A reader of a live store lists the directory while its writer renames the next
        // segment into place, and readdir during a rename may miss an entry: a read-only open
        // lists again before it calls a gap corruption.
        for _ in 1..LIST_ATTEMPTS {
            if writable || first_gap(&found, file_size).is_none() {
                break;
            }
            found = list_segments(dir, writable)?;
        }
        let mut files = Vec::with_capacity(found.len());
        let mut expected: Option<u64> = None;
        for (start, path) in found {
            if let Some(expected) = expected {
                if start != expected {
                    return Err(CommitLogError::SegmentGap {
                        path,
                        start,
                        expected,
                    });
                }
            }
            let file = MappedFile::open(&path, start, file_size, size_key, writable)?;
            file.set_wrote(file_size);
            file.set_flushed(file_size);
            expected = Some(file.end());
            files.push(Arc::new(file));
        }
        Ok(Self {
            dir: dir.to_owned(),
            file_size,
            size_key,
            writable,
            preallocate,
            files: RwLock::new(files),
            next: Mutex::new(None),
            prefaulting: Mutex::new(None),
            prepared: AtomicU64::new(u64::MAX),
        })
    }

    pub(crate) fn file_size(&self) -> usize {
        self.file_size
    }

    pub(crate) fn files(&self) -> Vec<Arc<MappedFile>> {
        read(&self.files).clone()
    }

    pub(crate) fn first(&self) -> Option<Arc<MappedFile>> {
        read(&self.files).first().cloned()
    }

    pub(crate) fn last(&self) -> Option<Arc<MappedFile>> {
        read(&self.files).last().cloned()
    }

    /// The segment holding `offset` (segments are contiguous, so this is arithmetic).
    pub(crate) fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = read(&self.files);
        let first = files.first()?.start();
        if offset < first {
            return None;
        }
        files
            .get(((offset - first) / self.file_size as u64) as usize)
            .cloned()
    }

    pub(crate) fn min_offset(&self) -> u64 {
        self.first().map_or(0, |f| f.start())
    }

    /// End of the data: a trailing segment nobody wrote to yet (just rolled, or prepared by a
    /// live writer that a read-only reader sees) does not move it.
    pub(crate) fn max_offset(&self) -> u64 {
        let files = read(&self.files);
        files
            .iter()
            .rev()
            .find(|f| f.wrote() > 0)
            .or(files.first())
            .map_or(0, |f| f.start() + f.wrote() as u64)
    }

    /// Read-only readers of a live store: maps segments the writer created since we looked.
    pub(crate) fn map_new_segments(&self) -> Result<usize, CommitLogError> {
        let mut added = 0;
        loop {
            let next = self.last().map_or(0, |f| f.end());
            let path = self.dir.join(super::mapped_file::segment_name(next));
            if !path.exists() {
                return Ok(added);
            }
            let file = MappedFile::open(&path, next, self.file_size, self.size_key, self.writable)?;
            file.set_wrote(0);
            write(&self.files).push(Arc::new(file));
            added += 1;
        }
    }

    /// Appends the segment starting at `start`, taking the preallocated one when it matches.
    pub(crate) fn roll(&self, start: u64) -> Result<Arc<MappedFile>, CommitLogError> {
        if !self.writable {
            return Err(CommitLogError::ReadOnly);
        }
        let ready = {
            let mut next = lock(&self.next);
            match next.take() {
                Some((at, handle)) if at == start => handle.join().ok(),
                Some((_, handle)) => {
                    // A different segment was prepared (after a truncation): discard it.
                    let _ = handle.join();
                    None
                }
                None => None,
            }
        };
        let (file, prepared) = match ready {
            Some(Ok(file)) => (Arc::new(file), true),
            // Preallocation failing (a full disk) is reported by the synchronous retry.
            _ => (
                Arc::new(MappedFile::create(&self.dir, start, self.file_size, 0)?),
                false,
            ),
        };
        if !prepared {
            // Nobody prepared this one (the first segment, or a writer that outran the
            // allocator): prefault behind the writer's back rather than stall the append.
            self.prefault_ahead(&file);
        }
        let mut files = write(&self.files);
        if let Some(sealed) = files.last() {
            sealed.seal();
        }
        files.push(file.clone());
        Ok(file)
    }

    /// Keeps the prefault window ahead of the writer in `current`, and starts preparing the
    /// segment after it once the writer is half way through: early enough to be ready at
    /// rollover, late enough that a store that never fills its segment never pays for the
    /// next one. Cheap when nothing is due.
    pub(crate) fn prepare_after(&self, current: &Arc<MappedFile>) {
        self.prefault_ahead(current);
        let next = current.end();
        if !self.preallocate
            || current.wrote() < current.size() / 2
            || self.prepared.load(Ordering::Relaxed) == next
        {
            return;
        }
        self.prepared.store(next, Ordering::Relaxed);
        self.prepare(next);
    }

    /// Keeps blocks reserved and pages prefaulted a window past the writer in `file`: one step
    /// further each time the writer has used a step of the window, on a background thread,
    /// never two at once. A step rather than half a window, because a prefault holds its CPU
    /// (see [`PREFAULT_STEP`]).
    fn prefault_ahead(&self, file: &Arc<MappedFile>) {
        let prefaulted = file.prefaulted();
        let wrote = file.wrote();
        if !self.preallocate
            || prefaulted >= file.size()
            || wrote + PREFAULT_WINDOW < prefaulted + PREFAULT_STEP
        {
            return;
        }
        let mut running = lock(&self.prefaulting);
        if running.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        // A writer that outran the steps (a segment nobody prepared) is caught up from where
        // it writes: pages it passed need no prefault.
        let until = (prefaulted.max(wrote & !4095) + PREFAULT_STEP).min(file.size());
        let file = file.clone();
        *running = std::thread::Builder::new()
            .name("rocketha-prefault".into())
            .spawn(move || {
                crate::sync::run_in_background();
                // A full disk stops the step here; the writer's own reservation, which it
                // makes before writing past what is reserved, reports it.
                if file.allocate(until).is_ok() {
                    file.prefault_for_write(until);
                }
            })
            .ok();
    }

    fn prepare(&self, start: u64) {
        let dir = self.dir.clone();
        let size = self.file_size;
        let handle = std::thread::Builder::new()
            .name("rocketha-allocate".into())
            .spawn(move || {
                crate::sync::run_in_background();
                MappedFile::create(&dir, start, size, PREFAULT_WINDOW)
            });
        if let Ok(handle) = handle {
            *lock(&self.next) = Some((start, handle));
        }
    }

    /// Deletes up to `max` of the oldest segments while `expired` says so, never the last one
    /// (the segment being written): RocketMQ's `deleteExpiredFileByTime` and `ByOffset`. They
    /// leave the list before their files go, so the min offset moves first and no new read is
    /// sent there; a reader already holding one keeps its mapping (unlinking a mapped file is
    /// safe on Linux) until it lets go.
    pub(crate) fn delete_oldest(
        &self,
        max: usize,
        mut expired: impl FnMut(&MappedFile) -> bool,
    ) -> Result<Vec<PathBuf>, CommitLogError> {
        let doomed: Vec<Arc<MappedFile>> = {
            let mut files = write(&self.files);
            let older = files.len().saturating_sub(1);
            let n = files[..older]
                .iter()
                .take(max)
                .take_while(|f| expired(f))
                .count();
            files.drain(..n).collect()
        };
        let mut deleted = Vec::with_capacity(doomed.len());
        for file in doomed {
            std::fs::remove_file(file.path()).map_err(|e| CommitLogError::io(file.path(), e))?;
            deleted.push(file.path().to_owned());
        }
        Ok(deleted)
    }

    /// Read-only readers of a live store: lets go of the oldest segments the writer deleted.
    pub(crate) fn forget_deleted_segments(&self) {
        let mut files = write(&self.files);
        let gone = files.iter().take_while(|f| !f.path().exists()).count();
        files.drain(..gone);
    }

    /// Drops every segment starting at or after `offset` and deletes its file.
    pub(crate) fn delete_from(&self, offset: u64) -> Result<Vec<PathBuf>, CommitLogError> {
        self.discard_prepared();
        let mut files = write(&self.files);
        let mut deleted = Vec::new();
        while files.last().is_some_and(|f| f.start() >= offset) {
            if let Some(file) = files.pop() {
                std::fs::remove_file(file.path())
                    .map_err(|e| CommitLogError::io(file.path(), e))?;
                deleted.push(file.path().to_owned());
            }
        }
        Ok(deleted)
    }

    /// Removes a preallocated segment nobody wrote to, so a reopened store does not mistake
    /// it for the end of the log.
    pub(crate) fn discard_prepared(&self) {
        self.prepared.store(u64::MAX, Ordering::Relaxed);
        let prefaulting = lock(&self.prefaulting).take();
        if let Some(t) = prefaulting {
            let _ = t.join();
        }
        let prepared = lock(&self.next).take();
        if let Some((start, handle)) = prepared {
            let _ = handle.join();
            let in_use = read(&self.files).iter().any(|f| f.start() == start);
            if !in_use {
                let _ =
                    std::fs::remove_file(self.dir.join(super::mapped_file::segment_name(start)));
            }
        }
    }
}

/// How often a read-only open lists a live store's segments before a gap is corruption.
const LIST_ATTEMPTS: usize = 5;

/// The segments in `dir` by start offset, sorted. A writer removes the `.tmp` a crash left.
fn list_segments(dir: &Path, writable: bool) -> Result<Vec<(u64, PathBuf)>, CommitLogError> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => Some(entries),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !writable => None,
        Err(e) => return Err(CommitLogError::io(dir, e)),
    };
    for entry in entries.into_iter().flatten() {
        let entry = entry.map_err(|e| CommitLogError::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".tmp") && writable {
            // A segment whose creation a crash interrupted: never part of the log.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if name.starts_with('.') || name.ends_with(".tmp") {
            continue;
        }
        let start = (name.len() == 20)
            .then(|| name.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| CommitLogError::BadSegmentName { path: path.clone() })?;
        found.push((start, path));
    }
    found.sort();
    Ok(found)
}

/// The first segment that does not start where the one before it ends.
fn first_gap(found: &[(u64, PathBuf)], file_size: usize) -> Option<u64> {
    found
        .windows(2)
        .find(|w| w[1].0 != w[0].0 + file_size as u64)
        .map(|w| w[1].0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits for the prefault in flight, so the next request is not skipped as a duplicate.
    fn settle(queue: &MappedFileQueue) {
        if let Some(t) = queue.prefaulting.lock().unwrap().take() {
            t.join().unwrap();
        }
    }

    /// Lets the prefault step until it stops; where it stopped.
    fn prefault_settled(queue: &MappedFileQueue, file: &Arc<MappedFile>) -> usize {
        loop {
            let before = file.prefaulted();
            queue.prepare_after(file);
            settle(queue);
            if file.prefaulted() == before {
                return before;
            }
        }
    }

    #[test]
    fn pages_are_prefaulted_a_window_ahead_of_the_writer_one_step_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let size = 3 * PREFAULT_WINDOW;
        let queue = MappedFileQueue::load(dir.path(), size, "test", true, true).unwrap();
        let file = queue.roll(0).unwrap();
        settle(&queue);
        assert_eq!(file.prefaulted(), PREFAULT_STEP);
        assert_eq!(prefault_settled(&queue, &file), PREFAULT_WINDOW);
        // The writer has not used a whole step of the window yet: nothing to do.
        file.set_wrote(PREFAULT_STEP - 1);
        assert_eq!(prefault_settled(&queue, &file), PREFAULT_WINDOW);
        // A step used is a step prefaulted past the window, and no more.
        file.set_wrote(PREFAULT_STEP + 5000);
        queue.prepare_after(&file);
        settle(&queue);
        assert_eq!(file.prefaulted(), PREFAULT_WINDOW + PREFAULT_STEP);
        assert_eq!(
            prefault_settled(&queue, &file),
            PREFAULT_WINDOW + PREFAULT_STEP
        );
        // A writer that outran the steps is caught up from where it writes, up to the end of
        // the segment; the next segment is prepared with its first window.
        file.set_wrote(2 * PREFAULT_WINDOW + 5000);
        queue.prepare_after(&file);
        settle(&queue);
        assert_eq!(
            file.prefaulted(),
            2 * PREFAULT_WINDOW + 4096 + PREFAULT_STEP
        );
        assert_eq!(prefault_settled(&queue, &file), size);
        let next = queue.roll(file.end()).unwrap();
        assert_eq!(next.prefaulted(), PREFAULT_WINDOW);
    }
}
