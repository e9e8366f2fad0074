"""rocketha: RocketMQ's commit log and master/slave replication, for Python, with a Rust core.

Start with :class:`MessageStore` (a local commit log) or :class:`Broker` (a master or slave
configured like RocketMQ's ``broker.conf``).
"""

from rocketha._core import Message, MessageExt, PutResult, __version__
from rocketha.exceptions import (
    CommitLogCorrupted,
    ConfigError,
    ForkedProcessError,
    HAError,
    InvalidMessageError,
    NotMasterError,
    OffsetMismatch,
    RocketHAError,
    StoreClosedError,
    StoreLockedError,
)
from rocketha.roles import BrokerRole, FlushDiskType, PutStatus
from rocketha.store import MessageStore

__all__ = [
    "BrokerRole",
    "CommitLogCorrupted",
    "ConfigError",
    "FlushDiskType",
    "ForkedProcessError",
    "HAError",
    "InvalidMessageError",
    "Message",
    "MessageExt",
    "MessageStore",
    "NotMasterError",
    "OffsetMismatch",
    "PutResult",
    "PutStatus",
    "RocketHAError",
    "StoreClosedError",
    "StoreLockedError",
    "__version__",
]
