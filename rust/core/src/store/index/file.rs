//! One index file in RocketMQ's byte format (`IndexFile`, `IndexHeader`): a 40-byte header,
//! `maxHashSlotNum` 4-byte hash slots, then `maxIndexNum` 20-byte entries. A slot holds the
//! number of the newest entry whose key hashes to it; each entry holds the key's hash, the
//! message's commit log offset, its store time as seconds after the file's first message, and
//! the number of the previous entry of the same slot, so a lookup walks one chain. Entry 0 is
//! never used: 0 means "none".

use std::path::{Path, PathBuf};

use crate::commitlog::mapped_file::MappedFile;
use crate::error::CommitLogError;

pub(crate) const HEADER_SIZE: usize = 40;
const SLOT_SIZE: usize = 4;
const ENTRY_SIZE: usize = 20;
const INVALID_INDEX: i32 = 0;

/// `IndexHeader`, kept in memory and written into the file after each message's keys, so a
/// killed writer leaves a header that counts only whole messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexHeader {
    pub(crate) begin_timestamp: i64,
    pub(crate) end_timestamp: i64,
    pub(crate) begin_phy_offset: i64,
    pub(crate) end_phy_offset: i64,
    pub(crate) hash_slot_count: i32,
    /// The next entry's number; starts at 1.
    pub(crate) index_count: i32,
}

impl IndexHeader {
    fn decode(b: &[u8]) -> Self {
        let long = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let int = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap_or_default());
        Self {
            begin_timestamp: long(0),
            end_timestamp: long(8),
            begin_phy_offset: long(16),
            end_phy_offset: long(24),
            hash_slot_count: int(32),
            // As RocketMQ's `load`: a zeroed header is a fresh file.
            index_count: int(36).max(1),
        }
    }

    fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        out[0..8].copy_from_slice(&self.begin_timestamp.to_be_bytes());
        out[8..16].copy_from_slice(&self.end_timestamp.to_be_bytes());
        out[16..24].copy_from_slice(&self.begin_phy_offset.to_be_bytes());
        out[24..32].copy_from_slice(&self.end_phy_offset.to_be_bytes());
        out[32..36].copy_from_slice(&self.hash_slot_count.to_be_bytes());
        out[36..40].copy_from_slice(&self.index_count.to_be_bytes());
        out
    }
}

/// One 20-byte entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    key_hash: i32,
    phy_offset: i64,
    time_diff: i32,
    prev: i32,
}

/// `IndexFile.indexKeyHashMethod` of `topic#key`: Java's `String.hashCode` over UTF-16 code
/// units, made non-negative as RocketMQ does (`Math.abs`, and 0 for `Integer.MIN_VALUE`).
pub(crate) fn key_hash(topic: &str, key: &str) -> i32 {
    let h = topic
        .encode_utf16()
        .chain("#".encode_utf16())
        .chain(key.encode_utf16())
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    h.checked_abs().unwrap_or(0)
}

pub(crate) struct IndexFile {
    map: MappedFile,
    slots: usize,
    capacity: usize,
    header: IndexHeader,
}

impl IndexFile {
    /// The file size RocketMQ computes from `maxHashSlotNum` and `maxIndexNum`.
    pub(crate) fn size(slots: usize, capacity: usize) -> usize {
        HEADER_SIZE + slots * SLOT_SIZE + capacity * ENTRY_SIZE
    }

    /// A new file that continues where the previous one ended (0, 0 for the first). The header
    /// and the slots are reserved on disk now, since they are written anywhere; entries are
    /// reserved as the writer reaches them.
    pub(crate) fn create(
        path: PathBuf,
        slots: usize,
        capacity: usize,
        end_phy_offset: i64,
        end_timestamp: i64,
    ) -> Result<Self, CommitLogError> {
        let size = Self::size(slots, capacity);
        let map = MappedFile::create_at(path, 0, size, HEADER_SIZE + slots * SLOT_SIZE)?;
        let file = Self {
            map,
            slots,
            capacity,
            header: IndexHeader {
                begin_timestamp: end_timestamp,
                end_timestamp,
                begin_phy_offset: end_phy_offset,
                end_phy_offset,
                hash_slot_count: 0,
                index_count: 1,
            },
        };
        file.persist_header();
        Ok(file)
    }

    /// Maps an existing file; its size must be what `maxHashSlotNum` and `maxIndexNum` give.
    pub(crate) fn open(
        path: &Path,
        slots: usize,
        capacity: usize,
        writable: bool,
    ) -> Result<Self, CommitLogError> {
        let size = Self::size(slots, capacity);
        let map = MappedFile::open(path, 0, size, "maxHashSlotNum/maxIndexNum", writable)?;
        map.set_wrote(size);
        map.set_flushed(size);
        let header = IndexHeader::decode(&map.whole()[..HEADER_SIZE]);
        let mut file = Self {
            map,
            slots,
            capacity,
            header,
        };
        file.header.index_count = file.header.index_count.min(file.capacity_count());
        if writable {
            // Where the writer will reserve next: everything up to its last entry is in use.
            let used = file.entry_pos(file.header.index_count);
            file.map.allocate(used)?;
        }
        Ok(file)
    }

    pub(crate) fn path(&self) -> &Path {
        self.map.path()
    }

    pub(crate) fn header(&self) -> &IndexHeader {
        &self.header
    }

    /// The highest entry number plus one that fits (RocketMQ's `indexNum` counts entry 0).
    fn capacity_count(&self) -> i32 {
        i32::try_from(self.capacity).unwrap_or(i32::MAX)
    }

    pub(crate) fn is_write_full(&self) -> bool {
        self.header.index_count >= self.capacity_count()
    }

    /// True when no message was indexed here yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.header.index_count <= 1
    }

    fn slot_pos(&self, hash: i32) -> usize {
        HEADER_SIZE + (hash as usize % self.slots) * SLOT_SIZE
    }

    fn entry_pos(&self, n: i32) -> usize {
        HEADER_SIZE + self.slots * SLOT_SIZE + n.max(0) as usize * ENTRY_SIZE
    }

    fn bytes(&self, pos: usize, len: usize) -> &[u8] {
        &self.map.whole()[pos..pos + len]
    }

    fn int(&self, pos: usize) -> i32 {
        i32::from_be_bytes(self.bytes(pos, 4).try_into().unwrap_or_default())
    }

    fn write(&mut self, pos: usize, data: &[u8]) {
        // SAFETY: `&mut self` makes this the only writer of the mapping in this process, and
        // the service holds the files' write lock, so no lookup reads it meanwhile.
        unsafe { self.map.writable(pos, data.len()) }.copy_from_slice(data);
    }

    fn slot(&self, hash: i32) -> i32 {
        let value = self.int(self.slot_pos(hash));
        if value <= INVALID_INDEX || value > self.header.index_count {
            INVALID_INDEX
        } else {
            value
        }
    }

    fn entry(&self, n: i32) -> Entry {
        let b = self.bytes(self.entry_pos(n), ENTRY_SIZE);
        Entry {
            key_hash: i32::from_be_bytes(b[0..4].try_into().unwrap_or_default()),
            phy_offset: i64::from_be_bytes(b[4..12].try_into().unwrap_or_default()),
            time_diff: i32::from_be_bytes(b[12..16].try_into().unwrap_or_default()),
            prev: i32::from_be_bytes(b[16..20].try_into().unwrap_or_default()),
        }
    }

    /// `IndexFile.putKey`: false when the file is full. The header reaches the file with
    /// [`Self::persist_header`], once the message's last key is in.
    pub(crate) fn put_key(
        &mut self,
        hash: i32,
        phy_offset: i64,
        store_timestamp: i64,
    ) -> Result<bool, CommitLogError> {
        if self.is_write_full() {
            return Ok(false);
        }
        let n = self.header.index_count;
        let entry_pos = self.entry_pos(n);
        self.map.ensure_allocated(entry_pos + ENTRY_SIZE)?;
        let prev = self.slot(hash);
        let time_diff = if self.header.begin_timestamp <= 0 {
            0
        } else {
            ((store_timestamp - self.header.begin_timestamp) / 1000).clamp(0, i32::MAX as i64)
                as i32
        };
        let mut raw = [0u8; ENTRY_SIZE];
        raw[0..4].copy_from_slice(&hash.to_be_bytes());
        raw[4..12].copy_from_slice(&phy_offset.to_be_bytes());
        raw[12..16].copy_from_slice(&time_diff.to_be_bytes());
        raw[16..20].copy_from_slice(&prev.to_be_bytes());
        self.write(entry_pos, &raw);
        let slot_pos = self.slot_pos(hash);
        self.write(slot_pos, &n.to_be_bytes());
        if n <= 1 {
            self.header.begin_phy_offset = phy_offset;
            self.header.begin_timestamp = store_timestamp;
        }
        if prev == INVALID_INDEX {
            self.header.hash_slot_count += 1;
        }
        self.header.index_count += 1;
        self.header.end_phy_offset = phy_offset;
        self.header.end_timestamp = store_timestamp;
        Ok(true)
    }

    pub(crate) fn persist_header(&self) {
        let raw = self.header.encode();
        // SAFETY: as `write`; `&self` callers are the service with the files' write lock, or
        // `create` before the file is shared.
        unsafe { self.map.writable(0, HEADER_SIZE) }.copy_from_slice(&raw);
    }

    /// `isTimeMatched`: the file may hold messages stored in `[begin, end]`.
    pub(crate) fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let h = &self.header;
        (begin < h.begin_timestamp && end > h.end_timestamp)
            || (begin >= h.begin_timestamp && begin <= h.end_timestamp)
            || (end >= h.begin_timestamp && end <= h.end_timestamp)
    }

    /// `selectPhyOffset`: appends the offsets of entries with `hash` stored in `[begin, end]`,
    /// newest first, until `out` holds `max`.
    pub(crate) fn select(&self, hash: i32, max: usize, begin: i64, end: i64, out: &mut Vec<i64>) {
        if self.is_empty() {
            return;
        }
        let mut next = self.slot(hash);
        // Each step goes to a smaller entry number, so a damaged chain still ends.
        while next > INVALID_INDEX && out.len() < max {
            let e = self.entry(next);
            if e.time_diff < 0 {
                break;
            }
            let time = self
                .header
                .begin_timestamp
                .saturating_add(i64::from(e.time_diff) * 1000);
            if e.key_hash == hash && time >= begin && time <= end {
                out.push(e.phy_offset);
            }
            if e.prev >= next || time < begin {
                break;
            }
            next = e.prev;
        }
    }

    /// Takes back entries past the header's count (a writer killed mid-message) and those that
    /// point at or past `log_end` (the commit log lost its tail), restoring each one's slot, so
    /// the chains are exactly as if those were never written. `stamp_of` gives the store time
    /// of the message at an offset, for the new end time. Returns whether anything changed.
    pub(crate) fn repair(
        &mut self,
        log_end: i64,
        stamp_of: impl Fn(i64) -> Option<i64>,
    ) -> Result<bool, CommitLogError> {
        let mut last = self.header.index_count;
        while last < self.capacity_count() && self.entry(last) != Entry::ZERO {
            last += 1;
        }
        let mut changed = false;
        for n in (1..last).rev() {
            let e = self.entry(n);
            if n < self.header.index_count && e.phy_offset < log_end {
                break;
            }
            let slot_pos = self.slot_pos(e.key_hash);
            if self.int(slot_pos) == n {
                let prev = if e.prev > INVALID_INDEX && e.prev < n {
                    e.prev
                } else {
                    INVALID_INDEX
                };
                self.write(slot_pos, &prev.to_be_bytes());
                if prev == INVALID_INDEX && n < self.header.index_count {
                    self.header.hash_slot_count -= 1;
                }
            }
            let pos = self.entry_pos(n);
            self.write(pos, &[0u8; ENTRY_SIZE]);
            self.header.index_count = self.header.index_count.min(n);
            changed = true;
        }
        if changed && !self.is_empty() {
            let e = self.entry(self.header.index_count - 1);
            self.header.end_phy_offset = e.phy_offset;
            self.header.end_timestamp = stamp_of(e.phy_offset)
                .unwrap_or_else(|| self.header.begin_timestamp + i64::from(e.time_diff) * 1000);
        }
        if changed {
            self.persist_header();
            self.flush()?;
        }
        Ok(changed)
    }

    pub(crate) fn flush(&self) -> Result<(), CommitLogError> {
        self.map.set_flushed(0);
        self.map.flush(self.map.size()).map(drop)
    }
}

impl Entry {
    const ZERO: Entry = Entry {
        key_hash: 0,
        phy_offset: 0,
        time_diff: 0,
        prev: 0,
    };
}
