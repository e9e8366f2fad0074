//! Flushing the commit log to disk: RocketMQ's `FlushRealTimeService` (ASYNC_FLUSH) and
//! `GroupCommitService` (SYNC_FLUSH) in one thread.
//!
//! In SYNC_FLUSH a put asks for an msync covering its bytes ([`FlushService::request`]) and waits
//! for it in the GroupTransferService, which every msync's outcome is reported to. Requests that
//! arrive while an msync runs are all covered by the next one: that sharing is the group commit.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::CommitLogError;
use crate::sync::{lock, wait_until};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDiskType {
    AsyncFlush,
    SyncFlush,
}

/// Counters of the flush thread, for benchmarks and metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlushStats {
    pub msyncs: u64,
    pub sync_requests: u64,
    pub flushed_offset: u64,
}

#[derive(Default)]
struct State {
    requested: u64,
    stats: FlushStats,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the flush thread: a sync put asked for a flush, or the service is stopping.
    work: Condvar,
}

/// What the flush thread calls: msync everything written so far, return the new flushed end.
pub(crate) type FlushFn = Box<dyn FnMut() -> Result<u64, CommitLogError> + Send>;
/// Told the outcome of every msync: the flushed end, or the error.
pub(crate) type FlushListener = Box<dyn Fn(Result<u64, &CommitLogError>) + Send>;

pub(crate) struct FlushService {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl FlushService {
    pub(crate) fn start(
        interval: Duration,
        mut flush: FlushFn,
        flushed_offset: u64,
        listener: FlushListener,
    ) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stats: FlushStats {
                    flushed_offset,
                    ..FlushStats::default()
                },
                ..State::default()
            }),
            work: Condvar::new(),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rocketha-flush".into())
            .spawn(move || {
                let mut failed = false;
                loop {
                    let periodic = Instant::now() + interval;
                    let stop = {
                        let st = lock(&worker.state);
                        // After a failure, retry at the periodic pace, not in a loop on the error.
                        let (st, _) = wait_until(&worker.work, st, Some(periodic), |st| {
                            st.stop || (!failed && st.requested > st.stats.flushed_offset)
                        });
                        st.stop
                    };
                    let result = flush();
                    failed = result.is_err();
                    if let Ok(offset) = &result {
                        let mut st = lock(&worker.state);
                        st.stats.msyncs += 1;
                        st.stats.flushed_offset = st.stats.flushed_offset.max(*offset);
                    }
                    listener(result.as_ref().copied());
                    if stop {
                        // The flush above covered everything written before the stop.
                        break;
                    }
                }
            })
            .ok();
        Self {
            shared,
            thread: Mutex::new(thread),
        }
    }

    /// Asks for an msync covering `offset` (SYNC_FLUSH); the outcome reaches the listener.
    pub(crate) fn request(&self, offset: u64) {
        let mut st = lock(&self.shared.state);
        st.stats.sync_requests += 1;
        if offset > st.requested {
            st.requested = offset;
            if offset > st.stats.flushed_offset {
                self.shared.work.notify_one();
            }
        }
    }

    pub(crate) fn stats(&self) -> FlushStats {
        lock(&self.shared.state).stats
    }

    /// Runs a last flush, then ends the thread.
    pub(crate) fn stop(&self) {
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_all();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Drop for FlushService {
    fn drop(&mut self) {
        self.stop();
    }
}
