"""Every error rocketha raises derives from :class:`RocketHAError`.

I/O failures keep their built-in ``OSError`` subclass (``FileNotFoundError``, ``PermissionError``,
an ``OSError`` with ``errno.ENOSPC`` for a full disk) so the usual ``except`` clauses work; their
messages name the file.
"""

from rocketha._core import (
    CommitLogCorrupted,
    ConfigError,
    DiskFullError,
    ForkedProcessError,
    HAError,
    InvalidMessageError,
    NotMasterError,
    OffsetMismatch,
    OffsetTooSmallError,
    RemotingConnectError,
    RocketHAError,
    SendStatusUnknownError,
    StoreClosedError,
    StoreLockedError,
)


class MQClientError(RocketHAError):
    """A client cannot do what was asked (no route for the topic, every attempt failed)."""


class MQBrokerError(RocketHAError):
    """A broker refused a request: RocketMQ's response ``code`` and the broker's ``remark``."""

    def __init__(self, code: int, remark: str, broker_addr: str) -> None:
        super().__init__(f"broker {broker_addr} answered code {code}: {remark}")
        self.code = code
        self.remark = remark
        self.broker_addr = broker_addr


__all__ = [
    "CommitLogCorrupted",
    "ConfigError",
    "DiskFullError",
    "ForkedProcessError",
    "HAError",
    "InvalidMessageError",
    "MQBrokerError",
    "MQClientError",
    "NotMasterError",
    "OffsetMismatch",
    "OffsetTooSmallError",
    "RemotingConnectError",
    "RocketHAError",
    "SendStatusUnknownError",
    "StoreClosedError",
    "StoreLockedError",
]
