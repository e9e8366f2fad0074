//! Consume queues: per topic and queue id, a log of 20-byte entries
//! (`i64 commit log offset | i32 size | i64 tag hash`) pointing into the commit log.
//!
//! Entries are written at `queue_offset * 20`, so dispatching a record twice (replaying after
//! recovery) rewrites the same bytes instead of duplicating it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::commitlog::queue::MappedFileQueue;
use crate::error::CommitLogError;
use crate::sync::{read, write};

pub(crate) const CQ_ENTRY_SIZE: usize = 20;
/// RocketMQ's `mappedFileSizeConsumeQueue`: 300,000 entries a file.
pub(crate) const DEFAULT_CQ_ENTRIES_PER_FILE: usize = 300_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CqEntry {
    pub(crate) commitlog_offset: i64,
    pub(crate) size: i32,
    pub(crate) tags_code: i64,
}

impl CqEntry {
    fn encode(&self) -> [u8; CQ_ENTRY_SIZE] {
        let mut out = [0u8; CQ_ENTRY_SIZE];
        out[..8].copy_from_slice(&self.commitlog_offset.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    fn decode(raw: &[u8]) -> Self {
        let mut o = [0u8; 8];
        o.copy_from_slice(&raw[..8]);
        let mut s = [0u8; 4];
        s.copy_from_slice(&raw[8..12]);
        let mut t = [0u8; 8];
        t.copy_from_slice(&raw[12..20]);
        Self {
            commitlog_offset: i64::from_be_bytes(o),
            size: i32::from_be_bytes(s),
            tags_code: i64::from_be_bytes(t),
        }
    }

    /// A zeroed slot: a hole left by a record not yet (re)dispatched.
    pub(crate) fn is_empty(&self) -> bool {
        self.size <= 0
    }
}

pub(crate) struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    files: MappedFileQueue,
    /// RocketMQ's `minLogicOffset`: the first entry pointing at or past the commit log's min
    /// offset, once retention moved it (files go whole, so this can lie inside the first).
    min_logic_offset: AtomicI64,
    /// The commit log min offset `min_logic_offset` was corrected for.
    corrected_for: AtomicU64,
}

impl ConsumeQueue {
    fn open(
        dir: &Path,
        topic: &str,
        queue_id: i32,
        entries_per_file: usize,
        writable: bool,
    ) -> Result<Self, CommitLogError> {
        let files = MappedFileQueue::load(
            dir,
            entries_per_file * CQ_ENTRY_SIZE,
            "mappedFileSizeConsumeQueue",
            writable,
            false,
        )?;
        let cq = Self {
            topic: topic.to_owned(),
            queue_id,
            files,
            min_logic_offset: AtomicI64::new(0),
            corrected_for: AtomicU64::new(0),
        };
        cq.find_end();
        Ok(cq)
    }

    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }
    pub(crate) fn queue_id(&self) -> i32 {
        self.queue_id
    }

    /// Sets the last file's end after the last non-empty entry (files load as full).
    fn find_end(&self) {
        let Some(last) = self.files.last() else {
            return;
        };
        let whole = last.whole();
        let used = whole
            .chunks_exact(CQ_ENTRY_SIZE)
            .rposition(|e| !CqEntry::decode(e).is_empty())
            .map_or(0, |i| (i + 1) * CQ_ENTRY_SIZE);
        last.set_wrote(used);
    }

    /// Read-only queues: takes in the files and entries a live writer added since the last
    /// look. Entries are written in queue-offset order, so the scan stops at the first empty
    /// slot after the known end and costs only what is new.
    fn refresh(&self) -> Result<(), CommitLogError> {
        self.files.forget_deleted_segments();
        if self.files.map_new_segments()? > 0 {
            let files = self.files.files();
            for f in &files[..files.len() - 1] {
                f.set_wrote(f.size());
            }
        }
        let Some(last) = self.files.last() else {
            return Ok(());
        };
        let known = last.wrote();
        let new = last.whole()[known..]
            .chunks_exact(CQ_ENTRY_SIZE)
            .take_while(|e| !CqEntry::decode(e).is_empty())
            .count();
        last.set_wrote(known + new * CQ_ENTRY_SIZE);
        Ok(())
    }

    /// The queue offset the next message gets.
    pub(crate) fn max_queue_offset(&self) -> i64 {
        (self.files.max_offset() / CQ_ENTRY_SIZE as u64) as i64
    }

    pub(crate) fn min_queue_offset(&self) -> i64 {
        let first_file = (self.files.min_offset() / CQ_ENTRY_SIZE as u64) as i64;
        first_file.max(self.min_logic_offset.load(Ordering::Acquire))
    }

    /// `deleteExpiredFile` for a queue: drops the oldest files whose last entry points below
    /// `min_phy` (the commit log's new min offset), never the last file, then moves the min
    /// queue offset. Returns how many files went.
    pub(crate) fn delete_expired(&self, min_phy: u64) -> Result<usize, CommitLogError> {
        let deleted = self.files.delete_oldest(usize::MAX, |f| {
            f.readable(0)
                .chunks_exact(CQ_ENTRY_SIZE)
                .next_back()
                .is_some_and(|e| (CqEntry::decode(e).commitlog_offset as u64) < min_phy)
        })?;
        self.correct_min_offset(min_phy);
        Ok(deleted.len())
    }

    /// RocketMQ's `correctMinOffset`: the min queue offset becomes the first entry pointing at
    /// or past `min_phy`, or the queue's end when none does. Entries are in commit log order,
    /// so only the first file is looked at; each new `min_phy` is looked at once.
    pub(crate) fn correct_min_offset(&self, min_phy: u64) {
        if min_phy == 0 || self.corrected_for.swap(min_phy, Ordering::AcqRel) == min_phy {
            return;
        }
        let Some(first) = self.files.first() else {
            return;
        };
        let raw = first.readable(0);
        let index = raw
            .chunks_exact(CQ_ENTRY_SIZE)
            .position(|e| {
                let e = CqEntry::decode(e);
                !e.is_empty() && e.commitlog_offset as u64 >= min_phy
            })
            .unwrap_or(raw.len() / CQ_ENTRY_SIZE);
        let min = (first.start() / CQ_ENTRY_SIZE as u64) as i64 + index as i64;
        self.min_logic_offset.fetch_max(min, Ordering::AcqRel);
    }

    /// Writes the entry for `queue_offset`. Called only under the store's put lock.
    pub(crate) fn put(&self, queue_offset: i64, entry: CqEntry) -> Result<(), CommitLogError> {
        let pos = queue_offset as u64 * CQ_ENTRY_SIZE as u64;
        if self.files.first().is_some_and(|f| pos < f.start()) {
            // Older than anything kept: nothing reads it any more.
            return Ok(());
        }
        let file = match self.files.find(pos) {
            Some(f) => f,
            None => {
                let start = pos - pos % self.files.file_size() as u64;
                if let Some(last) = self.files.last() {
                    last.set_wrote(last.size());
                }
                let mut next = self.files.last().map_or(start, |f| f.end());
                loop {
                    let f = self.files.roll(next)?;
                    if f.start() == start {
                        break f;
                    }
                    f.set_wrote(f.size());
                    next = f.end();
                }
            }
        };
        let at = (pos - file.start()) as usize;
        file.ensure_allocated(at + CQ_ENTRY_SIZE)?;
        // SAFETY: the store's put lock is held, so this is the only writer; re-writing an
        // existing slot writes identical bytes for the same record.
        unsafe { file.writable(at, CQ_ENTRY_SIZE) }.copy_from_slice(&entry.encode());
        if at + CQ_ENTRY_SIZE > file.wrote() {
            file.set_wrote(at + CQ_ENTRY_SIZE);
        }
        Ok(())
    }

    /// Entries `[queue_offset, queue_offset + max)` that exist, with their queue offsets.
    pub(crate) fn get(&self, queue_offset: i64, max: usize) -> Vec<(i64, CqEntry)> {
        let mut out = Vec::new();
        let mut qo = queue_offset.max(self.min_queue_offset());
        while out.len() < max && qo < self.max_queue_offset() {
            let pos = qo as u64 * CQ_ENTRY_SIZE as u64;
            let Some(file) = self.files.find(pos) else {
                break;
            };
            let raw = file.readable((pos - file.start()) as usize);
            if raw.len() < CQ_ENTRY_SIZE {
                break;
            }
            for chunk in raw.chunks_exact(CQ_ENTRY_SIZE) {
                let entry = CqEntry::decode(chunk);
                if !entry.is_empty() {
                    out.push((qo, entry));
                }
                qo += 1;
                if out.len() == max {
                    break;
                }
            }
        }
        out
    }

    /// Removes entries pointing at or past `max_commitlog_offset` (after the commit log was
    /// truncated by recovery or repair).
    pub(crate) fn truncate_dirty(&self, max_commitlog_offset: u64) -> Result<(), CommitLogError> {
        loop {
            let Some(last) = self.files.last() else {
                return Ok(());
            };
            let used = last.readable(0);
            let keep = used
                .chunks_exact(CQ_ENTRY_SIZE)
                .rposition(|e| {
                    let e = CqEntry::decode(e);
                    !e.is_empty()
                        && (e.commitlog_offset as u64 + e.size as u64) <= max_commitlog_offset
                })
                .map_or(0, |i| (i + 1) * CQ_ENTRY_SIZE);
            if keep == used.len() {
                return Ok(());
            }
            // SAFETY: recovery runs before the store is shared, so there is no other writer.
            unsafe { last.zero_from(keep) };
            last.set_wrote(keep);
            if keep > 0 || self.files.files().len() == 1 {
                return Ok(());
            }
            self.files.delete_from(last.start())?;
        }
    }

    pub(crate) fn flush(&self) -> Result<(), CommitLogError> {
        for f in self.files.files() {
            if f.flushed() < f.wrote() {
                f.flush(f.wrote())?;
            }
        }
        Ok(())
    }
}

/// Every consume queue of a store, created on first dispatch.
pub(crate) struct ConsumeQueueTable {
    root: PathBuf,
    entries_per_file: usize,
    writable: bool,
    queues: RwLock<HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>>,
}

impl ConsumeQueueTable {
    /// Loads the queues under `<root>/consumequeue/<topic>/<queueId>/`.
    pub(crate) fn load(
        root: &Path,
        entries_per_file: usize,
        writable: bool,
    ) -> Result<Self, CommitLogError> {
        let table = Self {
            root: root.join("consumequeue"),
            entries_per_file,
            writable,
            queues: RwLock::new(HashMap::new()),
        };
        table.refresh()?;
        Ok(table)
    }

    /// Opens the queues under the root not open yet and, for a read-only table, brings the
    /// open ones up to what a live writer has added (new topics, files and entries).
    pub(crate) fn refresh(&self) -> Result<(), CommitLogError> {
        let Ok(topics) = std::fs::read_dir(&self.root) else {
            return Ok(());
        };
        for topic_dir in topics.flatten() {
            let topic = topic_dir.file_name().to_string_lossy().into_owned();
            let Ok(ids) = std::fs::read_dir(topic_dir.path()) else {
                continue;
            };
            for id_dir in ids.flatten() {
                let Ok(queue_id) = id_dir.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                if let Some(cq) = self.get(&topic, queue_id) {
                    if !self.writable {
                        cq.refresh()?;
                    }
                    continue;
                }
                let cq = ConsumeQueue::open(
                    &id_dir.path(),
                    &topic,
                    queue_id,
                    self.entries_per_file,
                    self.writable,
                )?;
                write(&self.queues)
                    .entry(topic.clone())
                    .or_default()
                    .insert(queue_id, Arc::new(cq));
            }
        }
        Ok(())
    }

    pub(crate) fn get(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        read(&self.queues).get(topic)?.get(&queue_id).cloned()
    }

    pub(crate) fn get_or_create(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Arc<ConsumeQueue>, CommitLogError> {
        if let Some(cq) = self.get(topic, queue_id) {
            return Ok(cq);
        }
        let dir = self.root.join(topic).join(queue_id.to_string());
        let cq = Arc::new(ConsumeQueue::open(
            &dir,
            topic,
            queue_id,
            self.entries_per_file,
            self.writable,
        )?);
        let mut queues = write(&self.queues);
        Ok(queues
            .entry(topic.to_owned())
            .or_default()
            .entry(queue_id)
            .or_insert(cq)
            .clone())
    }

    /// Forgets `topic`'s queues and deletes their files; the number of queues it had.
    pub(crate) fn remove(&self, topic: &str) -> Result<usize, CommitLogError> {
        let removed = write(&self.queues).remove(topic).map_or(0, |q| q.len());
        let dir = self.root.join(topic);
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CommitLogError::io(&dir, e)),
            _ => Ok(removed),
        }
    }

    pub(crate) fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        let queues = read(&self.queues);
        let mut all: Vec<_> = queues.values().flat_map(|m| m.values().cloned()).collect();
        all.sort_by(|a, b| (a.topic(), a.queue_id()).cmp(&(b.topic(), b.queue_id())));
        all
    }

    pub(crate) fn flush(&self) -> Result<(), CommitLogError> {
        self.all().iter().try_for_each(|cq| cq.flush())
    }
}
