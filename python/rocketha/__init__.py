"""rocketha: RocketMQ's commit log and master/slave replication, for Python, with a Rust core.

Start with :class:`MessageStore` (a local commit log) or :class:`Broker` (a master or slave
configured like RocketMQ's ``broker.conf``); :class:`NameServer` is RocketMQ's name server.
"""

import sys

if sys.platform != "linux":
    raise ImportError(
        f"rocketha runs on Linux only (its core uses epoll, flock and fallocate); this is "
        f"{sys.platform}. Wheels exist for Linux x86_64 and aarch64."
    )

from rocketha._core import Message, MessageExt, PutResult, __version__
from rocketha.acl import SessionCredentials
from rocketha.admin import Admin
from rocketha.broker import Broker, GetMessageResult
from rocketha.client import Producer, SendResult, SendStatus, TransactionSendResult
from rocketha.config import BrokerConfig
from rocketha.consumer import ConsumeFromWhere, PullConsumer
from rocketha.exceptions import (
    CommitLogCorrupted,
    ConfigError,
    DiskFullError,
    ForkedProcessError,
    HAError,
    InvalidMessageError,
    MQBrokerError,
    MQClientError,
    NotMasterError,
    OffsetMismatch,
    OffsetTooSmallError,
    RemotingConnectError,
    RocketHAError,
    SendStatusUnknownError,
    StoreClosedError,
    StoreLockedError,
)
from rocketha.ha import HAService
from rocketha.namesrv import NameServer
from rocketha.push_consumer import ConsumeResult, PushConsumer
from rocketha.roles import BrokerRole, FlushDiskType, PutStatus
from rocketha.selector import MessageSelector
from rocketha.store import MessageStore
from rocketha.transaction import TransactionState

__all__ = [
    "Admin",
    "Broker",
    "BrokerConfig",
    "BrokerRole",
    "CommitLogCorrupted",
    "ConfigError",
    "ConsumeFromWhere",
    "ConsumeResult",
    "DiskFullError",
    "FlushDiskType",
    "ForkedProcessError",
    "GetMessageResult",
    "HAError",
    "HAService",
    "InvalidMessageError",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageSelector",
    "MessageStore",
    "NameServer",
    "NotMasterError",
    "OffsetMismatch",
    "OffsetTooSmallError",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "PutResult",
    "PutStatus",
    "RemotingConnectError",
    "RocketHAError",
    "SendResult",
    "SendStatus",
    "SendStatusUnknownError",
    "SessionCredentials",
    "StoreClosedError",
    "StoreLockedError",
    "TransactionSendResult",
    "TransactionState",
    "__version__",
]
