//! Retention, as RocketMQ's `DefaultMessageStore` does it: `CleanCommitLogService` deletes old
//! commit log segments, `CleanConsumeQueueService` the consume queue files that point only
//! below the new min offset, both every `cleanResourceInterval` on one thread.
//!
//! A segment is deleted once it is older than `fileReservedTime` hours (by its last write), at
//! a `deleteWhen` hour, or at any hour once the disk is more than `diskMaxUsedSpaceRatio` %
//! used; past `diskSpaceCleanForciblyRatio` % the oldest go even unexpired; past
//! `diskSpaceWarningLevelRatio` % puts are refused (RocketMQ's disk-full flag, answered
//! SERVICE_NOT_AVAILABLE) until cleaning brings the disk below the forcible ratio again. The
//! segment being written is never deleted, and at most `deleteFileBatchMax` go per pass.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::commitlog::CommitLog;
use crate::consume_queue::ConsumeQueueTable;
use crate::error::CommitLogError;
use crate::sync::{deadline_after, lock, EventQueue, ServiceThread, Woke};

use super::index::IndexService;

/// RocketMQ's retention keys, with its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanConfig {
    /// `deleteWhen`: the local hours (`"04"`, `"04;10"`) at which expired segments go.
    pub delete_when: Vec<u32>,
    /// `fileReservedTime`: hours a segment is kept after its last write.
    pub file_reserved_time: u64,
    /// How long one `fileReservedTime` hour is. Tests only: an hour everywhere else.
    pub hour: Duration,
    /// `diskMaxUsedSpaceRatio` (%): past it, expired segments go at any hour.
    pub disk_max_used_space_ratio: u32,
    /// `diskSpaceCleanForciblyRatio` (%): past it, the oldest go even unexpired.
    pub disk_space_clean_forcibly_ratio: u32,
    /// `diskSpaceWarningLevelRatio` (%): past it, puts are refused.
    pub disk_space_warning_level_ratio: u32,
    /// `cleanResourceInterval`: time between passes.
    pub clean_resource_interval: Duration,
    /// `deleteFileBatchMax`: most segments deleted in one pass.
    pub delete_file_batch_max: usize,
}

impl Default for CleanConfig {
    fn default() -> Self {
        Self {
            delete_when: vec![4],
            file_reserved_time: 72,
            hour: Duration::from_secs(3600),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            disk_space_warning_level_ratio: 90,
            clean_resource_interval: Duration::from_millis(10_000),
            delete_file_batch_max: 10,
        }
    }
}

impl CleanConfig {
    /// `deleteWhen` as RocketMQ reads it: hours of the day separated by `;`.
    pub(crate) fn parse_delete_when(text: &str) -> Result<Vec<u32>, String> {
        text.split(';')
            .map(|h| match h.trim().parse::<u32>() {
                Ok(hour) if hour < 24 => Ok(hour),
                _ => Err(format!(
                    "deleteWhen {text:?}: {h:?} is not an hour of the day (0-23); \
                     write hours separated by ';', e.g. \"04\" or \"04;10\""
                )),
            })
            .collect()
    }

    /// Checks every key, naming the one that is wrong.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.delete_when.is_empty() || self.delete_when.iter().any(|&h| h >= 24) {
            return Err(format!(
                "deleteWhen {:?} must list hours of the day (0-23)",
                self.delete_when
            ));
        }
        for (key, ratio) in [
            ("diskMaxUsedSpaceRatio", self.disk_max_used_space_ratio),
            (
                "diskSpaceCleanForciblyRatio",
                self.disk_space_clean_forcibly_ratio,
            ),
            (
                "diskSpaceWarningLevelRatio",
                self.disk_space_warning_level_ratio,
            ),
        ] {
            if ratio > 100 {
                return Err(format!("{key} {ratio} is not a percentage (0-100)"));
            }
        }
        if self.clean_resource_interval.is_zero() {
            return Err("cleanResourceInterval must be a positive number of milliseconds".into());
        }
        if self.delete_file_batch_max == 0 {
            return Err("deleteFileBatchMax must be at least 1".into());
        }
        if self.hour.is_zero() {
            return Err("the fileReservedTime unit must be positive".into());
        }
        Ok(())
    }

    /// The three ratios as fractions, clamped to the ranges RocketMQ clamps them to (its
    /// getters do so silently; so do we, and the README says so).
    fn thresholds(&self) -> (f64, f64, f64) {
        let pct = |r: u32, lo: u32, hi: u32| f64::from(r.clamp(lo, hi)) / 100.0;
        (
            pct(self.disk_max_used_space_ratio, 10, 95),
            pct(self.disk_space_clean_forcibly_ratio, 30, 85),
            pct(self.disk_space_warning_level_ratio, 35, 90),
        )
    }

    fn reserved(&self) -> Duration {
        self.hour
            .checked_mul(u32::try_from(self.file_reserved_time).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX)
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default)]
pub struct CleanReport {
    /// The disk use of the commit log's filesystem that the pass acted on (0.0-1.0).
    pub disk_used_ratio: f64,
    /// Commit log segments deleted, oldest first.
    pub commit_log_deleted: Vec<PathBuf>,
    /// Consume queue files deleted.
    pub consume_queue_deleted: usize,
}

/// One line for the log: (is it a problem, text).
pub(crate) type CleanEvent = (bool, String);

/// Retention's log lines, for an observer that must not keep the store open (the Python
/// wrapper's logging thread holds this, not the store).
pub struct CleanEvents(Arc<Retention>);

impl CleanEvents {
    pub(crate) fn new(retention: Arc<Retention>) -> Self {
        Self(retention)
    }

    /// Waits up to `timeout` for lines and returns the queued ones; `None` once the store
    /// closed and every line was taken.
    pub fn next(&self, timeout: Duration) -> Option<Vec<CleanEvent>> {
        let events = self.0.events.drain(timeout);
        (!events.is_empty() || !self.0.events.is_closed()).then_some(events)
    }

    /// Ends the observer's waits now (at interpreter exit) instead of at the store's close.
    pub fn close(&self) {
        self.0.events.close();
    }
}

/// The state puts and the cleaning thread share.
pub(crate) struct Retention {
    config: CleanConfig,
    /// The commit log directory, whose filesystem's use is measured.
    dir: PathBuf,
    /// RocketMQ's `runningFlags` disk-full bit: set past the warning ratio, cleared once the
    /// disk is back below the forcible ratio. Puts read it.
    disk_full: AtomicBool,
    /// The disk use a pass last measured, as f64 bits, for the refusal's message.
    last_ratio: AtomicU64,
    /// Tests only: a disk use to act on instead of the filesystem's, as f64 bits; NaN for none.
    fake_ratio: AtomicU64,
    /// `CleanConsumeQueueService.lastPhysicalMinOffset`: queues are cleaned when it moves.
    last_physical_min_offset: AtomicU64,
    /// Index files go once every entry of theirs points below the min offset.
    index: Option<Arc<IndexService>>,
    /// A reader that must see every record first (the table tier): no segment holding records
    /// at or past this commit log offset is deleted, whatever its age or the disk's use.
    /// `u64::MAX`: none.
    keep_from: AtomicU64,
    /// One pass at a time: the thread's and an explicit [`crate::store::MessageStore::clean_now`].
    pass: Mutex<()>,
    /// CleanCommitLogService's thread: a pass every `cleanResourceInterval`.
    service: ServiceThread,
    events: EventQueue<CleanEvent>,
}

impl Retention {
    pub(crate) fn new(config: CleanConfig, dir: PathBuf, index: Option<Arc<IndexService>>) -> Self {
        Self {
            config,
            dir,
            index,
            disk_full: AtomicBool::new(false),
            last_ratio: AtomicU64::new(0f64.to_bits()),
            fake_ratio: AtomicU64::new(f64::NAN.to_bits()),
            last_physical_min_offset: AtomicU64::new(0),
            keep_from: AtomicU64::new(u64::MAX),
            pass: Mutex::new(()),
            service: ServiceThread::background("clean"),
            events: EventQueue::default(),
        }
    }

    /// A put's check: refused while the disk-full flag is up, as RocketMQ refuses it when its
    /// store is not writeable.
    pub(crate) fn check_put(&self) -> Result<(), CommitLogError> {
        if !self.disk_full.load(Ordering::Acquire) {
            return Ok(());
        }
        let (_, forcibly, warning) = self.config.thresholds();
        Err(CommitLogError::DiskFull {
            path: self.dir.clone(),
            used: f64::from_bits(self.last_ratio.load(Ordering::Acquire)) * 100.0,
            warning: warning * 100.0,
            forcibly: forcibly * 100.0,
        })
    }

    pub(crate) fn set_fake_disk_used_ratio(&self, ratio: Option<f64>) {
        let bits = ratio.unwrap_or(f64::NAN).to_bits();
        self.fake_ratio.store(bits, Ordering::Release);
    }

    /// See `keep_from`; `None` lifts it.
    pub(crate) fn set_keep_from(&self, offset: Option<u64>) {
        self.keep_from
            .store(offset.unwrap_or(u64::MAX), Ordering::Release);
    }

    fn say(&self, problem: bool, text: String) {
        if problem {
            log::warn!("{text}");
        } else {
            log::info!("{text}");
        }
        self.events.push((problem, text));
    }

    /// Used share of the filesystem holding the commit log, as RocketMQ's
    /// `getDiskPartitionSpaceUsedPercent` measures it: (total - free) / total.
    fn disk_used_ratio(&self) -> Result<f64, CommitLogError> {
        let fake = f64::from_bits(self.fake_ratio.load(Ordering::Acquire));
        if !fake.is_nan() {
            return Ok(fake);
        }
        disk_used_ratio(&self.dir)
    }

    /// RocketMQ's `isSpaceToDelete`: whether the disk asks for a pass (and a forcible one),
    /// raising or lowering the disk-full flag on the way.
    fn space_to_delete(&self, ratio: f64) -> (bool, bool) {
        let (max_used, forcibly, warning) = self.config.thresholds();
        self.last_ratio.store(ratio.to_bits(), Ordering::Release);
        let pct = ratio * 100.0;
        if ratio > warning {
            if !self.disk_full.swap(true, Ordering::AcqRel) {
                self.say(
                    true,
                    format!(
                        "disk of {} is {pct:.1}% used, past diskSpaceWarningLevelRatio {:.0}%: \
                         puts are refused (SERVICE_NOT_AVAILABLE) and the oldest commit log \
                         segments deleted until it is below diskSpaceCleanForciblyRatio {:.0}%",
                        self.dir.display(),
                        warning * 100.0,
                        forcibly * 100.0
                    ),
                );
            }
            return (true, true);
        }
        if ratio > forcibly {
            return (true, true);
        }
        if self.disk_full.swap(false, Ordering::AcqRel) {
            self.say(
                false,
                format!(
                    "disk of {} is {pct:.1}% used, below diskSpaceCleanForciblyRatio {:.0}%: \
                     puts are accepted again",
                    self.dir.display(),
                    forcibly * 100.0
                ),
            );
        }
        (ratio > max_used, false)
    }

    /// One pass of `CleanCommitLogService` then `CleanConsumeQueueService`.
    pub(crate) fn run_pass(
        &self,
        log: &CommitLog,
        queues: &ConsumeQueueTable,
    ) -> Result<CleanReport, CommitLogError> {
        let _one = lock(&self.pass);
        let ratio = self.disk_used_ratio()?;
        let (space, forcibly) = self.space_to_delete(ratio);
        let time_up = self.config.delete_when.contains(&local_hour());
        let mut report = CleanReport {
            disk_used_ratio: ratio,
            ..CleanReport::default()
        };
        if time_up || space {
            report.commit_log_deleted = self.delete_expired_segments(log, forcibly)?;
            if report.commit_log_deleted.is_empty() && space {
                self.say(
                    true,
                    format!(
                        "disk of {} is {:.1}% used, but no commit log segment could be deleted \
                         (only the one being written is left, or none is older than \
                         fileReservedTime {} h)",
                        self.dir.display(),
                        ratio * 100.0,
                        self.config.file_reserved_time
                    ),
                );
            }
        }
        report.consume_queue_deleted = self.clean_consume_queues(log, queues)?;
        Ok(report)
    }

    /// `CommitLog.deleteExpiredFile`: the oldest segments past `fileReservedTime` (any of the
    /// oldest when `forcibly`), stopping at the first one kept so none is deleted from the
    /// middle of the log.
    fn delete_expired_segments(
        &self,
        log: &CommitLog,
        forcibly: bool,
    ) -> Result<Vec<PathBuf>, CommitLogError> {
        let now = SystemTime::now();
        let reserved = self.config.reserved();
        let keep_from = self.keep_from.load(Ordering::Acquire);
        let mut error = None;
        let mut kept_for_reader = None;
        let deleted = log
            .files()
            .delete_oldest(self.config.delete_file_batch_max, |f| {
                if f.end() > keep_from {
                    kept_for_reader = Some(f.start());
                    return false;
                }
                forcibly
                    || match f.last_modified() {
                        Ok(at) => now.duration_since(at).is_ok_and(|age| age >= reserved),
                        Err(e) => {
                            error = Some(e);
                            false
                        }
                    }
            })?;
        if let Some(e) = error {
            self.say(true, format!("retention skipped a segment: {e}"));
        }
        if let Some(start) = kept_for_reader.filter(|_| forcibly) {
            self.say(
                true,
                format!(
                    "the disk is past diskSpaceCleanForciblyRatio, but the commit log segment at \
                     {start} is kept: the table tier has written only up to offset {keep_from}"
                ),
            );
        }
        if let (Some(first), Some(last)) = (deleted.first(), deleted.last()) {
            self.say(
                false,
                format!(
                    "CleanCommitLogService deleted {} commit log segment(s) {} .. {}{}; min \
                     offset now {}",
                    deleted.len(),
                    first.display(),
                    last.display(),
                    if forcibly {
                        " forcibly (disk past diskSpaceCleanForciblyRatio)"
                    } else {
                        ""
                    },
                    log.min_offset()
                ),
            );
        }
        Ok(deleted)
    }

    /// `CleanConsumeQueueService`: once the commit log's min offset moved, every queue drops
    /// the files whose entries all point below it and moves its min queue offset.
    fn clean_consume_queues(
        &self,
        log: &CommitLog,
        queues: &ConsumeQueueTable,
    ) -> Result<usize, CommitLogError> {
        let min = log.min_offset();
        if min <= self.last_physical_min_offset.load(Ordering::Acquire) {
            return Ok(0);
        }
        let mut deleted = 0;
        for cq in queues.all() {
            deleted += cq.delete_expired(min)?;
        }
        if let Some(index) = &self.index {
            let gone = index.delete_expired(min);
            if let (Some(first), Some(last)) = (gone.first(), gone.last()) {
                self.say(
                    false,
                    format!(
                        "deleted {} index file(s) {} .. {}: every message they point at is gone",
                        gone.len(),
                        first.display(),
                        last.display()
                    ),
                );
            }
        }
        self.last_physical_min_offset.store(min, Ordering::Release);
        Ok(deleted)
    }

    /// Runs passes every `cleanResourceInterval` until [`Self::stop`]; a failed pass is
    /// logged and the next one tries again.
    pub(crate) fn start(self: &Arc<Self>, log: Arc<CommitLog>, queues: Arc<ConsumeQueueTable>) {
        let me = self.clone();
        // Without its thread the store still runs; retention then runs only on `clean_now`.
        let _ = self.service.start(move |waiter| {
            let interval = me.config.clean_resource_interval;
            while waiter.wait_for_running(deadline_after(interval)) != Woke::Stopped {
                if let Err(e) = me.run_pass(&log, &queues) {
                    me.say(true, format!("retention pass failed: {e}"));
                }
            }
        });
    }

    /// Ends the thread, after the pass it may be running.
    pub(crate) fn stop(&self) {
        self.service.shutdown();
        self.events.close();
    }
}

pub(crate) fn disk_used_ratio(dir: &Path) -> Result<f64, CommitLogError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| {
        CommitLogError::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "path holds a NUL byte"),
        )
    })?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid C string and a buffer statvfs fills in when it returns 0.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(CommitLogError::io(dir, std::io::Error::last_os_error()));
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    if st.f_blocks == 0 {
        return Ok(0.0);
    }
    Ok((st.f_blocks - st.f_bfree) as f64 / st.f_blocks as f64)
}

/// The local hour of the day, which `deleteWhen` names (RocketMQ's `isItTimeToDo`).
fn local_hour() -> u32 {
    crate::protocol::local_time(crate::protocol::now_millis() / 1000).tm_hour as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_when_is_hours_separated_by_semicolons() {
        assert_eq!(CleanConfig::parse_delete_when("04").unwrap(), vec![4]);
        assert_eq!(
            CleanConfig::parse_delete_when("04;10").unwrap(),
            vec![4, 10]
        );
        for bad in ["", "4am", "24", "04;", "-1"] {
            let e = CleanConfig::parse_delete_when(bad).unwrap_err();
            assert!(e.contains("deleteWhen"), "{e}");
        }
    }

    #[test]
    fn ratios_are_percentages_clamped_as_rocketmq_does() {
        let mut c = CleanConfig {
            disk_space_warning_level_ratio: 101,
            ..CleanConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .contains("diskSpaceWarningLevelRatio"));
        c.disk_space_warning_level_ratio = 99;
        c.disk_space_clean_forcibly_ratio = 10;
        c.disk_max_used_space_ratio = 100;
        assert!(c.validate().is_ok());
        assert_eq!(c.thresholds(), (0.95, 0.30, 0.90));
    }

    #[test]
    fn the_disk_full_flag_rises_past_the_warning_and_falls_below_the_forcible_ratio() {
        let r = Retention::new(CleanConfig::default(), PathBuf::from("/tmp"), None);
        assert_eq!(r.space_to_delete(0.50), (false, false));
        assert_eq!(r.space_to_delete(0.80), (true, false));
        assert!(r.check_put().is_ok());
        assert_eq!(r.space_to_delete(0.95), (true, true));
        let refused = r.check_put().unwrap_err().to_string();
        assert!(refused.contains("95.0%"), "{refused}");
        // Between the forcible and the warning ratio the flag stays up, as in RocketMQ.
        assert_eq!(r.space_to_delete(0.87), (true, true));
        assert!(r.check_put().is_err());
        assert_eq!(r.space_to_delete(0.70), (false, false));
        assert!(r.check_put().is_ok());
    }

    #[test]
    fn the_disk_of_a_real_directory_is_measured() {
        let ratio = disk_used_ratio(Path::new("/")).unwrap();
        assert!((0.0..=1.0).contains(&ratio), "{ratio}");
        assert!(local_hour() < 24);
    }
}
