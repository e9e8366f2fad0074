//! The commit log: every message of every topic, appended to segmented mapped files.
//!
//! Writes happen under the store's put lock (one writer); reads are lock-free and see only
//! bytes below each segment's published write position.

pub(crate) mod flush;
#[cfg(feature = "harness")]
pub mod mapped_file;
#[cfg(not(feature = "harness"))]
pub(crate) mod mapped_file;
pub(crate) mod queue;
pub mod record;
pub(crate) mod recover;
pub(crate) mod transaction;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use mapped_file::MappedFile;
use queue::MappedFileQueue;
use record::{MessageDraft, Peeked, RecordView, END_FILE_MIN_BLANK_LENGTH};

use crate::error::{CommitLogError, RecordError};

pub(crate) const DEFAULT_MAPPED_FILE_SIZE: u64 = 1024 * 1024 * 1024;

/// Any whole number of 4 KiB pages up to 2 GiB (offsets within a segment are Java ints). Small
/// segments are legal, as in RocketMQ: a record that does not fit one is refused when written.
pub(crate) fn check_file_size(size: u64) -> Result<usize, CommitLogError> {
    if size == 0 || !size.is_multiple_of(4096) || size > i32::MAX as u64 + 1 {
        return Err(CommitLogError::BadFileSize(size));
    }
    Ok(size as usize)
}

/// Published bytes of one segment, lent without a copy: holding it keeps the mapping alive, and
/// published bytes never change.
#[derive(Clone)]
pub struct LogSlice {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

impl LogSlice {
    pub fn bytes(&self) -> &[u8] {
        &self.file.readable(self.pos)[..self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where one appended record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    pub offset: u64,
    pub size: usize,
    pub queue_offset: i64,
    pub store_timestamp: i64,
}

impl AppendResult {
    pub fn next_offset(&self) -> u64 {
        self.offset + self.size as u64
    }
}

pub struct CommitLog {
    files: MappedFileQueue,
    store_host: SocketAddr,
    /// `haAcceptZeroBodyCrc`: recovery and CRC-checking readers take a BODYCRC of 0 as "never
    /// computed" (see [`record::check_body_crc`]).
    accept_zero_body_crc: bool,
}

impl CommitLog {
    /// Opens the log in `dir` (`storePathCommitLog`, by default `STORE/commitlog`).
    pub(crate) fn open(
        dir: &Path,
        file_size: u64,
        writable: bool,
        store_host: SocketAddr,
        accept_zero_body_crc: bool,
    ) -> Result<Self, CommitLogError> {
        let file_size = check_file_size(file_size)?;
        Ok(Self {
            files: MappedFileQueue::load(
                dir,
                file_size,
                "mappedFileSizeCommitLog",
                writable,
                writable,
            )?,
            store_host,
            accept_zero_body_crc,
        })
    }

    pub(crate) fn files(&self) -> &MappedFileQueue {
        &self.files
    }
    pub(crate) fn store_host(&self) -> SocketAddr {
        self.store_host
    }
    pub(crate) fn file_size(&self) -> usize {
        self.files.file_size()
    }
    pub(crate) fn min_offset(&self) -> u64 {
        self.files.min_offset()
    }
    pub(crate) fn max_offset(&self) -> u64 {
        self.files.max_offset()
    }

    /// The segment to write `len` more bytes into, padding and rolling over when they do not
    /// fit (RocketMQ's END_OF_FILE). Put lock held.
    fn segment_for(&self, len: usize) -> Result<Arc<MappedFile>, CommitLogError> {
        let file_size = self.files.file_size();
        if len + END_FILE_MIN_BLANK_LENGTH > file_size {
            return Err(CommitLogError::RecordTooLarge {
                size: len,
                file_size: file_size as u64,
            });
        }
        match self.files.last() {
            None => self.files.roll(0),
            Some(last) if last.is_full() => self.files.roll(last.end()),
            Some(last) if len + END_FILE_MIN_BLANK_LENGTH > last.remaining() => {
                let wrote = last.wrote();
                let remaining = last.remaining();
                last.ensure_allocated(wrote + END_FILE_MIN_BLANK_LENGTH)?;
                // SAFETY: put lock held; `[wrote, size)` is unpublished.
                record::encode_blank(
                    unsafe { last.writable(wrote, END_FILE_MIN_BLANK_LENGTH) },
                    remaining,
                );
                last.set_wrote(last.size());
                self.files.roll(last.end())
            }
            Some(last) => Ok(last),
        }
    }

    /// Encodes one record at the end of the log and publishes it. Put lock held.
    pub(crate) fn append(
        &self,
        draft: &MessageDraft<'_>,
        queue_offset: i64,
        store_timestamp: i64,
    ) -> Result<AppendResult, CommitLogError> {
        let size = draft.encoded_len(&self.store_host);
        let file = self.segment_for(size)?;
        let pos = file.wrote();
        let offset = file.start() + pos as u64;
        file.ensure_allocated(pos + size)?;
        // SAFETY: put lock held; the bytes past `wrote` are unpublished.
        let out = unsafe { file.writable(pos, size) };
        draft.encode_into(
            out,
            queue_offset,
            offset as i64,
            store_timestamp,
            &self.store_host,
        );
        file.set_wrote(pos + size);
        self.files.prepare_after(&file);
        Ok(AppendResult {
            offset,
            size,
            queue_offset,
            store_timestamp,
        })
    }

    /// Copies replicated bytes to the end of the log: `offset` must be the current max offset
    /// (or, on an empty log, the start of a segment). Put lock held. Nothing is written on a
    /// mismatch.
    ///
    /// `record_start` is where the first incomplete record begins (the reput offset). Every
    /// record the bytes complete is validated (size, magic, CRC, physical offset) before
    /// anything is written, so bytes corrupted in transit are refused even without the CRC
    /// frame extension; once written and published, each is passed to `dispatch` and
    /// `record_start` moves past it. `accept_zero_crc`: see [`record::check_body_crc`].
    pub(crate) fn append_raw(
        &self,
        offset: u64,
        record_start: &mut u64,
        mut data: &[u8],
        accept_zero_crc: bool,
        mut dispatch: impl FnMut(&RecordView<'_>) -> Result<(), CommitLogError>,
    ) -> Result<(), CommitLogError> {
        self.check_append_offset(offset)?;
        while !data.is_empty() {
            let file = match self.files.last() {
                Some(last) if !last.is_full() => last,
                Some(last) => self.files.roll(last.end())?,
                None => self.files.roll(offset)?,
            };
            let pos = file.wrote();
            let (chunk, rest) = data.split_at(data.len().min(file.size() - pos));
            let at = file.start() + pos as u64;
            // An empty replica may start at a later segment than its reput offset.
            let from = (*record_start).max(file.start());
            let corrupted = |(offset, reason)| CommitLogError::Corrupted {
                offset,
                path: file.path().to_owned(),
                reason,
            };
            // The record the last append left incomplete, whole where this chunk completes it.
            let straddler = if from < at {
                let head = file.readable((from - file.start()) as usize);
                straddling_record(head, chunk)
            } else {
                Vec::new()
            };
            let mut accepted = Vec::new();
            let next = if straddler.is_empty() {
                from
            } else {
                check_straddler(&file, &straddler, from, pos, accept_zero_crc, &mut accepted)
                    .map_err(corrupted)?
            };
            let taken = straddler.len().saturating_sub((at - from.min(at)) as usize);
            let fresh_at = at + taken as u64;
            // Past a blank the rest of the segment is padding, with no records to check.
            let fresh = if next == fresh_at {
                &chunk[taken..]
            } else {
                &[]
            };
            let next =
                record::check_incoming(fresh, next, file.end(), accept_zero_crc, &mut accepted)
                    .map_err(corrupted)?;
            file.ensure_allocated(pos + chunk.len())?;
            // SAFETY: put lock held; writing past the published position only.
            let out = unsafe { file.writable(pos, chunk.len()) };
            copy_by_record(out, chunk, at, &accepted);
            file.set_wrote(pos + chunk.len());
            self.files.prepare_after(&file);
            *record_start = next;
            for r in &accepted {
                dispatch(r)?;
            }
            data = rest;
        }
        Ok(())
    }

    /// The one offset check of replication (RocketMQ's HAClient makes it on every frame):
    /// replicated bytes must start at the max offset, or, on an empty log, at a segment start.
    fn check_append_offset(&self, offset: u64) -> Result<(), CommitLogError> {
        let max_offset = self.max_offset();
        let ok = match self.files.last() {
            None => offset.is_multiple_of(self.files.file_size() as u64),
            Some(_) => offset == max_offset,
        };
        if !ok {
            return Err(CommitLogError::OffsetMismatch { offset, max_offset });
        }
        Ok(())
    }

    /// Up to `max` complete bytes at `offset`, never crossing a segment: the zero-copy unit of
    /// reading and of HA transfer.
    pub(crate) fn read(&self, offset: u64, max: usize) -> Option<LogSlice> {
        let file = self.files.find(offset)?;
        let pos = (offset - file.start()) as usize;
        let len = file.readable(pos).len().min(max);
        (len > 0).then_some(LogSlice { file, pos, len })
    }

    /// Iterates records from `offset` (a record boundary), skipping blanks across segments.
    pub(crate) fn iter_from(&self, offset: u64, check_crc: bool) -> RecordIter<'_> {
        RecordIter {
            log: self,
            offset: offset.max(self.min_offset()),
            check_crc,
        }
    }
}

/// One decoded record owned together with the segment that holds its bytes.
pub struct OwnedRecord {
    pub(crate) file: Arc<MappedFile>,
    pub(crate) pos: usize,
}

impl OwnedRecord {
    pub fn view(&self) -> RecordView<'_> {
        match record::decode(self.file.readable(self.pos), false) {
            Ok(Peeked::Record(r)) => r,
            // The iterator decoded these bytes already and they are immutable once published.
            _ => unreachable!("record changed after it was decoded"),
        }
    }
    pub fn offset(&self) -> u64 {
        self.file.start() + self.pos as u64
    }
    /// The record's bytes as stored.
    pub fn bytes(&self) -> &[u8] {
        let size = self.view().total_size as usize;
        &self.file.readable(self.pos)[..size]
    }
}

pub struct RecordIter<'a> {
    log: &'a CommitLog,
    offset: u64,
    check_crc: bool,
}

impl RecordIter<'_> {
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Result<OwnedRecord, CommitLogError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let file = self.log.files.find(self.offset)?;
            let pos = (self.offset - file.start()) as usize;
            let buf = file.readable(pos);
            if buf.is_empty() {
                return None;
            }
            let checked = record::decode(buf, false).and_then(|p| match p {
                Peeked::Record(r) if self.check_crc => {
                    record::check_body_crc(&r, self.log.accept_zero_body_crc)
                        .map(|()| Peeked::Record(r))
                }
                other => Ok(other),
            });
            match checked {
                Ok(Peeked::Record(r)) => {
                    self.offset += r.total_size as u64;
                    return Some(Ok(OwnedRecord { file, pos }));
                }
                Ok(Peeked::Blank(_)) => self.offset = file.end(),
                Ok(Peeked::End) => return None,
                // A replica's tail may hold part of a record still in flight.
                Err(RecordError::Truncated) => return None,
                Err(reason) => {
                    return Some(Err(CommitLogError::Corrupted {
                        offset: self.offset,
                        path: file.path().to_owned(),
                        reason,
                    }))
                }
            }
        }
    }
}

/// Checks the record an earlier append left incomplete, now whole in `straddler`; returns the
/// offset after it. A damaged one is taken back: earlier frames published its first bytes, but
/// it never completed, so nothing refers to them; zeroing them makes the slave report the
/// record's start, and the master resends it whole.
fn check_straddler<'a>(
    file: &MappedFile,
    straddler: &'a [u8],
    from: u64,
    pos: usize,
    accept_zero_crc: bool,
    accepted: &mut Vec<RecordView<'a>>,
) -> Result<u64, (u64, RecordError)> {
    record::check_incoming(straddler, from, file.end(), accept_zero_crc, accepted).inspect_err(
        |_| {
            let head = (from - file.start()) as usize;
            // SAFETY: put lock held; no reader can decode an incomplete record, and nothing past
            // `pos` was written.
            unsafe { file.writable(head, pos - head) }.fill(0);
            file.set_wrote(head);
        },
    )
}

/// Copies `chunk` (log bytes at `at`) into `out` one record at a time, in log order: a large
/// copy may store its first and last bytes after the rest (glibc's memcpy does), so a process
/// killed mid-copy could leave a torn record with whole ones after it, which recovery would take
/// for corruption in the middle of the log. Copied this way, only the record being copied can be
/// torn, and nothing follows it.
fn copy_by_record(out: &mut [u8], chunk: &[u8], at: u64, records: &[RecordView<'_>]) {
    let mut done = 0;
    for r in records {
        let end = (r.physical_offset as u64 + r.total_size as u64 - at) as usize;
        out[done..end].copy_from_slice(&chunk[done..end]);
        done = end;
    }
    out[done..].copy_from_slice(&chunk[done..]);
}

/// The record that began in published bytes `head` (ending where `chunk` starts) as far as
/// `chunk` continues it: the whole record when `chunk` completes it.
fn straddling_record(head: &[u8], chunk: &[u8]) -> Vec<u8> {
    let mut size = [0u8; 4];
    for (i, b) in head.iter().chain(chunk).take(4).enumerate() {
        size[i] = *b;
    }
    let need = (i32::from_be_bytes(size).max(0) as usize).saturating_sub(head.len());
    let take = if head.len() + chunk.len() < 4 {
        chunk.len()
    } else {
        need.min(chunk.len())
    };
    [head, &chunk[..take]].concat()
}
