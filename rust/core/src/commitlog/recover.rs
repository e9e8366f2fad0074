//! Recovery on open: find the end of valid data and cut off a torn tail, but never cut
//! corruption in the middle of the log.
//!
//! Like RocketMQ, the last three segments are re-validated on every open (size, magic, CRC,
//! computed length, physical offset field); after a crash (the `abort` marker survived) the
//! scan starts earlier, at the segment of the last checkpointed flush, if that is older.
//!
//! Recovery exists to cut a torn tail: the record a crash interrupted, with nothing written
//! after it. An invalid record with valid records after it is something else (a flipped disk
//! block, a peer that wrote a bad record), and cutting there would silently drop every record
//! behind it. So where the scan stops at an invalid record, it looks ahead for a valid one:
//! found, the open fails with a [`MidLogCorruption`](crate::error::MidLogCorruption) unless the caller explicitly asked to cut.

use std::path::PathBuf;
use std::sync::Arc;

use super::mapped_file::MappedFile;

use super::record::{self, Peeked, MAGIC_V1};
use super::CommitLog;
use crate::error::{CommitLogError, MidLogCorruption, RecordError};

/// What recovery found and did, for the store to log.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    /// The `abort` marker was left: the last run did not shut down cleanly.
    pub after_crash: bool,
    pub max_offset: u64,
    /// First offset that was re-validated; consume queues are re-dispatched from here.
    pub scanned_from: u64,
    pub records_checked: u64,
    /// Where the log was cut, why, and in which file.
    pub truncated: Option<(u64, PathBuf, RecordError)>,
    pub deleted_files: Vec<PathBuf>,
    /// Mid-log corruption that was cut because the caller asked for it
    /// ([`CommitLog::recover`]'s `truncate_at_corruption`), with what the cut dropped.
    pub cut_corruption: Option<MidLogCorruption>,
}

/// Validates a record found at `offset` during recovery beyond what the decoder checks.
fn check_physical_offset(found: i64, offset: u64) -> Result<(), RecordError> {
    if found != offset as i64 {
        return Err(RecordError::BadLength("physical offset field", found));
    }
    Ok(())
}

/// Where a scan for valid records stopped.
pub(crate) struct ScanOutcome {
    /// Index into the file list and position in it of the end of valid data.
    pub(crate) index: usize,
    pub(crate) pos: usize,
    pub(crate) records: u64,
    /// Bytes of those records.
    pub(crate) bytes: u64,
    pub(crate) error: Option<(u64, PathBuf, RecordError)>,
}

/// The first three bytes of both record magics (V1 `0xDAA320A7`, V2 `0xDAA320AB`): what the
/// look-ahead searches for.
const MAGIC_PREFIX: [u8; 3] = {
    let m = MAGIC_V1.to_be_bytes();
    [m[0], m[1], m[2]]
};

impl CommitLog {
    /// Decodes and validates records from `first_pos` in `files[first]` on, over whole
    /// mappings (published or not), and reports where valid data ends. `accept_zero_crc`: see
    /// [`record::check_body_crc`].
    pub(crate) fn scan_valid(
        &self,
        files: &[Arc<MappedFile>],
        first: usize,
        first_pos: usize,
        accept_zero_crc: bool,
    ) -> ScanOutcome {
        let mut out = ScanOutcome {
            index: files.len().saturating_sub(1),
            pos: files.last().map_or(0, |f| f.size()),
            records: 0,
            bytes: 0,
            error: None,
        };
        let mut pos = first_pos;
        for (i, file) in files.iter().enumerate().skip(first) {
            let whole = file.whole();
            while pos < whole.len() {
                let offset = file.start() + pos as u64;
                let checked = record::decode(&whole[pos..], false).and_then(|p| {
                    if let Peeked::Record(r) = &p {
                        record::check_body_crc(r, accept_zero_crc)?;
                        check_physical_offset(r.physical_offset, offset)?;
                    }
                    Ok(p)
                });
                match checked {
                    Ok(Peeked::Record(r)) => {
                        out.records += 1;
                        out.bytes += r.total_size as u64;
                        pos += r.total_size as usize;
                    }
                    Ok(Peeked::Blank(_)) => pos = whole.len(),
                    Ok(Peeked::End) => {
                        (out.index, out.pos) = (i, pos);
                        return out;
                    }
                    Err(reason) => {
                        out.error = Some((offset, file.path().to_owned(), reason));
                        (out.index, out.pos) = (i, pos);
                        return out;
                    }
                }
            }
            pos = 0;
        }
        out
    }

    /// Whether a record that is valid at its own position starts at `pos` of `file`. A zero
    /// BODYCRC counts as valid here: such records are what some peers write, not a torn write.
    fn record_at(&self, file: &MappedFile, pos: usize) -> bool {
        let offset = file.start() + pos as u64;
        match record::decode(&file.whole()[pos..], false) {
            Ok(Peeked::Record(r)) => {
                record::check_body_crc(&r, true).is_ok() && r.physical_offset == offset as i64
            }
            _ => false,
        }
    }

    /// The first position at or after `pos` in `files[index]`, or in a later segment, where a
    /// valid record starts. Records cannot be followed past garbage, so this tries every place a
    /// record magic appears; RocketMQ records carry their own physical offset, so bytes inside
    /// some body that merely look like a record do not pass.
    fn next_record(
        &self,
        files: &[Arc<MappedFile>],
        index: usize,
        pos: usize,
    ) -> Option<(usize, usize)> {
        let finder = memchr::memmem::Finder::new(&MAGIC_PREFIX);
        for (i, file) in files.iter().enumerate().skip(index) {
            let whole = file.whole();
            // The magic sits 4 bytes into a record.
            let mut at = if i == index { pos + 4 } else { 4 };
            while let Some(hit) = whole.get(at..).and_then(|rest| finder.find(rest)) {
                let start = at + hit - 4;
                if self.record_at(file, start) {
                    return Some((i, start));
                }
                at += hit + 1;
            }
        }
        None
    }

    /// Tells a torn tail from mid-log corruption at the invalid record at `pos` in
    /// `files[index]`: `None` when nothing valid follows it (in this or a later segment).
    pub(crate) fn mid_log_corruption(
        &self,
        files: &[Arc<MappedFile>],
        index: usize,
        pos: usize,
        (offset, path, reason): (u64, PathBuf, RecordError),
    ) -> Option<MidLogCorruption> {
        // From the bad record itself: one that is valid but for a BODYCRC of 0 is no torn write.
        let (mut i, mut p) = self.next_record(files, index, pos)?;
        let next_valid = files[i].start() + p as u64;
        let (mut valid_records, mut valid_bytes) = (0, 0);
        loop {
            let scan = self.scan_valid(files, i, p, true);
            valid_records += scan.records;
            valid_bytes += scan.bytes;
            if scan.error.is_none() {
                break;
            }
            match self.next_record(files, scan.index, scan.pos + 1) {
                Some(next) => (i, p) = next,
                None => break,
            }
        }
        let store = path
            .parent()
            .and_then(|dir| dir.parent())
            .map(|root| root.to_owned())
            .unwrap_or_default();
        Some(MidLogCorruption {
            offset,
            path,
            reason,
            store,
            next_valid,
            valid_records,
            valid_bytes,
        })
    }

    /// Scans from the chosen segment, fixes write positions, truncates a torn tail. Mid-log
    /// corruption fails the open, unless `truncate_at_corruption` (an explicit repair) says to
    /// cut there too.
    pub(crate) fn recover(
        &self,
        crashed: bool,
        checkpoint_offset: Option<u64>,
        truncate_at_corruption: bool,
    ) -> Result<RecoveryReport, CommitLogError> {
        let files = self.files.files();
        let mut report = RecoveryReport {
            after_crash: crashed,
            ..RecoveryReport::default()
        };
        if files.is_empty() {
            return Ok(report);
        }
        let mut first = files.len().saturating_sub(3);
        if crashed {
            let at_checkpoint = checkpoint_offset
                .and_then(|cp| files.iter().position(|f| f.start() <= cp && cp < f.end()));
            first = first.min(at_checkpoint.unwrap_or(0));
        }
        report.scanned_from = files[first].start();
        let scan = self.scan_valid(&files, first, 0, self.accept_zero_body_crc);
        report.records_checked = scan.records;
        if let Some(error) = scan.error.clone() {
            if let Some(found) = self.mid_log_corruption(&files, scan.index, scan.pos, error) {
                if !truncate_at_corruption {
                    return Err(CommitLogError::MidLogCorruption(Box::new(found)));
                }
                report.cut_corruption = Some(found);
            }
        }
        let file = &files[scan.index];
        if scan.error.is_some() {
            // SAFETY: recovery runs before the store is shared: no writer, no reader yet.
            unsafe { file.zero_from(scan.pos) };
        }
        report.truncated = scan.error;
        file.set_wrote(scan.pos);
        file.set_flushed(scan.pos);
        report.max_offset = file.start() + scan.pos as u64;
        if scan.index + 1 < files.len() {
            report.deleted_files = self.files.delete_from(files[scan.index + 1].start())?;
        }
        Ok(report)
    }

    /// Truncates the log at `offset` (a record boundary), for repair of a divergent replica.
    pub(crate) fn truncate_to(&self, offset: u64) -> Result<Vec<PathBuf>, CommitLogError> {
        let min = self.min_offset();
        let max = self.max_offset();
        if offset < min || offset > max {
            return Err(CommitLogError::OffsetOutOfRange {
                offset,
                min_offset: min,
                max_offset: max,
            });
        }
        let deleted = match self.files.find(offset) {
            Some(file) => {
                let pos = (offset - file.start()) as usize;
                // SAFETY: repair runs on a store no broker is serving (the put lock is held).
                unsafe { file.zero_from(pos) };
                file.set_wrote(pos);
                // Push the zeroed tail to disk too, so a power loss cannot resurrect it.
                file.set_flushed(0);
                file.flush(file.size())?;
                file.set_flushed(pos);
                self.files.delete_from(file.end())?
            }
            None => Vec::new(),
        };
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commitlog::record::MessageDraft;
    use crate::store::{MessageStore, StoreConfig};
    use std::net::SocketAddr;
    use std::path::Path;

    const SEGMENT: u64 = 4096;
    /// A V1 record with a 200-byte body and a one-letter topic.
    const RECORD: u64 = 91 + 200 + 1;

    fn config(dir: &Path) -> StoreConfig {
        let mut c = StoreConfig::new(dir);
        c.mapped_file_size = SEGMENT;
        c
    }

    /// `n` records of `RECORD` bytes over several 4 KiB segments; returns their offsets.
    fn write_records(dir: &Path, n: usize) -> Vec<u64> {
        let store = MessageStore::open(config(dir)).unwrap();
        let body = [7u8; 200];
        let offsets = (0..n)
            .map(|_| {
                let draft = MessageDraft {
                    topic: "T",
                    body: &body,
                    properties: b"",
                    queue_id: 0,
                    flag: 0,
                    sys_flag: 0,
                    born_timestamp: 0,
                    born_host: SocketAddr::from(([127, 0, 0, 1], 0)),
                    reconsume_times: 0,
                    prepared_tx_offset: 0,
                };
                store.put(&draft).unwrap().offset
            })
            .collect();
        store.close().unwrap();
        offsets
    }

    /// Overwrites 4 bytes of the log at `offset`.
    fn poke(dir: &Path, offset: u64, bytes: [u8; 4]) {
        use std::os::unix::fs::FileExt;
        let start = offset - offset % SEGMENT;
        let path = dir.join("commitlog").join(format!("{start:020}"));
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all_at(&bytes, offset - start).unwrap();
    }

    #[test]
    fn a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = write_records(dir.path(), 30);
        let last = *offsets.last().unwrap();
        // The last record's body CRC: nothing valid comes after it.
        poke(dir.path(), last + 8, [0, 0, 0, 1]);
        let store = MessageStore::open(config(dir.path())).unwrap();
        assert_eq!(store.max_offset(), last);
        assert_eq!(store.recovery().truncated.as_ref().unwrap().0, last);
        assert!(store.corruption().is_none());
    }

    #[test]
    fn mid_log_corruption_fails_the_open_and_is_cut_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = write_records(dir.path(), 30);
        let (bad, max) = (offsets[20], write_end(dir.path()));
        poke(dir.path(), bad + 8, [0, 0, 0, 1]);
        let Err(CommitLogError::MidLogCorruption(found)) = MessageStore::open(config(dir.path()))
        else {
            panic!("the open must fail");
        };
        assert_eq!((found.offset, found.next_valid), (bad, offsets[21]));
        assert_eq!((found.valid_records, found.valid_bytes), (9, 9 * RECORD));
        let text = found.to_string();
        for part in [
            &format!("offset {bad}"),
            &format!("9 valid records ({} bytes)", 9 * RECORD),
            "rocketha inspect",
            "--truncate-at-corruption",
            "--accept-zero-body-crc",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
        // Nothing was cut by the refused open.
        let reader = MessageStore::open(StoreConfig {
            read_only: true,
            ..config(dir.path())
        })
        .unwrap();
        assert_eq!(reader.corruption(), Some(&*found));
        drop(reader);
        let store = MessageStore::open(StoreConfig {
            truncate_at_corruption: true,
            ..config(dir.path())
        })
        .unwrap();
        assert_eq!(store.max_offset(), bad);
        assert_eq!(store.corruption(), Some(&*found));
        assert!(max > bad);
    }

    /// Where the written records end: the writer's max offset, read back.
    fn write_end(dir: &Path) -> u64 {
        let reader = MessageStore::open(StoreConfig {
            read_only: true,
            ..config(dir)
        })
        .unwrap();
        reader.max_offset()
    }

    #[test]
    fn a_zero_body_crc_is_never_cut_and_opens_with_the_opt_in() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = write_records(dir.path(), 30);
        let last = *offsets.last().unwrap();
        // Even as the last record: a complete record with BODYCRC 0 is no torn write.
        poke(dir.path(), last + 8, [0; 4]);
        let Err(CommitLogError::MidLogCorruption(found)) = MessageStore::open(config(dir.path()))
        else {
            panic!("the open must fail");
        };
        assert_eq!((found.offset, found.next_valid), (last, last));
        let store = MessageStore::open(StoreConfig {
            accept_zero_body_crc: true,
            ..config(dir.path())
        })
        .unwrap();
        assert_eq!(store.max_offset(), last + RECORD);
        let checked = store.iter_from(0, true).collect::<Result<Vec<_>, _>>();
        assert_eq!(checked.unwrap().len(), 30);
    }

    #[test]
    fn physical_offset_must_match_position() {
        assert!(check_physical_offset(10, 10).is_ok());
        assert!(check_physical_offset(10, 11).is_err());
    }
}
