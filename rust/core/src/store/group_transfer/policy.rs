//! What a put waits for, and what it is told: the policy the role and flush type set, and
//! RocketMQ's `PutMessageStatus`.

use std::time::Duration;

/// The outcome of a put, as RocketMQ's `PutMessageStatus` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutStatus {
    PutOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
}

impl PutStatus {
    pub const ALL: [PutStatus; 4] = [
        PutStatus::PutOk,
        PutStatus::FlushDiskTimeout,
        PutStatus::FlushSlaveTimeout,
        PutStatus::SlaveNotAvailable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PutStatus::PutOk => "PUT_OK",
            PutStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            PutStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            PutStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
        }
    }
}

/// What a put waits for, set from the role and flush type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitPolicy {
    /// SYNC_FLUSH: how long to wait for the msync (`syncFlushTimeout`); `None` for ASYNC_FLUSH.
    pub sync_flush_timeout: Option<Duration>,
    /// SYNC_MASTER: distinct slaves that must ack (`inSyncReplicas - 1`); 0 otherwise.
    pub slaves: usize,
    /// `slaveTimeout`.
    pub slave_timeout: Duration,
    /// `haMaxGapNotInSync`: RocketMQ's `isSlaveOK` refuses to wait on a slave further behind.
    pub max_gap_not_in_sync: u64,
    /// Controller mode, as master: its SyncStateSet's size, itself included (RocketMQ's
    /// `inSyncReplicasNums`). A put then waits for its slaves up to `slaveTimeout` without the
    /// `isSlaveOK` check (RocketMQ 5's controller-mode master never answers SLAVE_NOT_AVAILABLE:
    /// a member that has not reported yet, as a RocketMQ slave does only every
    /// `haSendHeartbeatInterval` when idle, is waited for); `None` in classic HA.
    pub in_sync_replicas: Option<usize>,
    /// `minInSyncReplicas`: with `in_sync_replicas`, a put that waits for replication is refused
    /// before its append while the SyncStateSet is smaller (see [`WaitPolicy::admits`]).
    pub min_in_sync_replicas: usize,
}

impl Default for WaitPolicy {
    /// ASYNC_MASTER with ASYNC_FLUSH, RocketMQ's defaults for the rest.
    fn default() -> Self {
        Self {
            sync_flush_timeout: None,
            slaves: 0,
            slave_timeout: Duration::from_millis(3000),
            max_gap_not_in_sync: 256 << 20,
            in_sync_replicas: None,
            min_in_sync_replicas: 1,
        }
    }
}

impl WaitPolicy {
    /// The soonest any request under this policy can be due.
    pub(super) fn shortest_timeout(&self) -> Duration {
        self.sync_flush_timeout
            .map_or(self.slave_timeout, |t| t.min(self.slave_timeout))
    }

    /// Whether a put must wait at all: without it, every put is PUT_OK once appended.
    pub fn waits(&self) -> bool {
        self.sync_flush_timeout.is_some() || self.slaves > 0
    }

    /// RocketMQ's check before a controller-mode append: `inSyncReplicasNums` at least
    /// `minInSyncReplicas` (IN_SYNC_REPLICAS_NOT_ENOUGH otherwise); always true in classic HA.
    pub fn admits(&self) -> Result<(), (usize, usize)> {
        match self.in_sync_replicas {
            Some(n) if n < self.min_in_sync_replicas => Err((n, self.min_in_sync_replicas)),
            _ => Ok(()),
        }
    }
}
