//! RocketMQ's `TimerLog`: `ROOT/timerlog/`, segment files named by their start offset like the
//! commit log's, holding fixed 52-byte units, each one timer message placed in a slot of the
//! wheel. A slot's units chain backwards (`prev pos`), so the wheel keeps only a slot's first
//! and last unit. A unit that would not leave a blank's room at a file's end starts the next
//! file, the rest of this one marked blank, as RocketMQ's are.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::commitlog::mapped_file::{MappedFile, ALLOCATE_STEP};
use crate::error::CommitLogError;

/// `TimerLog.UNIT_SIZE`: size, prev pos, magic, enqueue time, delay, commit log offset, record
/// size, real topic's hash, reserved.
pub(crate) const UNIT_SIZE: usize = 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8;
/// The end-of-file blank: size, 0, magic.
const MIN_BLANK_LEN: usize = 4 + 8 + 4;
/// `TimerLog.BLANK_MAGIC_CODE`.
const BLANK_MAGIC_CODE: i32 = (0xBBCC_DDEE_u32 as i32) ^ (1_880_681_586 + 8);
/// `mappedFileSizeTimerLog`'s default: 100 MiB.
pub(crate) const DEFAULT_TIMER_LOG_FILE_SIZE: usize = 100 << 20;

/// One unit of the timer log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    /// The slot's previous unit, -1 for its first.
    pub(crate) prev_pos: i64,
    /// `MAGIC_DEFAULT`, with `MAGIC_ROLL` and `MAGIC_DELETE` bits.
    pub(crate) magic: i32,
    /// `currWriteTime`: the precision-aligned time the unit was written.
    pub(crate) enqueue_time: i64,
    /// The slot's time, kept as its distance from `enqueue_time`.
    pub(crate) delayed_time: i64,
    pub(crate) offset_py: i64,
    pub(crate) size_py: i32,
    /// `String.hashCode` of the real topic (the metrics' key).
    pub(crate) topic_hash: i32,
}

impl Unit {
    fn encode(&self) -> [u8; UNIT_SIZE] {
        let mut b = [0u8; UNIT_SIZE];
        b[0..4].copy_from_slice(&(UNIT_SIZE as i32).to_be_bytes());
        b[4..12].copy_from_slice(&self.prev_pos.to_be_bytes());
        b[12..16].copy_from_slice(&self.magic.to_be_bytes());
        b[16..24].copy_from_slice(&self.enqueue_time.to_be_bytes());
        let delay = (self.delayed_time - self.enqueue_time) as i32;
        b[24..28].copy_from_slice(&delay.to_be_bytes());
        b[28..36].copy_from_slice(&self.offset_py.to_be_bytes());
        b[36..40].copy_from_slice(&self.size_py.to_be_bytes());
        b[40..44].copy_from_slice(&self.topic_hash.to_be_bytes());
        // 44..52: reserved, 0 as RocketMQ writes it.
        b
    }

    /// `None` for a blank, or bytes that are no unit.
    fn decode(b: &[u8]) -> Option<Self> {
        let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap_or_default());
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default());
        if b.len() < UNIT_SIZE || i32_at(0) != UNIT_SIZE as i32 {
            return None;
        }
        let magic = i32_at(12);
        // `isMagicOK`: only the low four bits may be set.
        if magic | 0xF != 0xF {
            return None;
        }
        let enqueue_time = i64_at(16);
        Some(Self {
            prev_pos: i64_at(4),
            magic,
            enqueue_time,
            delayed_time: enqueue_time + i64::from(i32_at(24)),
            offset_py: i64_at(28),
            size_py: i32_at(36),
            topic_hash: i32_at(40),
        })
    }
}

pub(crate) struct TimerLog {
    dir: PathBuf,
    file_size: usize,
    files: Vec<Arc<MappedFile>>,
}

impl TimerLog {
    /// Maps the files of `ROOT/timerlog` (none yet: the first unit creates one). Every file
    /// but the last counts as full; [`Self::recover`] finds where the last one's units end.
    pub(crate) fn open(root: &Path, file_size: usize) -> Result<Self, CommitLogError> {
        let dir = root.join("timerlog");
        let mut files = Vec::new();
        if dir.is_dir() {
            let mut names: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
                .map_err(|e| CommitLogError::io(&dir, e))?
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let start = (name.len() == 20).then(|| name.parse::<u64>().ok())??;
                    Some((start, e.path()))
                })
                .collect();
            names.sort();
            for (start, path) in names {
                let file =
                    MappedFile::open(&path, start, file_size, "mappedFileSizeTimerLog", true)?;
                file.set_wrote(file_size);
                file.set_flushed(file_size);
                files.push(Arc::new(file));
            }
        }
        Ok(Self {
            dir,
            file_size,
            files,
        })
    }

    /// RocketMQ's `recoverAndRevise`: walks the units from the file holding `from` to the
    /// first bytes that are no unit, calls `each(pos, unit)` for every one, and cuts the log
    /// there (the rest of a crash's last write). Returns where the units end.
    pub(crate) fn recover(
        &mut self,
        from: i64,
        mut each: impl FnMut(i64, &Unit),
    ) -> Result<i64, CommitLogError> {
        let Some(first) = self
            .files
            .iter()
            .rposition(|f| f.start() as i64 <= from.max(0))
            .or((!self.files.is_empty()).then_some(0))
        else {
            return Ok(0);
        };
        let mut end = self.files[first].start() as i64;
        'files: for file in &self.files[first..] {
            let bytes = file.whole();
            let mut pos = 0;
            while pos + UNIT_SIZE <= bytes.len() {
                let magic =
                    i32::from_be_bytes(bytes[pos + 12..pos + 16].try_into().unwrap_or_default());
                if magic == BLANK_MAGIC_CODE {
                    end = file.end() as i64;
                    continue 'files;
                }
                let Some(unit) = Unit::decode(&bytes[pos..pos + UNIT_SIZE]) else {
                    end = (file.start() + pos as u64) as i64;
                    break 'files;
                };
                each((file.start() + pos as u64) as i64, &unit);
                pos += UNIT_SIZE;
            }
            end = file.end() as i64;
        }
        self.truncate(end)?;
        Ok(end)
    }

    /// Drops whatever lies past `end`: later files go, the one holding it is written up to it.
    fn truncate(&mut self, end: i64) -> Result<(), CommitLogError> {
        while let Some(last) = self.files.last() {
            if (last.start() as i64) < end {
                break;
            }
            let path = last.path().to_owned();
            self.files.pop();
            std::fs::remove_file(&path).map_err(|e| CommitLogError::io(&path, e))?;
        }
        if let Some(last) = self.files.last() {
            let wrote = usize::try_from(end - last.start() as i64)
                .unwrap_or(0)
                .min(self.file_size);
            last.set_wrote(wrote);
            last.set_flushed(wrote);
        }
        Ok(())
    }

    /// Appends `unit`; its position in the log.
    pub(crate) fn append(&mut self, unit: &Unit) -> Result<i64, CommitLogError> {
        let need = UNIT_SIZE + MIN_BLANK_LEN;
        let file = match self.files.last() {
            Some(f) if f.remaining() >= need => f.clone(),
            Some(f) => {
                if !f.is_full() {
                    let at = f.wrote();
                    let mut blank = [0u8; MIN_BLANK_LEN];
                    blank[0..4].copy_from_slice(&((self.file_size - at) as i32).to_be_bytes());
                    blank[12..16].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
                    f.ensure_allocated(at + MIN_BLANK_LEN)?;
                    // SAFETY: the timer store's lock makes this the one writer, past `wrote`.
                    unsafe { f.writable(at, MIN_BLANK_LEN) }.copy_from_slice(&blank);
                    f.set_wrote(self.file_size);
                }
                let start = f.end();
                self.new_file(start)?
            }
            None => self.new_file(0)?,
        };
        let at = file.wrote();
        file.ensure_allocated(at + UNIT_SIZE)?;
        // SAFETY: as above.
        unsafe { file.writable(at, UNIT_SIZE) }.copy_from_slice(&unit.encode());
        file.set_wrote(at + UNIT_SIZE);
        Ok((file.start() + at as u64) as i64)
    }

    fn new_file(&mut self, start: u64) -> Result<Arc<MappedFile>, CommitLogError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| CommitLogError::io(&self.dir, e))?;
        let file = Arc::new(MappedFile::create(
            &self.dir,
            start,
            self.file_size,
            ALLOCATE_STEP.min(self.file_size),
        )?);
        self.files.push(file.clone());
        Ok(file)
    }

    /// The unit at `pos`, if one is there.
    pub(crate) fn unit_at(&self, pos: i64) -> Option<Unit> {
        let pos = u64::try_from(pos).ok()?;
        let at = self.files.partition_point(|f| f.end() <= pos);
        let file = self.files.get(at).filter(|f| f.start() <= pos)?;
        let bytes = file.readable((pos - file.start()) as usize);
        Unit::decode(bytes.get(..UNIT_SIZE)?)
    }

    /// Where the next unit goes.
    pub(crate) fn end(&self) -> i64 {
        self.files
            .last()
            .map_or(0, |f| (f.start() + f.wrote() as u64) as i64)
    }

    /// msyncs what was written since the last flush.
    pub(crate) fn flush(&self) -> Result<(), CommitLogError> {
        for file in &self.files {
            file.flush(file.wrote())?;
        }
        Ok(())
    }

    /// RocketMQ's `deleteExpiredFileByOffsetForTimerLog`: a file whose last unit points below
    /// the commit log's first offset can only name messages retention took; it goes (never the
    /// file being written).
    pub(crate) fn delete_expired(
        &mut self,
        min_commit_log_offset: i64,
    ) -> Result<usize, CommitLogError> {
        let mut deleted = 0;
        while self.files.len() > 1 {
            let first = &self.files[0];
            let last_unit = (self.file_size - MIN_BLANK_LEN) / UNIT_SIZE * UNIT_SIZE - UNIT_SIZE;
            let expired = first
                .readable(0)
                .get(last_unit..)
                .and_then(Unit::decode)
                .is_some_and(|u| u.offset_py + i64::from(u.size_py) <= min_commit_log_offset);
            if !expired {
                break;
            }
            let path = first.path().to_owned();
            self.files.remove(0);
            std::fs::remove_file(&path).map_err(|e| CommitLogError::io(&path, e))?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// The files' start offsets, oldest first.
    #[cfg(test)]
    pub(crate) fn file_starts(&self) -> Vec<u64> {
        self.files.iter().map(|f| f.start()).collect()
    }
}
