//! Recovery on open: find the end of valid data and cut off a torn or corrupt tail.
//!
//! Like RocketMQ, the last three segments are re-validated on every open (size, magic, CRC,
//! computed length, physical offset field); after a crash (the `abort` marker survived) the
//! scan starts earlier, at the segment of the last checkpointed flush, if that is older.

use std::path::PathBuf;
use std::sync::Arc;

use super::mapped_file::MappedFile;

use super::record::{self, Peeked};
use super::CommitLog;
use crate::error::{CommitLogError, RecordError};

/// What recovery found and did, for the store to log.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    pub max_offset: u64,
    /// First offset that was re-validated; consume queues are re-dispatched from here.
    pub scanned_from: u64,
    pub records_checked: u64,
    /// Where the log was cut, why, and in which file.
    pub truncated: Option<(u64, PathBuf, RecordError)>,
    pub deleted_files: Vec<PathBuf>,
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
    pub(crate) error: Option<(u64, PathBuf, RecordError)>,
}

impl CommitLog {
    /// Decodes and validates records from the start of `files[first]` on, over whole mappings
    /// (published or not), and reports where valid data ends.
    pub(crate) fn scan_valid(
        &self,
        files: &[Arc<MappedFile>],
        first: usize,
        first_pos: usize,
    ) -> ScanOutcome {
        let mut out = ScanOutcome {
            index: files.len().saturating_sub(1),
            pos: files.last().map_or(0, |f| f.size()),
            records: 0,
            error: None,
        };
        let mut pos = first_pos;
        for (i, file) in files.iter().enumerate().skip(first) {
            let whole = file.whole();
            while pos < whole.len() {
                let offset = file.start() + pos as u64;
                let checked = record::decode(&whole[pos..], true).and_then(|p| {
                    if let Peeked::Record(r) = &p {
                        check_physical_offset(r.physical_offset, offset)?;
                    }
                    Ok(p)
                });
                match checked {
                    Ok(Peeked::Record(r)) => {
                        out.records += 1;
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

    /// Scans from the chosen segment, fixes write positions, truncates the invalid tail.
    pub(crate) fn recover(
        &self,
        crashed: bool,
        checkpoint_offset: Option<u64>,
    ) -> Result<RecoveryReport, CommitLogError> {
        let files = self.files.files();
        let mut report = RecoveryReport::default();
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
        let scan = self.scan_valid(&files, first, 0);
        report.records_checked = scan.records;
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

    #[test]
    fn physical_offset_must_match_position() {
        assert!(check_physical_offset(10, 10).is_ok());
        assert!(check_physical_offset(10, 11).is_err());
    }
}
