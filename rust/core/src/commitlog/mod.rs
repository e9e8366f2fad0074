//! The commit log: every message of every topic, appended to segmented mapped files.
//!
//! Writes happen under the store's put lock (one writer); reads are lock-free and see only
//! bytes below each segment's published write position.

pub mod flush;
pub mod mapped_file;
pub mod queue;
pub mod record;
pub mod recover;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use mapped_file::MappedFile;
use queue::MappedFileQueue;
use record::{MessageDraft, Peeked, RecordView, END_FILE_MIN_BLANK_LENGTH};

use crate::error::{CommitLogError, RecordError};

pub const DEFAULT_MAPPED_FILE_SIZE: u64 = 1024 * 1024 * 1024;

pub fn check_file_size(size: u64) -> Result<usize, CommitLogError> {
    if size < 64 * 1024 || !size.is_multiple_of(4096) || size > i32::MAX as u64 + 1 {
        return Err(CommitLogError::BadFileSize(size));
    }
    Ok(size as usize)
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
}

impl CommitLog {
    pub fn open(
        root: &Path,
        file_size: u64,
        writable: bool,
        store_host: SocketAddr,
    ) -> Result<Self, CommitLogError> {
        let file_size = check_file_size(file_size)?;
        Ok(Self {
            files: MappedFileQueue::load(&root.join("commitlog"), file_size, writable, writable)?,
            store_host,
        })
    }

    pub fn files(&self) -> &MappedFileQueue {
        &self.files
    }
    pub fn store_host(&self) -> SocketAddr {
        self.store_host
    }
    pub fn file_size(&self) -> usize {
        self.files.file_size()
    }
    pub fn min_offset(&self) -> u64 {
        self.files.min_offset()
    }
    pub fn max_offset(&self) -> u64 {
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
    pub fn append(
        &self,
        draft: &MessageDraft<'_>,
        queue_offset: i64,
        store_timestamp: i64,
    ) -> Result<AppendResult, CommitLogError> {
        let size = draft.encoded_len(&self.store_host);
        let file = self.segment_for(size)?;
        let pos = file.wrote();
        let offset = file.start() + pos as u64;
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
    /// `record_start` is where the first incomplete record begins (the reput offset). The bytes
    /// are copied into the unpublished part of the segment and every record they complete is
    /// validated there (size, magic, CRC, physical offset) before they are published, so bytes
    /// corrupted in transit are refused even without the CRC frame extension.
    pub fn append_raw(
        &self,
        offset: u64,
        record_start: u64,
        mut data: &[u8],
    ) -> Result<(), CommitLogError> {
        let file_size = self.files.file_size() as u64;
        let max_offset = self.max_offset();
        let empty = self.files.last().is_none();
        let ok = if empty {
            offset.is_multiple_of(file_size)
        } else {
            offset == max_offset
        };
        if !ok {
            return Err(CommitLogError::OffsetMismatch { offset, max_offset });
        }
        let mut at = offset;
        while !data.is_empty() {
            let file = match self.files.last() {
                Some(last) if !last.is_full() => last,
                Some(last) => self.files.roll(last.end())?,
                None => self.files.roll(at)?,
            };
            let pos = file.wrote();
            let n = data.len().min(file.size() - pos);
            // SAFETY: put lock held; writing past the published position only.
            unsafe { file.writable(pos, n) }.copy_from_slice(&data[..n]);
            // Validate from the first incomplete record on; bytes before it were checked with
            // earlier frames, and padding after a blank (the reput offset jumped past it) has
            // no records to check.
            let from = (record_start.max(file.start()) - file.start()) as usize;
            let checked = match file.whole().get(from..pos + n) {
                Some(fresh) => {
                    record::check_incoming(fresh, file.start() + from as u64, file.end())
                }
                None => Ok(()),
            };
            if let Err((bad, reason)) = checked {
                // SAFETY: put lock held; these bytes were never published.
                unsafe { file.writable(pos, n) }.fill(0);
                return Err(CommitLogError::Corrupted {
                    offset: bad,
                    path: file.path().to_owned(),
                    reason,
                });
            }
            file.set_wrote(pos + n);
            self.files.prepare_after(&file);
            data = &data[n..];
            at += n as u64;
        }
        Ok(())
    }

    /// Up to `max` complete bytes at `offset`, never crossing a segment: the zero-copy unit of
    /// reading and of HA transfer.
    pub fn read(&self, offset: u64, max: usize) -> Option<(Arc<MappedFile>, usize, usize)> {
        let file = self.files.find(offset)?;
        let pos = (offset - file.start()) as usize;
        let n = file.readable(pos).len().min(max);
        (n > 0).then_some((file, pos, n))
    }

    /// Iterates records from `offset` (a record boundary), skipping blanks across segments.
    pub fn iter_from(&self, offset: u64, check_crc: bool) -> RecordIter<'_> {
        RecordIter {
            log: self,
            offset: offset.max(self.min_offset()),
            check_crc,
        }
    }
}

/// One decoded record owned together with the segment that holds its bytes.
pub struct OwnedRecord {
    pub file: Arc<MappedFile>,
    pub pos: usize,
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
            match record::decode(buf, self.check_crc) {
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
