"""The enums of RocketMQ's broker configuration and of a put's outcome."""

from enum import StrEnum

from rocketha import _core


class BrokerRole(StrEnum):
    """``brokerRole``: how a broker takes part in replication."""

    ASYNC_MASTER = "ASYNC_MASTER"
    """A put returns once stored locally; slaves catch up in the background."""
    SYNC_MASTER = "SYNC_MASTER"
    """A put waits until ``inSyncReplicas - 1`` slaves acknowledged it."""
    SLAVE = "SLAVE"
    """Replicates a master; read-only for clients."""

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE


class FlushDiskType(StrEnum):
    """``flushDiskType``: when a put counts as stored on disk."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    """A background thread msyncs every ``flushIntervalCommitLog`` ms."""
    SYNC_FLUSH = "SYNC_FLUSH"
    """A put returns after the msync that covers it (group commit)."""


class PutStatus(StrEnum):
    """How a put ended (RocketMQ's ``PutMessageStatus``)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    """SYNC_FLUSH: the msync did not finish within ``syncFlushTimeout``."""
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    """SYNC_MASTER: stored on the master, not acknowledged within ``slaveTimeout``."""
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    """SYNC_MASTER: stored on the master; no slave connected, or too far behind."""


# Results of the native store compare with ``is`` against these members.
_core.register_put_status(PutStatus)

__all__ = ["BrokerRole", "FlushDiskType", "PutStatus"]
