//! The IndexService, as RocketMQ's: every message's `UNIQ_KEY` and each of its `KEYS` go into
//! index files under `index/`, named by their creation time, so a message is found by key
//! within a time range (`QUERY_MESSAGE`, `mqadmin queryMsgByKey`, `queryMsgByUniqueKey`).
//!
//! RocketMQ builds the index on its dispatch thread; here a service thread follows the commit
//! log on its own, so a put never waits for it, on a master and a slave alike. It rests until
//! the first put after a quiet spell wakes it. `indexcheckpoint` in the store's root holds the
//! commit log offset below which everything is indexed (written after the files are synced),
//! so an open resumes there instead of rescanning; RocketMQ's files and format are unchanged by
//! it. After a crash the last file is repaired: entries of a message the writer did not finish,
//! or past the recovered end of the log, are taken back chain by chain.

mod file;
#[cfg(test)]
mod tests;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::commitlog::record::{find_property, RecordView, PROPERTY_KEYS};
use crate::commitlog::CommitLog;
use crate::error::CommitLogError;
use crate::sync::{deadline_after, lock, read, wait_until, write, ServiceThread, Woke};

pub(crate) use file::key_hash;
use file::IndexFile;

/// `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`.
const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";
/// `MessageSysFlag.TRANSACTION_ROLLBACK_TYPE`: rolled back half messages are not indexed.
const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;
/// `maxMsgsNumBatch`: the most offsets one query returns.
pub(crate) const MAX_MSGS_NUM_BATCH: usize = 64;
/// Records indexed per hold of the files' lock, so a lookup never waits long behind a backlog.
const BATCH_RECORDS: usize = 4096;
/// How often new entries are synced and `indexcheckpoint` advanced.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// How long a lookup waits for the index to reach the messages already stored.
const CATCH_UP_WAIT: Duration = Duration::from_secs(1);
/// While puts flow, the service looks again this long after a pass that indexed something,
/// rather than being woken by each put: RocketMQ's reput, which builds its index, looks every
/// 1 ms. A wake-up per put cost a SYNC send a futex wake on the master and, on the slave,
/// one before its ack went out. A lookup wakes the service itself (`catch_up`).
const TRAILING: Duration = Duration::from_millis(1);

/// `messageIndexEnable`, `maxHashSlotNum`, `maxIndexNum`, with RocketMQ's defaults (a file is
/// 40 + 4 x slots + 20 x entries bytes, 420 MB sparse; the slots are reserved at creation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexConfig {
    pub enabled: bool,
    pub max_hash_slot_num: usize,
    pub max_index_num: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_hash_slot_num: 5_000_000,
            max_index_num: 5_000_000 * 4,
        }
    }
}

impl IndexConfig {
    pub(crate) fn validate(&self) -> Result<(), String> {
        let size = IndexFile::size(self.max_hash_slot_num, self.max_index_num);
        if self.max_hash_slot_num == 0 || self.max_index_num < 2 || size > i32::MAX as usize {
            return Err(format!(
                "maxHashSlotNum={} and maxIndexNum={} make an index file of {size} bytes: both \
                 must be positive (maxIndexNum at least 2) and the file under 2 GiB, as RocketMQ \
                 maps it with an int size",
                self.max_hash_slot_num, self.max_index_num
            ));
        }
        Ok(())
    }
}

/// A lookup by key, as QUERY_MESSAGE asks it: messages of `topic` indexed under `key` (a
/// unique key when `unique`) and stored in `[begin, end]` (ms), at most `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyQuery<'a> {
    pub topic: &'a str,
    pub key: &'a str,
    pub unique: bool,
    pub max: usize,
    pub begin: i64,
    pub end: i64,
}

/// What a lookup found: commit log offsets, oldest first, and how far the index had got.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueryOffsetResult {
    pub phy_offsets: Vec<i64>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phy_offset: i64,
}

pub(crate) struct IndexService {
    dir: PathBuf,
    checkpoint: PathBuf,
    config: IndexConfig,
    writable: bool,
    files: RwLock<Vec<IndexFile>>,
    /// Every record below this commit log offset is indexed.
    progress: Mutex<u64>,
    advanced: Condvar,
    /// The service found nothing to do and sleeps until a put wakes it.
    idle: AtomicBool,
    service: ServiceThread,
}

/// Index files are named by their creation time, `yyyyMMddHHmmssSSS` in local time.
fn file_name(millis: i64) -> String {
    let tm = crate::protocol::local_time(millis.div_euclid(1000));
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        millis.rem_euclid(1000)
    )
}

/// The keys a record is indexed under: its `UNIQ_KEY`, then each of its space-separated `KEYS`.
fn index_keys<'a>(r: &'a RecordView<'_>) -> impl Iterator<Item = std::borrow::Cow<'a, str>> {
    let uniq = find_property(r.properties, PROPERTY_UNIQ_KEY).map(String::from_utf8_lossy);
    let keys = find_property(r.properties, PROPERTY_KEYS)
        .into_iter()
        .flat_map(|k| k.split(|&b| b == b' '))
        .filter(|k| !k.is_empty())
        .map(String::from_utf8_lossy);
    uniq.into_iter().chain(keys)
}

/// True when the record at hand carries `key` under `topic`: as a unique key, or among its keys.
pub(crate) fn record_has_key(r: &RecordView<'_>, topic: &str, key: &str, unique: bool) -> bool {
    if r.topic != topic.as_bytes() {
        return false;
    }
    let uniq = find_property(r.properties, PROPERTY_UNIQ_KEY);
    if unique {
        return uniq == Some(key.as_bytes());
    }
    find_property(r.properties, PROPERTY_KEYS)
        .is_some_and(|keys| keys.split(|&b| b == b' ').any(|k| k == key.as_bytes()))
}

/// Takes back every entry at or past `offset`, newest file first, and deletes files left
/// empty (keeping one, so the next file still continues from its header).
fn cut_back(
    files: &mut Vec<IndexFile>,
    offset: u64,
    stamp_of: impl Fn(i64) -> Option<i64>,
) -> Result<(), CommitLogError> {
    for f in files.iter_mut().rev() {
        f.repair(offset as i64, &stamp_of)?;
        if !f.is_empty() {
            break;
        }
    }
    while files.len() > 1 && files.last().is_some_and(IndexFile::is_empty) {
        if let Some(f) = files.pop() {
            let path = f.path().to_owned();
            drop(f);
            std::fs::remove_file(&path).map_err(|e| CommitLogError::io(&path, e))?;
        }
    }
    Ok(())
}

impl IndexService {
    /// Maps the index files under `root/index`, oldest first. A writer removes what a crash
    /// left half-created.
    pub(crate) fn load(
        root: &Path,
        config: IndexConfig,
        writable: bool,
    ) -> Result<Self, CommitLogError> {
        let dir = root.join("index");
        let service = Self {
            files: RwLock::new(Vec::new()),
            checkpoint: root.join("indexcheckpoint"),
            config,
            writable,
            progress: Mutex::new(0),
            advanced: Condvar::new(),
            idle: AtomicBool::new(false),
            service: ServiceThread::background("index"),
            dir,
        };
        *write(&service.files) = service.open_files()?;
        Ok(service)
    }

    fn open_files(&self) -> Result<Vec<IndexFile>, CommitLogError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(CommitLogError::io(&self.dir, e)),
        };
        let mut paths = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| CommitLogError::io(&self.dir, e))?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.ends_with(".tmp") && self.writable {
                let _ = std::fs::remove_file(&path);
            } else if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
                paths.push(path);
            }
        }
        paths.sort();
        let (slots, capacity) = (self.config.max_hash_slot_num, self.config.max_index_num);
        paths
            .iter()
            .map(|p| IndexFile::open(p, slots, capacity, self.writable))
            .collect()
    }

    /// After the commit log's recovery: repairs the newest files against the log's end and
    /// picks where indexing resumes.
    pub(crate) fn recover(
        &self,
        log: &CommitLog,
        stamp_of: impl Fn(i64) -> Option<i64>,
    ) -> Result<(), CommitLogError> {
        let log_end = log.max_offset();
        let mut files = write(&self.files);
        cut_back(&mut files, log_end, &stamp_of)?;
        let saved = std::fs::read(&self.checkpoint)
            .ok()
            .and_then(|raw| Some(u64::from_be_bytes(raw.get(..8)?.try_into().ok()?)));
        let resume = match (saved, files.last().filter(|f| !f.is_empty())) {
            (Some(saved), _) => saved,
            // A store another broker wrote: resume after its last indexed message.
            (None, Some(last)) => {
                let end = last.header().end_phy_offset as u64;
                let mut iter = log.iter_from(end, false);
                iter.next();
                iter.offset().max(end)
            }
            (None, None) => 0,
        };
        *lock(&self.progress) = resume.max(log.min_offset()).min(log_end);
        Ok(())
    }

    /// Starts following the commit log.
    /// Indexes `log` as it grows, up to what consumers can read (`confirmed`: see
    /// [`super::confirm_offset::readable_end`]).
    pub(crate) fn start(
        self: &Arc<Self>,
        log: Arc<CommitLog>,
        confirmed: Arc<AtomicU64>,
    ) -> std::io::Result<()> {
        let me = self.clone();
        self.service
            .start(move |waiter| me.run(&log, &confirmed, &waiter))
    }

    /// A put published: wakes the service if it rests.
    pub(crate) fn published(&self) {
        if self.idle.swap(false, Ordering::AcqRel) {
            self.service.wakeup();
        }
    }

    fn progress(&self) -> u64 {
        *lock(&self.progress)
    }

    fn run(&self, log: &CommitLog, confirmed: &AtomicU64, waiter: &crate::sync::ServiceWaiter) {
        let end = || super::confirm_offset::readable_end(confirmed, log.max_offset());
        let mut last_flush = Instant::now();
        let mut dirty = false;
        loop {
            let built = self.build(log, &end);
            let (more, trailing) = match built {
                Ok(n) => {
                    dirty |= n > 0;
                    (n == BATCH_RECORDS, n > 0)
                }
                Err(ref e) => {
                    log::error!("building the index in {} failed: {e}", self.dir.display());
                    (false, false)
                }
            };
            // Before the backlog's next batch and the trailing wait: under puts that never
            // pause, the index is still synced every second.
            if dirty && (last_flush.elapsed() >= FLUSH_INTERVAL || waiter.is_stopped() && !more) {
                if let Err(e) = self.flush() {
                    log::error!("syncing the index in {} failed: {e}", self.dir.display());
                }
                dirty = false;
                last_flush = Instant::now();
            }
            if more {
                continue;
            }
            if waiter.is_stopped() {
                return;
            }
            if trailing {
                // Not idle: the puts of the next millisecond do not wake it.
                waiter.wait_for_running(deadline_after(TRAILING));
                continue;
            }
            // Rest, unless a put published before `idle` was set; a failing index retries on
            // the clock only, not on every put.
            if built.is_ok() {
                self.idle.store(true, Ordering::Release);
                if end() > self.progress() {
                    self.idle.store(false, Ordering::Release);
                    continue;
                }
            }
            if waiter.wait_for_running(deadline_after(FLUSH_INTERVAL)) == Woke::Stopped {
                // One last pass: what was stored before the stop is indexed before the close.
                continue;
            }
        }
    }

    /// Indexes up to [`BATCH_RECORDS`] records from the progress point, none that ends past
    /// `end()` (a record boundary, looked at for each record as puts go on); returns how many.
    fn build(&self, log: &CommitLog, end: &dyn Fn() -> u64) -> Result<usize, CommitLogError> {
        let mut files = write(&self.files);
        let from = self.progress().max(log.min_offset());
        let mut iter = log.iter_from(from, false);
        let mut done = from;
        let mut n = 0;
        let result = loop {
            if n == BATCH_RECORDS {
                break Ok(());
            }
            match iter.next() {
                None => {
                    done = iter.offset();
                    break Ok(());
                }
                Some(Ok(rec)) if rec.offset() + rec.view().total_size as u64 > end() => {
                    break Ok(())
                }
                Some(Ok(rec)) => match self.index_record(&mut files, &rec.view()) {
                    Ok(()) => {
                        n += 1;
                        done = iter.offset();
                    }
                    Err(e) => break Err(e),
                },
                Some(Err(e)) => break Err(e),
            }
        };
        let mut progress = lock(&self.progress);
        if done > *progress {
            *progress = done;
            self.advanced.notify_all();
        }
        result.map(|()| n)
    }

    /// `IndexService.buildIndex`: once per message (a message at or below the newest file's
    /// end was indexed whole before, the header being written after its last key).
    fn index_record(
        &self,
        files: &mut Vec<IndexFile>,
        r: &RecordView<'_>,
    ) -> Result<(), CommitLogError> {
        if r.sys_flag & TRANSACTION_ROLLBACK_TYPE == TRANSACTION_ROLLBACK_TYPE {
            return Ok(());
        }
        if let Some(last) = files.last().filter(|f| !f.is_empty()) {
            if r.physical_offset <= last.header().end_phy_offset {
                return Ok(());
            }
        }
        let topic = String::from_utf8_lossy(r.topic);
        let mut touched = false;
        for key in index_keys(r) {
            let hash = key_hash(&topic, &key);
            if !self
                .writable_file(files)?
                .put_key(hash, r.physical_offset, r.store_timestamp)?
            {
                let full = files.len() - 1;
                files[full].persist_header();
                files[full].flush()?;
                self.create_file(files)?
                    .put_key(hash, r.physical_offset, r.store_timestamp)?;
            }
            touched = true;
        }
        if touched {
            if let Some(last) = files.last() {
                last.persist_header();
            }
        }
        Ok(())
    }

    fn writable_file<'a>(
        &self,
        files: &'a mut Vec<IndexFile>,
    ) -> Result<&'a mut IndexFile, CommitLogError> {
        if files.is_empty() {
            return self.create_file(files);
        }
        let last = files.len() - 1;
        Ok(&mut files[last])
    }

    /// `getAndCreateLastIndexFile`: a new file continuing from the newest one.
    fn create_file<'a>(
        &self,
        files: &'a mut Vec<IndexFile>,
    ) -> Result<&'a mut IndexFile, CommitLogError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| CommitLogError::io(&self.dir, e))?;
        let (end_phy, end_ts) = files.last().map_or((0, 0), |f| {
            (f.header().end_phy_offset, f.header().end_timestamp)
        });
        let mut millis = crate::protocol::now_millis();
        // Two files in one millisecond (a tiny maxIndexNum) still get names in order.
        let mut path = self.dir.join(file_name(millis));
        while path.exists() || files.last().is_some_and(|f| f.path() >= path.as_path()) {
            millis += 1;
            path = self.dir.join(file_name(millis));
        }
        let file = IndexFile::create(
            path,
            self.config.max_hash_slot_num,
            self.config.max_index_num,
            end_phy,
            end_ts,
        )?;
        files.push(file);
        let last = files.len() - 1;
        Ok(&mut files[last])
    }

    /// Syncs the files, then records the progress they cover.
    fn flush(&self) -> Result<(), CommitLogError> {
        let progress = self.progress();
        if let Some(last) = read(&self.files).last() {
            last.flush()?;
        }
        std::fs::File::create(&self.checkpoint)
            .and_then(|f| {
                f.write_all_at(&progress.to_be_bytes(), 0)
                    .and_then(|()| f.sync_data())
            })
            .map_err(|e| CommitLogError::io(&self.checkpoint, e))
    }

    /// Waits (briefly) until everything below `offset` is indexed, so a message acknowledged
    /// before a lookup is found by it.
    pub(super) fn catch_up(&self, offset: u64) {
        if !self.writable || self.progress() >= offset {
            return;
        }
        self.service.wakeup();
        let _ = wait_until(
            &self.advanced,
            lock(&self.progress),
            deadline_after(CATCH_UP_WAIT),
            |p| *p >= offset || self.service.is_stopped(),
        );
    }

    /// `IndexService.queryOffset`: offsets of messages indexed under `topic#key` and stored in
    /// `[begin, end]`, newest files first, at most `max` (and [`MAX_MSGS_NUM_BATCH`]).
    pub(crate) fn query_offsets(
        &self,
        q: &KeyQuery<'_>,
    ) -> Result<QueryOffsetResult, CommitLogError> {
        let (max, begin, end) = (q.max.min(MAX_MSGS_NUM_BATCH), q.begin, q.end);
        let hash = key_hash(q.topic, q.key);
        let mut result = QueryOffsetResult::default();
        // A reader of a live store maps the files as they are now.
        let fresh;
        let guard;
        let files: &[IndexFile] = if self.writable {
            guard = read(&self.files);
            &guard
        } else {
            fresh = self.open_files()?;
            &fresh
        };
        if let Some(last) = files.last() {
            result.index_last_update_timestamp = last.header().end_timestamp;
            result.index_last_update_phy_offset = last.header().end_phy_offset;
        }
        for f in files.iter().rev() {
            if f.is_time_matched(begin, end) {
                f.select(hash, max, begin, end, &mut result.phy_offsets);
            }
            if f.header().begin_timestamp < begin || result.phy_offsets.len() >= max {
                break;
            }
        }
        result.phy_offsets.sort_unstable();
        result.phy_offsets.dedup();
        Ok(result)
    }

    /// Takes back every entry at or past `offset` (a slave cutting its log back).
    pub(crate) fn truncate(
        &self,
        offset: u64,
        stamp_of: impl Fn(i64) -> Option<i64>,
    ) -> Result<(), CommitLogError> {
        cut_back(&mut write(&self.files), offset, &stamp_of)?;
        let mut progress = lock(&self.progress);
        *progress = (*progress).min(offset);
        Ok(())
    }

    /// `deleteExpiredFile`: files whose every entry points below the commit log's new min
    /// offset go, never the newest. Returns the paths deleted.
    pub(crate) fn delete_expired(&self, min_offset: u64) -> Vec<PathBuf> {
        let mut files = write(&self.files);
        let expired = files
            .iter()
            .take(files.len().saturating_sub(1))
            .take_while(|f| (f.header().end_phy_offset as u64) < min_offset)
            .count();
        let mut deleted = Vec::new();
        for f in files.drain(..expired) {
            let path = f.path().to_owned();
            drop(f);
            match std::fs::remove_file(&path) {
                Ok(()) => deleted.push(path),
                Err(e) => log::error!("deleting {} failed: {e}", path.display()),
            }
        }
        deleted
    }

    /// Indexes what was stored, syncs and records the progress; the store's close.
    pub(crate) fn shutdown(&self) {
        self.service.shutdown();
    }

    pub(crate) fn file_paths(&self) -> Vec<PathBuf> {
        read(&self.files)
            .iter()
            .map(|f| f.path().to_owned())
            .collect()
    }
}
