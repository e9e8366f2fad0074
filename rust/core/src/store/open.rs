//! Opening a store, as RocketMQ's `DefaultMessageStore.load` and `recover` do: the `lock`
//! file, the `checkpoint`, recovery of the commit log and its consume queues, the start of the
//! flush, group-transfer and retention services; and the read-only open, which scans instead
//! of recovering and re-scans on `refresh`.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::commitlog::flush::FlushService;
use crate::commitlog::recover::RecoveryReport;
use crate::commitlog::CommitLog;
use crate::consume_queue::ConsumeQueueTable;
use crate::error::CommitLogError;
use crate::sync::lock;

use super::checkpoint::{read_checkpoint, write_checkpoint};
use super::clean::Retention;
use super::group_transfer::GroupTransferService;
use super::index::IndexService;
use super::schedule::ScheduleMessageService;
use super::timer::TimerMessageStore;
use super::{MessageStore, PutState, StoreConfig};

fn lock_store(root: &Path) -> Result<File, CommitLogError> {
    let path = root.join("lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| CommitLogError::io(&path, e))?;
    // SAFETY: flock on an fd we own; released when the file closes.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(CommitLogError::Locked {
            path: root.to_owned(),
        });
    }
    Ok(file)
}

/// The store's delay levels; their offsets are loaded by a writable open only.
fn schedule_of(config: &StoreConfig) -> ScheduleMessageService {
    ScheduleMessageService::new(
        &config.root,
        config.message_delay_level.clone(),
        config.flush_delay_offset_interval,
    )
}

impl MessageStore {
    pub fn open(config: StoreConfig) -> Result<Self, CommitLogError> {
        config.clean.validate().map_err(CommitLogError::Config)?;
        config.index.validate().map_err(CommitLogError::Config)?;
        config
            .timer
            .validate()
            .map_err(|(key, e)| CommitLogError::Config(format!("{key}: {e}")))?;
        if config.read_only {
            return Self::open_read_only(config);
        }
        std::fs::create_dir_all(&config.root).map_err(|e| CommitLogError::io(&config.root, e))?;
        let lock_file = lock_store(&config.root)?;
        let abort = config.root.join("abort");
        let crashed = abort.exists();
        let commit_log = Arc::new(CommitLog::open(
            &config.commit_log_dir(),
            config.mapped_file_size,
            true,
            config.store_host,
            config.accept_zero_body_crc,
        )?);
        let recovery = commit_log.recover(
            crashed,
            read_checkpoint(&config.root),
            config.truncate_at_corruption,
        )?;
        let consume_queues = Arc::new(ConsumeQueueTable::load(
            &config.root,
            config.cq_entries_per_file,
            true,
        )?);
        for cq in consume_queues.all() {
            cq.truncate_dirty(recovery.max_offset)?;
            cq.correct_min_offset(commit_log.min_offset());
        }
        File::create(&abort).map_err(|e| CommitLogError::io(&abort, e))?;
        let schedule = schedule_of(&config);
        schedule.load()?;
        let timer = config
            .timer
            .enable
            .then(|| TimerMessageStore::open(&config.root, config.timer.clone()))
            .transpose()?;
        let index = config
            .index
            .enabled
            .then(|| IndexService::load(&config.root, config.index.clone(), true))
            .transpose()?
            .map(Arc::new);

        let store = Self {
            commit_log: commit_log.clone(),
            consume_queues: consume_queues.clone(),
            put: Mutex::new(PutState {
                queues: FxHashMap::default(),
                reput_offset: recovery.scanned_from.max(commit_log.min_offset()),
                confirm: None,
            }),
            flush: OnceLock::new(),
            group_transfer: OnceLock::new(),
            listener: RwLock::new(None),
            arriving: RwLock::default(),
            recovery,
            confirmed: Arc::new(AtomicU64::new(u64::MAX)),
            scan_error: Mutex::new(None),
            corruption: OnceLock::new(),
            lock_file: Mutex::new(Some(lock_file)),
            closed: AtomicBool::new(false),
            retention: OnceLock::new(),
            schedule,
            timer,
            index,
            config,
        };
        {
            let mut st = store.lock_put();
            for cq in consume_queues.all() {
                let next = cq.max_queue_offset();
                st.queues
                    .entry(cq.topic().to_owned())
                    .or_default()
                    .insert(cq.queue_id(), (next, cq));
            }
            // Replays records the consume queues may miss after a crash (idempotent).
            store.dispatch_until(&mut st, u64::MAX)?;
        }
        store.start_index()?;
        store.start_services();
        Ok(store)
    }

    /// Repairs the index against the recovered log and starts following it.
    fn start_index(&self) -> Result<(), CommitLogError> {
        let Some(index) = &self.index else {
            return Ok(());
        };
        index.recover(&self.commit_log, |o| self.store_timestamp_at(o))?;
        index
            .start(self.commit_log.clone(), self.confirmed.clone())
            .map_err(|e| CommitLogError::io(&self.config.root, e))
    }

    /// Starts the flush thread, the GroupTransferService it reports every msync to, and the
    /// retention thread.
    fn start_services(&self) {
        let retention = Arc::new(Retention::new(
            self.config.clean.clone(),
            self.config.commit_log_dir(),
            self.index.clone(),
        ));
        retention.start(self.commit_log.clone(), self.consume_queues.clone());
        let _ = self.retention.set(retention);
        let flushed = self.commit_log.max_offset();
        let root = self.config.root.clone();
        let (log, cqs) = (self.commit_log.clone(), self.consume_queues.clone());
        let mut last_cq_flush = Instant::now();
        let flush_fn = Box::new(move || {
            let target = log.max_offset();
            for f in log.files().files() {
                let wrote = f.wrote();
                if f.flushed() < wrote {
                    f.flush(wrote)?;
                }
            }
            // Consume queues can be rebuilt from the log, so they flush on RocketMQ's slower
            // cadence rather than with every group commit.
            if last_cq_flush.elapsed() >= Duration::from_secs(1) {
                cqs.flush()?;
                write_checkpoint(&root, target)?;
                last_cq_flush = Instant::now();
            }
            Ok(target)
        });
        let group_transfer = Arc::new(GroupTransferService::start(
            self.config.wait_policy(),
            flushed,
        ));
        let on_flushed = group_transfer.clone();
        let path = self.config.commit_log_dir();
        let listener = Box::new(move |result: Result<u64, &CommitLogError>| match result {
            Ok(offset) => on_flushed.on_flushed(Ok(offset)),
            Err(e) => {
                log::error!("flushing {} failed: {e}", path.display());
                on_flushed.on_flushed(Err(()));
            }
        });
        let _ = self.group_transfer.set(group_transfer);
        let _ = self.flush.set(FlushService::start(
            self.config.flush_interval,
            flush_fn,
            flushed,
            listener,
        ));
    }

    fn open_read_only(config: StoreConfig) -> Result<Self, CommitLogError> {
        if !config.commit_log_dir().is_dir() {
            return Err(CommitLogError::io(
                config.commit_log_dir(),
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not a rocketha store: no commitlog directory",
                ),
            ));
        }
        let commit_log = Arc::new(CommitLog::open(
            &config.commit_log_dir(),
            config.mapped_file_size,
            false,
            config.store_host,
            config.accept_zero_body_crc,
        )?);
        let consume_queues = Arc::new(ConsumeQueueTable::load(
            &config.root,
            config.cq_entries_per_file,
            false,
        )?);
        let store = Self {
            commit_log,
            consume_queues,
            put: Mutex::new(PutState {
                queues: FxHashMap::default(),
                reput_offset: 0,
                confirm: None,
            }),
            flush: OnceLock::new(),
            group_transfer: OnceLock::new(),
            listener: RwLock::new(None),
            arriving: RwLock::default(),
            recovery: RecoveryReport::default(),
            confirmed: Arc::new(AtomicU64::new(u64::MAX)),
            scan_error: Mutex::new(None),
            corruption: OnceLock::new(),
            lock_file: Mutex::new(None),
            closed: AtomicBool::new(false),
            retention: OnceLock::new(),
            schedule: schedule_of(&config),
            timer: None,
            index: Some(Arc::new(IndexService::load(
                &config.root,
                config.index.clone(),
                false,
            )?)),
            config,
        };
        store.scan(true)?;
        Ok(store)
    }

    /// Read-only stores: picks up what a live writer appended since the last look, up to its
    /// last complete valid record, and the consume queues with it. Returns the new max offset.
    pub fn refresh(&self) -> Result<u64, CommitLogError> {
        // Queues first: the writer dispatches a record only after appending it, so every
        // entry seen here points at bytes the commit log scan that follows will find.
        self.consume_queues.refresh()?;
        // The writer's retention deleted the oldest segments: the min offset moves here too.
        self.commit_log.files().forget_deleted_segments();
        let max = self.scan(false)?;
        for cq in self.consume_queues.all() {
            cq.correct_min_offset(self.commit_log.min_offset());
        }
        Ok(max)
    }

    /// [`Self::refresh`]; `at_open` also tells mid-log corruption from a torn tail, as a
    /// writable open would (once: the look-ahead reads the rest of the log).
    fn scan(&self, at_open: bool) -> Result<u64, CommitLogError> {
        let files = self.commit_log.files();
        files.map_new_segments()?;
        let all = files.files();
        if all.is_empty() {
            return Ok(0);
        }
        // Resume from the last segment holding data; a fresh open validates the last three
        // segments, as recovery does (which also covers a preallocated, still empty last one).
        let from = all
            .iter()
            .rposition(|f| f.wrote() > 0 && !f.is_full())
            .unwrap_or(all.len().saturating_sub(3));
        let pos = all[from].wrote() % all[from].size().max(1);
        let pos = if all[from].is_full() { 0 } else { pos };
        let accept_zero = self.config.accept_zero_body_crc;
        let scan = self.commit_log.scan_valid(&all, from, pos, accept_zero);
        if let (true, Some(error)) = (at_open, scan.error.clone()) {
            let found = self
                .commit_log
                .mid_log_corruption(&all, scan.index, scan.pos, error);
            // A live writer's record still in flight is no corruption: it is valid by now.
            let settled = || {
                self.commit_log
                    .scan_valid(&all, scan.index, scan.pos, accept_zero)
                    .records
                    == 0
            };
            if let Some(found) = found.filter(|_| settled()) {
                let _ = self.corruption.set(found);
            }
        }
        *lock(&self.scan_error) = scan.error.clone();
        for (i, f) in all.iter().enumerate().skip(from) {
            f.set_wrote(match i.cmp(&scan.index) {
                std::cmp::Ordering::Less => f.size(),
                std::cmp::Ordering::Equal => scan.pos,
                std::cmp::Ordering::Greater => 0,
            });
        }
        Ok(self.commit_log.max_offset())
    }
}
