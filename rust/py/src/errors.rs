//! One Python exception hierarchy rooted at `RocketHAError`, and the mapping from core errors.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Once;

use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;
use pyo3::{create_exception, PyErr};
use rocketha_core::client::SendError;
use rocketha_core::error::{CommitLogError, HaError};

create_exception!(
    rocketha._core,
    RocketHAError,
    PyException,
    "Root of every rocketha error."
);
create_exception!(
    rocketha._core,
    ConfigError,
    RocketHAError,
    "A broker.conf key or value is invalid."
);
create_exception!(
    rocketha._core,
    InvalidMessageError,
    RocketHAError,
    "A message cannot be stored as given."
);
create_exception!(
    rocketha._core,
    CommitLogCorrupted,
    RocketHAError,
    "The commit log holds bytes that are not a valid record."
);
create_exception!(
    rocketha._core,
    OffsetMismatch,
    RocketHAError,
    "Replicated data does not start at the log's end offset."
);
create_exception!(
    rocketha._core,
    StoreLockedError,
    RocketHAError,
    "The store is open in another process."
);
create_exception!(
    rocketha._core,
    StoreClosedError,
    RocketHAError,
    "The store or service was closed."
);
create_exception!(
    rocketha._core,
    NotMasterError,
    RocketHAError,
    "A write was sent to a SLAVE broker."
);
create_exception!(
    rocketha._core,
    HAError,
    RocketHAError,
    "Replication failed."
);
create_exception!(
    rocketha._core,
    ForkedProcessError,
    RocketHAError,
    "A handle was used in a child process after fork."
);
create_exception!(
    rocketha._core,
    DiskFullError,
    RocketHAError,
    "A put was refused: the disk is past diskSpaceWarningLevelRatio (RocketMQ's SERVICE_NOT_AVAILABLE)."
);
create_exception!(
    rocketha._core,
    OffsetTooSmallError,
    RocketHAError,
    "A queue offset below the queue's min offset: retention deleted it (RocketMQ's OFFSET_TOO_SMALL)."
);

create_exception!(
    rocketha._core,
    RemotingConnectError,
    RocketHAError,
    "A request could not be sent: the connection failed. Safe to retry elsewhere."
);
create_exception!(
    rocketha._core,
    SendStatusUnknownError,
    RocketHAError,
    "A request was sent but its answer never came: the message may or may not be stored."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RocketHAError", py.get_type::<RocketHAError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("InvalidMessageError", py.get_type::<InvalidMessageError>())?;
    m.add("CommitLogCorrupted", py.get_type::<CommitLogCorrupted>())?;
    m.add("OffsetMismatch", py.get_type::<OffsetMismatch>())?;
    m.add("StoreLockedError", py.get_type::<StoreLockedError>())?;
    m.add("StoreClosedError", py.get_type::<StoreClosedError>())?;
    m.add("NotMasterError", py.get_type::<NotMasterError>())?;
    m.add("HAError", py.get_type::<HAError>())?;
    m.add("ForkedProcessError", py.get_type::<ForkedProcessError>())?;
    m.add("DiskFullError", py.get_type::<DiskFullError>())?;
    m.add("OffsetTooSmallError", py.get_type::<OffsetTooSmallError>())?;
    m.add(
        "RemotingConnectError",
        py.get_type::<RemotingConnectError>(),
    )?;
    m.add(
        "SendStatusUnknownError",
        py.get_type::<SendStatusUnknownError>(),
    )?;
    Ok(())
}

/// Core errors become the matching Python class; I/O keeps its errno so `except
/// FileNotFoundError` and friends work, with the path in the message.
pub fn to_py(err: CommitLogError) -> PyErr {
    let msg = err.to_string();
    match err {
        CommitLogError::Io { source, .. } => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, msg)),
            None => PyOSError::new_err(msg),
        },
        CommitLogError::Record(_) | CommitLogError::RecordTooLarge { .. } => {
            InvalidMessageError::new_err(msg)
        }
        CommitLogError::BadFileSize(_)
        | CommitLogError::SegmentSizeMismatch { .. }
        | CommitLogError::Config(_)
        | CommitLogError::BadConfigFile { .. } => ConfigError::new_err(msg),
        CommitLogError::DiskFull { .. } => DiskFullError::new_err(msg),
        CommitLogError::OffsetTooSmall { .. } => OffsetTooSmallError::new_err(msg),
        CommitLogError::Corrupted { .. }
        | CommitLogError::MidLogCorruption(_)
        | CommitLogError::BadSegmentName { .. }
        | CommitLogError::SegmentGap { .. } => CommitLogCorrupted::new_err(msg),
        CommitLogError::OffsetMismatch { .. } | CommitLogError::OffsetOutOfRange { .. } => {
            OffsetMismatch::new_err(msg)
        }
        CommitLogError::Locked { .. } => StoreLockedError::new_err(msg),
        CommitLogError::Closed => StoreClosedError::new_err(msg),
        CommitLogError::ReadOnly => RocketHAError::new_err(msg),
        CommitLogError::InSyncReplicasNotEnough { .. } => HAError::new_err(msg),
    }
}

pub fn ha_to_py(err: HaError) -> PyErr {
    match err {
        HaError::CommitLog(e) => to_py(e),
        HaError::BadAddress(_) | HaError::Config(_) => ConfigError::new_err(err.to_string()),
        other => HAError::new_err(other.to_string()),
    }
}

/// A send (or another request) that failed in the network: RemotingConnectError when nothing
/// was sent, so a retry cannot duplicate it; SendStatusUnknownError when the request went out
/// and its answer did not come.
pub(crate) fn send_error(e: SendError) -> PyErr {
    match e {
        SendError::NotSent(m) => RemotingConnectError::new_err(m),
        SendError::Unknown(m) => SendStatusUnknownError::new_err(m),
    }
}

/// Bumped in every child a fork creates (a `pthread_atfork` handler), so telling a forked
/// process apart costs an atomic load instead of a `getpid` syscall on every call.
static FORK_GENERATION: AtomicU32 = AtomicU32::new(0);
/// Whether that handler is in place; without it (registration can fail for lack of memory)
/// guards compare process ids instead.
static FORK_HANDLER: AtomicBool = AtomicBool::new(false);

extern "C" fn forked_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// PySpark and multiprocessing fork workers; a mapped store or a running event loop does not
/// survive that, so handles remember their process and refuse to be used from another.
#[derive(Clone, Copy)]
pub struct ForkGuard {
    generation: u32,
    pid: u32,
}

impl ForkGuard {
    pub fn new() -> Self {
        static REGISTER: Once = Once::new();
        REGISTER.call_once(|| {
            // SAFETY: registers a handler that only touches an atomic, which is
            // async-signal-safe as a fork child handler must be.
            let registered = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) } == 0;
            FORK_HANDLER.store(registered, Ordering::Relaxed);
        });
        Self {
            generation: FORK_GENERATION.load(Ordering::Relaxed),
            pid: std::process::id(),
        }
    }

    fn forked(&self) -> bool {
        if FORK_HANDLER.load(Ordering::Relaxed) {
            FORK_GENERATION.load(Ordering::Relaxed) != self.generation
        } else {
            std::process::id() != self.pid
        }
    }

    pub fn check(&self) -> PyResult<()> {
        if self.forked() {
            return Err(ForkedProcessError::new_err(
                "this handle was created in another process (before a fork); open a new one in this process",
            ));
        }
        Ok(())
    }
}
