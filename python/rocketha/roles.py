"""The enums of RocketMQ's broker configuration and of a put's outcome."""

from enum import StrEnum

from rocketha._core import PutStatus


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


__all__ = ["BrokerRole", "FlushDiskType", "PutStatus"]
