"""Every error rocketha raises derives from :class:`RocketHAError`.

I/O failures keep their built-in ``OSError`` subclass (``FileNotFoundError``, ``PermissionError``,
an ``OSError`` with ``errno.ENOSPC`` for a full disk) so the usual ``except`` clauses work; their
messages name the file.
"""

from rocketha._core import (
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

__all__ = [
    "CommitLogCorrupted",
    "ConfigError",
    "ForkedProcessError",
    "HAError",
    "InvalidMessageError",
    "NotMasterError",
    "OffsetMismatch",
    "RocketHAError",
    "StoreClosedError",
    "StoreLockedError",
]
