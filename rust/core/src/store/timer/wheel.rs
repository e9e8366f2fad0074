//! RocketMQ's `TimerWheel`: `ROOT/timerwheel`, a fixed ring of 32-byte slots (`time /
//! precision`, first unit, last unit, count, magic), two turns of `slotsTotal` so a slot is
//! reused only after a whole week at the default precision. A slot whose stored time is not
//! the one asked for is empty: it belongs to a turn that passed.
//!
//! ▲ Written in place through the mapping (RocketMQ keeps a heap copy and writes back the
//! bytes that changed each flush): a killed broker loses nothing the kernel holds, and the
//! flush is one msync.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

use crate::error::CommitLogError;

/// `Slot.SIZE`.
const SLOT_SIZE: usize = 32;
/// `TimerMessageStore.TIMER_WHEEL_TTL_DAY * DAY_SECS`: slots in one turn, whatever the
/// precision.
pub(crate) const SLOTS_TOTAL: i64 = 7 * 86_400;

/// One slot: its units run from `first_pos` to `last_pos` (backwards through `prev pos`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The slot's time in ms (-1: empty).
    pub(crate) time_ms: i64,
    pub(crate) first_pos: i64,
    pub(crate) last_pos: i64,
    /// Timer messages in it (delete marks count -1).
    pub(crate) num: i32,
    pub(crate) magic: i32,
}

impl Slot {
    pub(crate) const EMPTY: Slot = Slot {
        time_ms: -1,
        first_pos: -1,
        last_pos: -1,
        num: 0,
        magic: 0,
    };
}

pub(crate) struct TimerWheel {
    path: PathBuf,
    precision_ms: i64,
    map: MmapMut,
}

impl TimerWheel {
    /// The wheel's file length: two turns of slots.
    const LENGTH: usize = (SLOTS_TOTAL as usize) * 2 * SLOT_SIZE;

    /// Opens (or creates, sparse) `ROOT/timerwheel`; a file of another length is refused,
    /// naming it.
    pub(crate) fn open(root: &Path, precision_ms: i64) -> Result<Self, CommitLogError> {
        let path = root.join("timerwheel");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| CommitLogError::io(&path, e))?;
        let len = file
            .metadata()
            .map_err(|e| CommitLogError::io(&path, e))?
            .len();
        if len != 0 && len != Self::LENGTH as u64 {
            return Err(CommitLogError::BadConfigFile {
                path,
                reason: format!(
                    "the timer wheel is {len} bytes, not the {} of {} slots of 32 bytes",
                    Self::LENGTH,
                    SLOTS_TOTAL * 2
                ),
            });
        }
        file.set_len(Self::LENGTH as u64)
            .map_err(|e| CommitLogError::io(&path, e))?;
        // SAFETY: the store's lock file keeps other writers of this process tree out; the map
        // lives in `self` and is written only under the timer store's lock.
        let map = unsafe { MmapOptions::new().len(Self::LENGTH).map_mut(&file) }
            .map_err(|e| CommitLogError::io(&path, e))?;
        Ok(Self {
            path,
            precision_ms,
            map,
        })
    }

    fn index(&self, time_ms: i64) -> usize {
        ((time_ms / self.precision_ms).rem_euclid(SLOTS_TOTAL * 2)) as usize * SLOT_SIZE
    }

    /// The slot `time_ms` falls in, [`Slot::EMPTY`] when it holds another turn's.
    pub(crate) fn slot(&self, time_ms: i64) -> Slot {
        let raw = self.raw(time_ms);
        if raw.time_ms != time_ms / self.precision_ms * self.precision_ms {
            return Slot::EMPTY;
        }
        raw
    }

    fn raw(&self, time_ms: i64) -> Slot {
        let at = self.index(time_ms);
        let b = &self.map[at..at + SLOT_SIZE];
        let i64_at = |o: usize| i64::from_be_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let i32_at = |o: usize| i32::from_be_bytes(b[o..o + 4].try_into().unwrap_or_default());
        Slot {
            // Stored as `time / precision`, as RocketMQ 5.1+ writes it.
            time_ms: i64_at(0).saturating_mul(self.precision_ms),
            first_pos: i64_at(8),
            last_pos: i64_at(16),
            num: i32_at(24),
            magic: i32_at(28),
        }
    }

    pub(crate) fn put(&mut self, time_ms: i64, slot: &Slot) {
        let at = self.index(time_ms);
        let b = &mut self.map[at..at + SLOT_SIZE];
        b[0..8].copy_from_slice(&(time_ms / self.precision_ms).to_be_bytes());
        b[8..16].copy_from_slice(&slot.first_pos.to_be_bytes());
        b[16..24].copy_from_slice(&slot.last_pos.to_be_bytes());
        b[24..28].copy_from_slice(&slot.num.to_be_bytes());
        b[28..32].copy_from_slice(&slot.magic.to_be_bytes());
    }

    /// RocketMQ's `reviseSlot(time, IGNORE, pos, true)` of recovery: a unit the wheel may not
    /// have recorded becomes its slot's last.
    pub(crate) fn revise_last(&mut self, time_ms: i64, last_pos: i64) {
        let mut slot = self.slot(time_ms);
        if slot.time_ms == -1 {
            slot = Slot {
                first_pos: last_pos,
                ..Slot::EMPTY
            };
        }
        slot.last_pos = slot.last_pos.max(last_pos);
        self.put(time_ms, &slot);
    }

    /// The slots of this turn and the next from `from_ms` on that hold units: (time, slot).
    pub(crate) fn busy(&self, from_ms: i64) -> Vec<(i64, Slot)> {
        let start = from_ms / self.precision_ms * self.precision_ms;
        (0..SLOTS_TOTAL * 2)
            .map(|i| start + i * self.precision_ms)
            .filter_map(|t| {
                let slot = self.slot(t);
                (slot.time_ms != -1 && slot.last_pos >= 0).then_some((t, slot))
            })
            .collect()
    }

    pub(crate) fn flush(&self) -> Result<(), CommitLogError> {
        self.map
            .flush()
            .map_err(|e| CommitLogError::io(&self.path, e))
    }
}
