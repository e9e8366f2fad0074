//! One fixed-size segment file mapped into memory: RocketMQ's `MappedFile`.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::CommitLogError;
use crate::sync::lock;

/// How far past a write the writer reserves blocks itself when the background step is behind
/// (and what consume queues, which have no background step, reserve at a time).
pub(crate) const ALLOCATE_STEP: usize = 1 << 20;

/// How far the prefault window moves at a time: one background step, about 1 ms.
pub(crate) const PREFAULT_STEP: usize = 1 << 20;

/// The most one call into the kernel covers on a background thread (a prefault, a writeback).
/// A call runs in the kernel for its whole length, and a kernel without preemption keeps its
/// CPU that long: a 32 MiB prefault held a CPU for 20 ms, on the master and the slave
/// together, while their put and HA threads waited runnable, so a SYNC send under a paced
/// load waited up to 100 ms (issue 30). 256 KiB is well under a millisecond.
const KERNEL_CHUNK: usize = 256 << 10;

/// Fault readahead of a segment's mapping: the kernel's until the writer prefaults it, off
/// while written, the kernel's again once sealed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadAhead {
    Default,
    Off,
    Sealed,
}

/// Segment files are named by their start offset as 20 zero-padded digits.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn segment_name(start: u64) -> String {
    format!("{start:020}")
}

pub(crate) struct MappedFile {
    path: PathBuf,
    start: u64,
    size: usize,
    map: MmapRaw,
    /// Bytes of this segment that hold complete data; readers never look past it.
    wrote: AtomicUsize,
    flushed: AtomicUsize,
    /// Bytes from the start whose first-write faults were taken (or are being taken) ahead of
    /// the writer.
    prefaulted: AtomicUsize,
    /// Whether faults read ahead here: see [`Self::stop_read_ahead`]. Under a lock, so that a
    /// prefault step still running when the writer moves on cannot turn it off again.
    read_ahead: Mutex<ReadAhead>,
    /// Bytes from the start whose disk blocks are reserved. A segment is created sparse at its
    /// full length and reserved in steps as the writer approaches, so a store's disk use
    /// follows what it holds; the writer never writes past this, so a full disk is an ENOSPC
    /// from fallocate before the write, never a SIGBUS from a write into a hole of the mapping.
    allocated: AtomicUsize,
}

impl MappedFile {
    /// Creates (or reuses) the segment, sparse at its full length, and maps it. `prefault`
    /// bytes from its start are reserved (so a full disk fails here, not on a page fault
    /// mid-append) and prefaulted for writing.
    pub(crate) fn create(
        dir: &Path,
        start: u64,
        size: usize,
        prefault: usize,
    ) -> Result<Self, CommitLogError> {
        Self::create_at(dir.join(segment_name(start)), start, size, prefault)
    }

    /// [`Self::create`] of a file named otherwise (an index file is named by its creation time).
    pub(crate) fn create_at(
        path: PathBuf,
        start: u64,
        size: usize,
        prefault: usize,
    ) -> Result<Self, CommitLogError> {
        // Built under a temporary name and renamed when complete, so a crash mid-creation never
        // leaves a short segment that would stop the store from opening.
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&tmp)
            .map_err(|e| CommitLogError::io(&tmp, e))?;
        let prefault = prefault.min(size);
        file.set_len(size as u64)
            .and_then(|()| reserve(&file, 0, prefault))
            .map_err(|e| CommitLogError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| CommitLogError::io(&path, e))?;
        let mut options = MmapOptions::new();
        options.len(size);
        let map = options
            .map_raw(&file)
            .map_err(|e| CommitLogError::io(&path, e))?;
        let file = Self::new(path, start, size, map);
        file.allocated.store(prefault, Ordering::Release);
        file.prefault_for_write(prefault);
        Ok(file)
    }

    /// Maps an existing segment; `writable` is false for readers sharing a live store.
    /// `size_key` names the setting `size` comes from, for the error when the file disagrees.
    pub(crate) fn open(
        path: &Path,
        start: u64,
        size: usize,
        size_key: &'static str,
        writable: bool,
    ) -> Result<Self, CommitLogError> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| CommitLogError::io(path, e))?;
        let actual = file
            .metadata()
            .map_err(|e| CommitLogError::io(path, e))?
            .len();
        if actual != size as u64 {
            return Err(CommitLogError::SegmentSizeMismatch {
                path: path.to_owned(),
                actual,
                expected: size as u64,
                key: size_key,
            });
        }
        let mut options = MmapOptions::new();
        options.len(size);
        let map = if writable {
            options.map_raw(&file)
        } else {
            options.map_raw_read_only(&file)
        }
        .map_err(|e| CommitLogError::io(path, e))?;
        Ok(Self::new(path.to_owned(), start, size, map))
    }

    fn new(path: PathBuf, start: u64, size: usize, map: MmapRaw) -> Self {
        Self {
            path,
            start,
            size,
            map,
            wrote: AtomicUsize::new(0),
            flushed: AtomicUsize::new(0),
            prefaulted: AtomicUsize::new(0),
            read_ahead: Mutex::new(ReadAhead::Default),
            allocated: AtomicUsize::new(0),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
    pub(crate) fn start(&self) -> u64 {
        self.start
    }
    pub(crate) fn size(&self) -> usize {
        self.size
    }
    pub(crate) fn end(&self) -> u64 {
        self.start + self.size as u64
    }
    /// When the segment was last written (RocketMQ's `getLastModifiedTimestamp`), which
    /// `fileReservedTime` counts from.
    pub(crate) fn last_modified(&self) -> Result<SystemTime, CommitLogError> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .map_err(|e| CommitLogError::io(&self.path, e))
    }
    pub(crate) fn wrote(&self) -> usize {
        self.wrote.load(Ordering::Acquire)
    }
    pub(crate) fn remaining(&self) -> usize {
        self.size - self.wrote()
    }
    pub(crate) fn is_full(&self) -> bool {
        self.wrote() == self.size
    }

    /// Publishes `pos` as the end of complete data: the Release pairs with readers' Acquire so
    /// the bytes before it are visible to them.
    pub(crate) fn set_wrote(&self, pos: usize) {
        debug_assert!(pos <= self.size);
        self.wrote.store(pos, Ordering::Release);
    }

    /// The complete bytes `[pos, wrote)`.
    pub(crate) fn readable(&self, pos: usize) -> &[u8] {
        let end = self.wrote();
        if pos >= end {
            return &[];
        }
        // SAFETY: the map lives as long as `self`; bytes below `wrote` were written before
        // `wrote` was published (Release/Acquire) and are never written again while the file
        // is in the queue, so no one mutates them while this shared slice exists.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(pos), end - pos) }
    }

    /// The whole mapping, including bytes not yet published: only for recovery and read-only
    /// scanning, where no writer exists in this process.
    pub(crate) fn whole(&self) -> &[u8] {
        // SAFETY: see `readable`; callers of `whole` run when no writer of this process is
        // active (recovery before the store opens, or a read-only map). Another process may
        // still be appending, which is why every reader validates what it decodes.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.size) }
    }

    /// The unpublished bytes `[pos, pos + len)` for the single writer to fill.
    ///
    /// # Safety
    /// The caller must hold the store's put lock (one writer at a time) and `pos` must be at or
    /// after `wrote`, so no reader can be looking at these bytes.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn writable(&self, pos: usize, len: usize) -> &mut [u8] {
        assert!(
            pos + len <= self.size,
            "write past the end of {}",
            self.path.display()
        );
        std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(pos), len)
    }

    /// Reserves the blocks of `[allocated, until)`; the caller is the writer or the background
    /// step ahead of it (both may run at once: fallocate of a reserved range is a no-op).
    pub(crate) fn allocate(&self, until: usize) -> Result<(), CommitLogError> {
        let until = until.min(self.size);
        let from = self.allocated.load(Ordering::Acquire);
        if until <= from {
            return Ok(());
        }
        // Opened for the call rather than kept: one fd per segment would add up over many
        // consume queues, and a step comes once per megabytes written.
        OpenOptions::new()
            .write(true)
            .open(&self.path)
            .and_then(|file| reserve(&file, from, until - from))
            .map_err(|e| CommitLogError::io(&self.path, e))?;
        self.allocated.fetch_max(until, Ordering::AcqRel);
        Ok(())
    }

    /// Makes sure `[0, end)` is reserved before the writer writes there: at once when the
    /// background step already did it, else a step past `end` now.
    pub(crate) fn ensure_allocated(&self, end: usize) -> Result<(), CommitLogError> {
        if end <= self.allocated.load(Ordering::Acquire) {
            return Ok(());
        }
        self.allocate(end + ALLOCATE_STEP)
    }

    /// msyncs `[flushed, up_to)` and returns how many bytes that covered.
    pub(crate) fn flush(&self, up_to: usize) -> Result<usize, CommitLogError> {
        let from = self.flushed.load(Ordering::Acquire);
        if up_to <= from {
            return Ok(0);
        }
        let page_from = from & !(4095);
        self.start_writeback(page_from, up_to)
            .map_err(|e| CommitLogError::io(&self.path, e))?;
        self.map
            .flush_range(page_from, up_to - page_from)
            .map_err(|e| CommitLogError::io(&self.path, e))?;
        self.flushed.store(up_to, Ordering::Release);
        Ok(up_to - from)
    }

    /// Starts writing `[from, to)` back a chunk at a time, so that the msync after it only
    /// waits: one msync over megabytes submits all their pages in one stretch in the kernel
    /// (4 ms every 500 ms at 30 MB/s, while sends waited runnable behind it).
    fn start_writeback(&self, from: usize, to: usize) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        if to - from <= KERNEL_CHUNK {
            return Ok(());
        }
        let file = OpenOptions::new().read(true).open(&self.path)?;
        for chunk in (from..to).step_by(KERNEL_CHUNK) {
            let len = KERNEL_CHUNK.min(to - chunk);
            // SAFETY: takes no pointers; the fd is open for the call.
            let rc = unsafe {
                libc::sync_file_range(
                    file.as_raw_fd(),
                    chunk as libc::off64_t,
                    len as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    pub(crate) fn flushed(&self) -> usize {
        self.flushed.load(Ordering::Acquire)
    }

    /// Marks everything already on disk as flushed (after recovery).
    pub(crate) fn set_flushed(&self, pos: usize) {
        self.flushed.store(pos, Ordering::Release);
    }

    /// Takes the first-write faults of the pages up to `until` now, on a background thread,
    /// instead of one fault per 4 KiB on the append path (a shared file mapping faults again on
    /// the first write even after a read prefault, to track dirtiness). Best effort: before
    /// Linux 5.14 the advice is unknown and the pages are only read in.
    pub(crate) fn prefault_for_write(&self, until: usize) {
        // Pages the writer already passed need no prefault.
        let from = self
            .prefaulted
            .fetch_max(until, Ordering::AcqRel)
            .max(self.wrote() & !4095);
        if from >= until {
            return;
        }
        self.stop_read_ahead();
        for chunk in (from..until).step_by(KERNEL_CHUNK) {
            // SAFETY: `chunk < until <= size`, so the range lies inside the mapping.
            let ptr = unsafe { self.map.as_mut_ptr().add(chunk) }.cast();
            let len = KERNEL_CHUNK.min(until - chunk);
            // Pages first, read in for exactly this range: the fault of a page not yet cached
            // reads ahead as far as the device's readahead (8 MiB here), zero-filling it all
            // in one stretch that no step size bounds. Then the first-write faults, over
            // pages now cached. SAFETY: advice over our own live mapping; neither changes its
            // contents (MADV_POPULATE_WRITE faults pages in writable, as they are), so it is
            // safe beside a concurrent writer.
            unsafe {
                libc::madvise(ptr, len, libc::MADV_WILLNEED);
                libc::madvise(ptr, len, libc::MADV_POPULATE_WRITE);
            }
            // Between chunks, whatever waits for this CPU runs first.
            std::thread::yield_now();
        }
    }

    /// Turns the kernel's fault readahead off for this mapping while the writer writes here
    /// ([`Self::seal`] turns it back on for good). On, the fault of a page not yet cached reads
    /// ahead as far as the device's readahead, and marks a page whose own fault later reads
    /// ahead again: the prefault kept reaching those marks and zero-filled 8 MiB at a time,
    /// 20 ms without a break, whatever its own chunk. Off, the prefault's MADV_WILLNEED reads
    /// in exactly its chunk.
    fn stop_read_ahead(&self) {
        let mut state = lock(&self.read_ahead);
        if *state == ReadAhead::Default {
            self.advise(libc::MADV_RANDOM);
            *state = ReadAhead::Off;
        }
    }

    /// The writer has moved on: faults read ahead again, for readers far behind.
    pub(crate) fn seal(&self) {
        let mut state = lock(&self.read_ahead);
        if *state == ReadAhead::Off {
            self.advise(libc::MADV_NORMAL);
        }
        *state = ReadAhead::Sealed;
    }

    fn advise(&self, advice: libc::c_int) {
        // SAFETY: advice over our own whole live mapping; it changes none of its contents.
        unsafe { libc::madvise(self.map.as_mut_ptr().cast(), self.size, advice) };
    }

    pub(crate) fn prefaulted(&self) -> usize {
        self.prefaulted.load(Ordering::Acquire)
    }

    /// Zeroes `[pos, size)` so bytes past a truncation point never look like data again.
    ///
    /// # Safety
    /// As for [`MappedFile::writable`].
    pub(crate) unsafe fn zero_from(&self, pos: usize) {
        let tail = self.writable(pos, self.size - pos);
        // Only touch pages that hold something: a preallocated tail is already zero.
        for chunk in tail.chunks_mut(4096) {
            if chunk.iter().any(|&b| b != 0) {
                chunk.fill(0);
            }
        }
    }
}

fn reserve(file: &File, from: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: a plain syscall on an fd we own.
    let rc =
        unsafe { libc::posix_fallocate(file.as_raw_fd(), from as libc::off_t, len as libc::off_t) };
    match rc {
        0 => Ok(()),
        // Filesystems without fallocate (tmpfs on old kernels, some overlays): the file stays
        // sparse rather than refusing to run.
        libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        err => Err(std::io::Error::from_raw_os_error(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `VmFlags` of the mapping that starts at `addr`, from `/proc/self/smaps`.
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let start = format!("{addr:x}-");
        smaps
            .lines()
            .skip_while(|l| !l.starts_with(&start))
            .find_map(|l| l.strip_prefix("VmFlags:"))
            .unwrap_or_else(|| panic!("no mapping at {addr:x}"))
            .to_owned()
    }

    /// Which of the first `pages` pages of the mapping are in the page cache.
    fn resident(file: &MappedFile, pages: usize) -> Vec<bool> {
        let mut vec = vec![0u8; pages];
        // SAFETY: the range lies inside the live mapping and `vec` holds a byte per page.
        let rc =
            unsafe { libc::mincore(file.map.as_mut_ptr().cast(), pages * 4096, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        vec.iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn a_prefault_reads_in_its_pages_and_no_more_while_the_segment_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let prefault = 2 * KERNEL_CHUNK;
        let file = MappedFile::create(dir.path(), 0, 16 * KERNEL_CHUNK, prefault).unwrap();
        let addr = file.map.as_ptr() as usize;
        // Fault readahead off while written: a fault would otherwise zero-fill as far as the
        // device reads ahead, in one stretch.
        assert!(vm_flags(addr).split_whitespace().any(|f| f == "rr"));
        let pages = resident(&file, 16 * KERNEL_CHUNK / 4096);
        assert!(pages[..prefault / 4096].iter().all(|r| *r), "{pages:?}");
        assert!(pages[prefault / 4096..].iter().all(|r| !*r), "{pages:?}");
        // Sealed, it reads ahead again for readers far behind, whatever a prefault step still
        // running does.
        file.seal();
        assert!(!vm_flags(addr).split_whitespace().any(|f| f == "rr"));
        file.prefault_for_write(3 * KERNEL_CHUNK);
        assert!(!vm_flags(addr).split_whitespace().any(|f| f == "rr"));
    }
}
