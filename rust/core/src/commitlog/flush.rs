//! Flushing the commit log to disk: RocketMQ's `FlushRealTimeService` (ASYNC_FLUSH) and
//! `GroupCommitService` (SYNC_FLUSH) in one thread.
//!
//! In SYNC_FLUSH a put waits until an msync covers its bytes. Requests that arrive while an
//! msync runs are all covered by the next one: that sharing is the group commit.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::CommitLogError;

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
    error: Option<String>,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the flush thread: a sync put asked for a flush, or the service is stopping.
    work: Condvar,
    /// Wakes sync puts: the flushed offset moved.
    done: Condvar,
}

/// What the flush thread calls: msync everything written so far, return the new flushed end.
pub(crate) type FlushFn = Box<dyn FnMut() -> Result<u64, CommitLogError> + Send>;

pub(crate) struct FlushService {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl FlushService {
    pub(crate) fn start(interval: Duration, mut flush: FlushFn, flushed_offset: u64) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stats: FlushStats {
                    flushed_offset,
                    ..FlushStats::default()
                },
                ..State::default()
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rocketha-flush".into())
            .spawn(move || {
                let mut next_periodic = Instant::now() + interval;
                loop {
                    {
                        let mut st = worker.state.lock().unwrap_or_else(|p| p.into_inner());
                        while !st.stop && st.requested <= st.stats.flushed_offset {
                            let now = Instant::now();
                            if now >= next_periodic {
                                break;
                            }
                            st = worker
                                .work
                                .wait_timeout(st, next_periodic - now)
                                .unwrap_or_else(|p| p.into_inner())
                                .0;
                        }
                    }
                    next_periodic = Instant::now() + interval;
                    let result = flush();
                    let mut st = worker.state.lock().unwrap_or_else(|p| p.into_inner());
                    match result {
                        Ok(offset) => {
                            st.stats.msyncs += 1;
                            st.stats.flushed_offset = st.stats.flushed_offset.max(offset);
                            st.error = None;
                        }
                        Err(e) => st.error = Some(e.to_string()),
                    }
                    let stop = st.stop;
                    worker.done.notify_all();
                    if stop {
                        // The final flush above covered everything; waiters see `stop`.
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

    /// Blocks until `offset` is flushed: the SYNC_FLUSH wait. `false` on timeout.
    pub(crate) fn wait_flushed(
        &self,
        offset: u64,
        timeout: Duration,
    ) -> Result<bool, CommitLogError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.stats.flushed_offset >= offset {
            return Ok(true);
        }
        st.stats.sync_requests += 1;
        if offset > st.requested {
            st.requested = offset;
            self.shared.work.notify_one();
        }
        while st.stats.flushed_offset < offset {
            if st.stop
                && self
                    .thread
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_none()
            {
                return Err(CommitLogError::Closed);
            }
            if let Some(e) = &st.error {
                return Err(CommitLogError::io(
                    "commitlog",
                    std::io::Error::other(e.clone()),
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            st = self
                .shared
                .done
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(true)
    }

    pub(crate) fn stats(&self) -> FlushStats {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stats
    }

    /// Runs a last flush, then ends the thread.
    pub(crate) fn stop(&self) {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stop = true;
        self.shared.work.notify_all();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        self.shared.done.notify_all();
    }
}

impl Drop for FlushService {
    fn drop(&mut self) {
        self.stop();
    }
}
