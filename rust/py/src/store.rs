//! The Python class of the message store, `rocketha._core.MessageStore`: appends, reads, and
//! the waits a put owes its role and flush type (in the store's GroupTransferService).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use rocketha_core::commitlog::record::MessageDraft;
use rocketha_core::commitlog::OwnedRecord;
use rocketha_core::store::group_transfer::{PutStatus, Verdicts};
use rocketha_core::store::{now_millis, KeyQuery, MessageStore};
use rocketha_core::BrokerConfig;

use crate::buffer::SegmentSlice;
use crate::config::PyBrokerConfig;
use crate::errors::{to_py, ConfigError, ForkGuard};
use crate::message::{put_status_to_py, Message, MessageExt, PutResult};
use crate::retention::CleanEventQueue;

/// Bodies above this are copied with the GIL released; below it the copy is shorter than the
/// cost of releasing and re-taking the GIL.
const DETACH_ABOVE: usize = 64 * 1024;

pub fn parse_host(addr: &str) -> PyResult<SocketAddr> {
    addr.parse()
        .map_err(|_| PyValueError::new_err(format!("{addr:?} is not an ip:port address")))
}

/// The native store. `rocketha.MessageStore` subclasses it with the Python conveniences.
#[pyclass(subclass, frozen, module = "rocketha._core", name = "MessageStore")]
pub struct PyMessageStore {
    pub inner: Arc<MessageStore>,
    guard: ForkGuard,
    /// Verdicts of `put_async` puts, for the Python thread that completes their futures.
    verdicts: Arc<Verdicts>,
}

impl PyMessageStore {
    pub fn store(&self) -> PyResult<&Arc<MessageStore>> {
        self.guard.check()?;
        Ok(&self.inner)
    }

    fn drafts<'a>(
        msgs: &'a [PyRef<'a, Message>],
        py: Python<'a>,
        born: i64,
    ) -> Vec<MessageDraft<'a>> {
        msgs.iter()
            .map(|m| MessageDraft {
                topic: &m.topic,
                body: m.body.bind(py).as_bytes(),
                properties: &m.properties,
                queue_id: m.queue_id,
                flag: m.flag,
                sys_flag: 0,
                born_timestamp: born,
                born_host: BORN_HOST,
                reconsume_times: 0,
                prepared_tx_offset: 0,
            })
            .collect()
    }

    /// Appends one message, with the GIL released for large bodies.
    fn append(&self, py: Python<'_>, msg: PyRef<'_, Message>) -> PyResult<PutResult> {
        let store = self.store()?;
        // Every put from Python waits, so each is RocketMQ's `needHandleHA` put.
        store.check_in_sync_replicas().map_err(to_py)?;
        let msgs = [msg];
        let drafts = Self::drafts(&msgs, py, now_millis());
        let r = if drafts[0].body.len() > DETACH_ABOVE {
            let store = store.clone();
            let draft = Draft(drafts[0]);
            py.detach(move || store.put(&{ draft }.0))
        } else {
            store.put(&drafts[0])
        }
        .map_err(to_py)?;
        Ok(PutResult::new(&r, store.store_host()))
    }

    /// The verdict of the put ending at `next_offset`: at once without a policy to wait for,
    /// else from the GroupTransferService with the GIL released.
    fn verdict(&self, py: Python<'_>, next_offset: u64) -> PyResult<PutStatus> {
        if !self.inner.put_waits() {
            return Ok(PutStatus::PutOk);
        }
        let store = self.inner.clone();
        py.detach(move || store.wait_for_put(next_offset))
            .map_err(to_py)
    }
}

/// `(offset, next_valid_offset, valid_records, valid_bytes, message)` of mid-log corruption.
type Corruption = (u64, u64, u64, u64, String);

/// Producers on this machine: RocketMQ records the client's address; ours is the local host.
const BORN_HOST: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

#[pymethods]
impl PyMessageStore {
    /// Opens the store at `path` as `config` says (the core's defaults without one);
    /// `store_host` is the address recorded in each message (`brokerIP1:listenPort` without
    /// one), `sync_slaves` the slaves' acks a put waits for (the role's without it).
    #[new]
    #[pyo3(signature = (path, config=None, *, store_host=None, sync_slaves=None, read_only=false, truncate_at_corruption=false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        config: Option<PyRef<'_, PyBrokerConfig>>,
        store_host: Option<&str>,
        sync_slaves: Option<usize>,
        read_only: bool,
        truncate_at_corruption: bool,
    ) -> PyResult<Self> {
        let broker = config.map_or_else(BrokerConfig::default, |c| c.inner.clone());
        let host = match store_host {
            Some(host) => host.to_owned(),
            None => broker.store_host(),
        };
        let mut config = broker
            .store_config(parse_host(&host)?)
            .map_err(|e| ConfigError::new_err(e.to_string()))?;
        config.root = path;
        config.sync_slaves = sync_slaves.unwrap_or(config.sync_slaves);
        config.read_only = read_only;
        config.truncate_at_corruption = truncate_at_corruption;
        let store = py
            .detach(move || MessageStore::open(config))
            .map_err(to_py)?;
        Ok(Self {
            inner: Arc::new(store),
            guard: ForkGuard::new(),
            verdicts: Arc::default(),
        })
    }

    /// Appends one message and waits as the policy demands (SYNC_FLUSH's msync, SYNC_MASTER's
    /// slave acks, each with its timeout); the result carries the verdict.
    fn put(&self, py: Python<'_>, msg: PyRef<'_, Message>) -> PyResult<PutResult> {
        let result = self.append(py, msg)?;
        let status = self.verdict(py, result.next_offset())?;
        Ok(result.with_status(status))
    }

    /// Appends one message and returns at once: `(result, ticket)`. With a ticket, the verdict
    /// arrives later through `next_completed`; without one, `result` carries it already.
    fn put_async(
        &self,
        py: Python<'_>,
        msg: PyRef<'_, Message>,
    ) -> PyResult<(PutResult, Option<u64>)> {
        let result = self.append(py, msg)?;
        if !self.inner.put_waits() {
            return Ok((result, None));
        }
        let (ticket, done) = self.verdicts.ticket();
        self.inner
            .submit_put(result.next_offset(), done)
            .map_err(to_py)?;
        Ok((result, Some(ticket)))
    }

    /// Verdicts of `put_async` tickets, waiting up to `timeout` seconds (GIL released) for one:
    /// `[(ticket, status)]`.
    fn next_completed<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Vec<(u64, Bound<'py, PyAny>)>> {
        let verdicts = self.verdicts.clone();
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e6));
        py.detach(move || verdicts.wait(timeout))
            .into_iter()
            .map(|(t, s)| Ok((t, put_status_to_py(py, s)?)))
            .collect()
    }

    /// Wakes a `next_completed` call early (shutdown).
    fn wake_completed(&self) {
        self.verdicts.wake();
    }

    /// Appends many messages in one call under one lock (every message validated first), then
    /// waits once, for the last of them.
    fn put_batch(&self, py: Python<'_>, msgs: Vec<PyRef<'_, Message>>) -> PyResult<Vec<PutResult>> {
        let store = self.store()?.clone();
        store.check_in_sync_replicas().map_err(to_py)?;
        let drafts: Vec<Draft<'_>> = Self::drafts(&msgs, py, now_millis())
            .into_iter()
            .map(Draft)
            .collect();
        let results = py
            .detach(|| {
                let drafts: Vec<MessageDraft<'_>> = drafts.iter().map(|d| d.0).collect();
                store.put_batch(&drafts)
            })
            .map_err(to_py)?;
        let host = store.store_host();
        let status = match results.last() {
            Some(last) => self.verdict(py, last.next_offset())?,
            None => PutStatus::PutOk,
        };
        Ok(results
            .iter()
            .map(|r| PutResult::new(r, host).with_status(status))
            .collect())
    }

    /// A replica's append of raw log bytes at `offset` (must be the current max offset).
    fn append_raw(&self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<()> {
        let store = self.store()?.clone();
        let accept_zero = store.config().accept_zero_body_crc;
        py.detach(|| store.append_raw(offset, data, accept_zero))
            .map_err(to_py)
    }

    #[getter]
    fn max_offset(&self) -> PyResult<u64> {
        Ok(self.store()?.max_offset())
    }

    #[getter]
    fn min_offset(&self) -> PyResult<u64> {
        Ok(self.store()?.min_offset())
    }

    #[getter]
    fn mapped_file_size(&self) -> PyResult<u64> {
        Ok(self.store()?.config().mapped_file_size)
    }

    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(self.store()?.config().root.clone())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Up to `max_bytes` of the log at `offset`, never crossing a segment, without a copy.
    fn read_raw(&self, py: Python<'_>, offset: u64, max_bytes: usize) -> PyResult<Py<PyAny>> {
        let store = self.store()?;
        match store.read_raw(offset, max_bytes) {
            Some(slice) => {
                let slice = Bound::new(py, SegmentSlice(slice))?;
                Ok(pyo3::types::PyMemoryView::from(&slice.into_any())?
                    .into_any()
                    .unbind())
            }
            None => Ok(PyBytes::new(py, b"").into_any().unbind()),
        }
    }

    /// Decodes up to `max_count` records from `offset`; returns them and the offset after the
    /// last one. `check_crc` re-verifies bodies (for readers of a store being written).
    #[pyo3(signature = (offset, max_count, check_crc=false))]
    fn read_messages(
        &self,
        py: Python<'_>,
        offset: u64,
        max_count: usize,
        check_crc: bool,
    ) -> PyResult<(Py<PyList>, u64)> {
        let store = self.store()?.clone();
        let (records, next) = py
            .detach(|| {
                let mut iter = store.iter_from(offset, check_crc);
                let mut out: Vec<MessageExt> = Vec::new();
                while out.len() < max_count {
                    match iter.next() {
                        Some(Ok(rec)) => out.push(MessageExt::from(&rec.view())),
                        Some(Err(e)) => return Err(e),
                        None => break,
                    }
                }
                Ok((out, iter.offset()))
            })
            .map_err(to_py)?;
        let list = PyList::empty(py);
        for r in records {
            list.append(Bound::new(py, r)?)?;
        }
        Ok((list.unbind(), next))
    }

    /// Messages of one queue by queue offset, through its consume queue.
    fn get_messages(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
        max_count: usize,
    ) -> PyResult<Py<PyList>> {
        let store = self.store()?.clone();
        let records: Vec<(i64, OwnedRecord)> = py
            .detach(|| store.get_messages(topic, queue_id, queue_offset, max_count))
            .map_err(to_py)?;
        let list = PyList::empty(py);
        for (_, rec) in records {
            list.append(Bound::new(py, MessageExt::from(&rec.view()))?)?;
        }
        Ok(list.unbind())
    }

    /// Messages of `topic` indexed under `key` (its `UNIQ_KEY` when `unique`) and stored in
    /// `[begin, end]` (ms), oldest first, at most `max_num` (and 64): RocketMQ's
    /// `queryMessage`, once the index covers what was stored before the call.
    #[pyo3(signature = (topic, key, *, unique=false, begin=0, end=i64::MAX, max_num=64))]
    #[allow(clippy::too_many_arguments)]
    fn find(
        &self,
        py: Python<'_>,
        topic: &str,
        key: &str,
        unique: bool,
        begin: i64,
        end: i64,
        max_num: usize,
    ) -> PyResult<Py<PyList>> {
        let store = self.store()?.clone();
        let records = py
            .detach(|| {
                store.find(&KeyQuery {
                    topic,
                    key,
                    unique,
                    max: max_num,
                    begin,
                    end,
                })
            })
            .map_err(to_py)?;
        let list = PyList::empty(py);
        for rec in records {
            list.append(Bound::new(py, MessageExt::from(&rec.view()))?)?;
        }
        Ok(list.unbind())
    }

    /// The index files, oldest first.
    fn index_files(&self) -> PyResult<Vec<PathBuf>> {
        Ok(self.store()?.index_files())
    }

    /// `(topic, queue_id, min_queue_offset, max_queue_offset)` of every consume queue.
    fn queues(&self) -> PyResult<Vec<(String, i32, i64, i64)>> {
        Ok(self.store()?.queues())
    }

    /// Segment files: `(path, start_offset, bytes_used)`.
    fn segments(&self) -> PyResult<Vec<(PathBuf, u64, usize)>> {
        Ok(self
            .store()?
            .segments()
            .into_iter()
            .map(|s| (s.path, s.start, s.used))
            .collect())
    }

    /// Read-only stores: pick up what the writer appended since; returns the new max offset.
    fn refresh(&self, py: Python<'_>) -> PyResult<u64> {
        let store = self.store()?.clone();
        py.detach(|| store.refresh()).map_err(to_py)
    }

    /// Read-only stores: `(offset, reason)` where the last refresh found an invalid record, or
    /// None when valid data ran up to zeroed space.
    fn scan_error(&self) -> PyResult<Option<(u64, String)>> {
        Ok(self
            .store()?
            .scan_error()
            .map(|(at, _, reason)| (at, reason.to_string())))
    }

    /// Mid-log corruption a read-only open found, or a `truncate_at_corruption` open cut:
    /// `(offset, next_valid_offset, valid_records, valid_bytes, message)`, or None.
    fn corruption(&self) -> PyResult<Option<Corruption>> {
        Ok(self.store()?.corruption().map(|c| {
            (
                c.offset,
                c.next_valid,
                c.valid_records,
                c.valid_bytes,
                c.to_string(),
            )
        }))
    }

    /// Cuts the log (and consume queues) back to `offset`, a record boundary.
    fn truncate_to(&self, py: Python<'_>, offset: u64) -> PyResult<Vec<PathBuf>> {
        let store = self.store()?.clone();
        py.detach(|| store.truncate_to(offset)).map_err(to_py)
    }

    /// What recovery found at open: `(after_crash, max_offset, scanned_from, records_checked,
    /// truncated_at or None, reason or None, file or None, deleted files)`.
    #[allow(clippy::type_complexity)]
    fn recovery_report(
        &self,
    ) -> PyResult<(
        bool,
        u64,
        u64,
        u64,
        Option<u64>,
        Option<String>,
        Option<PathBuf>,
        Vec<PathBuf>,
    )> {
        let r = self.store()?.recovery();
        let (at, reason, file) = match &r.truncated {
            Some((at, file, reason)) => (Some(*at), Some(reason.to_string()), Some(file.clone())),
            None => (None, None, None),
        };
        Ok((
            r.after_crash,
            r.max_offset,
            r.scanned_from,
            r.records_checked,
            at,
            reason,
            file,
            r.deleted_files.clone(),
        ))
    }

    /// `(msyncs, sync_requests, flushed_offset)`: group commit shows as requests per msync.
    /// Runs one retention pass now: `(disk_used_ratio, deleted commit log segments, deleted
    /// consume queue files)`.
    fn clean_now(&self, py: Python<'_>) -> PyResult<(f64, Vec<PathBuf>, usize)> {
        let store = self.store()?.clone();
        let r = py.detach(move || store.clean_now()).map_err(to_py)?;
        Ok((
            r.disk_used_ratio,
            r.commit_log_deleted,
            r.consume_queue_deleted,
        ))
    }

    /// Tests only: the disk use (0.0-1.0) retention acts on instead of the filesystem's.
    #[pyo3(signature = (ratio))]
    fn set_fake_disk_used_ratio(&self, ratio: Option<f64>) -> PyResult<()> {
        self.store()?.set_fake_disk_used_ratio(ratio).map_err(to_py)
    }

    /// Retention keeps every segment holding records at or past `offset` (None: no floor).
    #[pyo3(signature = (offset))]
    fn set_retention_floor(&self, offset: Option<u64>) -> PyResult<()> {
        self.store()?.set_retention_floor(offset).map_err(to_py)
    }

    /// Retention's log lines, through a handle that does not keep the store open; `None` for
    /// a read-only store.
    fn clean_events(&self) -> PyResult<Option<CleanEventQueue>> {
        Ok(self.store()?.clean_events().map(CleanEventQueue::new))
    }

    /// The timer store's progress: `(dequeuing, pending, read_time_ms, enqueue_behind,
    /// delivered, last_lateness_ms, max_lateness_ms)`, `None` without a timer.
    #[allow(clippy::type_complexity)]
    fn timer_status(&self) -> PyResult<Option<(bool, i64, i64, i64, u64, i64, i64)>> {
        Ok(self.store()?.timer_status().map(|t| {
            (
                t.dequeuing,
                t.pending,
                t.read_time_ms,
                t.enqueue_behind,
                t.delivered,
                t.last_lateness_ms,
                t.max_lateness_ms,
            )
        }))
    }

    fn flush_stats(&self) -> PyResult<(u64, u64, u64)> {
        let s = self.store()?.flush_stats();
        Ok((s.msyncs, s.sync_requests, s.flushed_offset))
    }

    /// Flushes, checkpoints, removes the abort marker and releases the store lock.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check()?;
        let store = self.inner.clone();
        py.detach(|| store.close()).map_err(to_py)
    }
}

/// A draft whose borrowed bytes stay valid while the GIL is released: they belong to `bytes`
/// objects that the caller's `PyRef`s keep alive, and `bytes` are immutable.
#[derive(Clone, Copy)]
struct Draft<'a>(MessageDraft<'a>);
// SAFETY: see the type's comment; nothing mutates the borrowed buffers during the call.
unsafe impl Send for Draft<'_> {}
unsafe impl Sync for Draft<'_> {}
