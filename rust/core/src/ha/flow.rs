//! RocketMQ's `FlowMonitor` (`haFlowControlEnable`, `maxHaTransferByteInSecond`): at most
//! `limit` bytes to one slave per one-second window. ▲ Bodies count too, not only headers.

use std::time::{Duration, Instant};

/// One connection's window. Time comes in as `now`, so the arithmetic tests without a clock.
pub(super) struct FlowMonitor {
    start: Instant,
    bytes: u64,
}

impl FlowMonitor {
    const WINDOW: Duration = Duration::from_secs(1);

    pub(super) fn new(now: Instant) -> Self {
        Self {
            start: now,
            bytes: 0,
        }
    }

    /// How many body bytes may go out now, at most `batch`; 0 until the window reopens once
    /// its budget is spent.
    pub(super) fn allowance(&mut self, limit: Option<u64>, batch: usize, now: Instant) -> usize {
        let Some(limit) = limit else { return batch };
        if now >= self.start + Self::WINDOW {
            *self = Self::new(now);
        }
        batch.min(limit.saturating_sub(self.bytes) as usize)
    }

    pub(super) fn sent(&mut self, body: usize) {
        self.bytes += body as u64;
    }

    pub(super) fn spent(&self, limit: Option<u64>, now: Instant) -> bool {
        limit.is_some_and(|l| now < self.reopens_at() && self.bytes >= l)
    }

    pub(super) fn reopens_at(&self) -> Instant {
        self.start + Self::WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_control_spends_a_budget_per_second_of_body_bytes() {
        let t0 = Instant::now();
        let (limit, batch) = (Some(100_000), 32 * 1024);
        let mut flow = FlowMonitor::new(t0);
        let mut sent = 0;
        while !flow.spent(limit, t0) {
            let n = flow.allowance(limit, batch, t0);
            assert!(n > 0 && n <= batch);
            flow.sent(n);
            sent += n;
        }
        assert_eq!(sent, 100_000);
        assert_eq!(
            flow.allowance(limit, batch, t0 + Duration::from_millis(999)),
            0
        );
        assert_eq!(flow.reopens_at(), t0 + Duration::from_secs(1));
        // The next window brings a fresh budget.
        let t1 = t0 + Duration::from_secs(1);
        assert!(!flow.spent(limit, t1));
        assert_eq!(flow.allowance(limit, batch, t1), batch);
        // Without a limit, every batch is allowed.
        assert_eq!(FlowMonitor::new(t0).allowance(None, batch, t0), batch);
        assert!(!flow.spent(None, t0));
    }
}
