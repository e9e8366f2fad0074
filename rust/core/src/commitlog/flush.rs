//! Flushing the commit log to disk: RocketMQ's `FlushRealTimeService` (ASYNC_FLUSH) and
//! `GroupCommitService` (SYNC_FLUSH) in one thread.
//!
//! In SYNC_FLUSH a put asks for an msync covering its bytes ([`FlushService::request`]) and waits
//! for it in the GroupTransferService, which every msync's outcome is reported to. Requests that
//! arrive while an msync runs are all covered by the next one: that sharing is the group commit.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::CommitLogError;
use crate::sync::{lock, ServiceThread};

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
}

/// What the flush thread calls: msync everything written so far, return the new flushed end.
pub(crate) type FlushFn = Box<dyn FnMut() -> Result<u64, CommitLogError> + Send>;
/// Told the outcome of every msync: the flushed end, or the error.
pub(crate) type FlushListener = Box<dyn Fn(Result<u64, &CommitLogError>) + Send>;

pub(crate) struct FlushService {
    state: Arc<Mutex<State>>,
    /// Woken by a sync put that asks for a flush the last msync did not cover.
    service: ServiceThread,
}

impl FlushService {
    pub(crate) fn start(
        interval: Duration,
        mut flush: FlushFn,
        flushed_offset: u64,
        listener: FlushListener,
    ) -> Self {
        let state = Arc::new(Mutex::new(State {
            stats: FlushStats {
                flushed_offset,
                ..FlushStats::default()
            },
            ..State::default()
        }));
        let worker = state.clone();
        let service = ServiceThread::new("flush");
        // Without its thread the store still runs; its puts then wait to their deadlines.
        let _ = service.start(move |waiter| {
            let mut failed = false;
            loop {
                let periodic = Instant::now() + interval;
                // After a failure, retry at the periodic pace, not in a loop on the error. A
                // request that comes after this look wakes the wait below.
                let asked = {
                    let st = lock(&worker);
                    !failed && st.requested > st.stats.flushed_offset
                };
                if !asked {
                    waiter.wait_for_running(Some(periodic));
                }
                let stop = waiter.is_stopped();
                let result = flush();
                failed = result.is_err();
                if let Ok(offset) = &result {
                    let mut st = lock(&worker);
                    st.stats.msyncs += 1;
                    st.stats.flushed_offset = st.stats.flushed_offset.max(*offset);
                }
                // Outside the state lock: the listener completes puts.
                listener(result.as_ref().copied());
                if stop {
                    // The flush above covered everything written before the stop.
                    break;
                }
            }
        });
        Self { state, service }
    }

    /// Asks for an msync covering `offset` (SYNC_FLUSH); the outcome reaches the listener.
    pub(crate) fn request(&self, offset: u64) {
        let wake = {
            let mut st = lock(&self.state);
            st.stats.sync_requests += 1;
            let wake = offset > st.requested && offset > st.stats.flushed_offset;
            st.requested = st.requested.max(offset);
            wake
        };
        if wake {
            self.service.wakeup();
        }
    }

    pub(crate) fn stats(&self) -> FlushStats {
        lock(&self.state).stats
    }

    /// Runs a last flush, then ends the thread.
    pub(crate) fn stop(&self) {
        self.service.shutdown();
    }
}
