//! Python classes of the message store: `Message`, `PutResult`, `MessageExt`, `MessageStore`.

use std::net::SocketAddr;
use std::os::raw::c_int;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList};
use rocketha_core::commitlog::mapped_file::MappedFile;
use rocketha_core::commitlog::record::{
    self, MessageDraft, RecordView, KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS,
};
use rocketha_core::commitlog::{AppendResult, OwnedRecord};
use rocketha_core::store::{now_millis, MessageStore, StoreConfig};
use rocketha_core::FlushDiskType;

use crate::errors::{to_py, ForkGuard, InvalidMessageError};

/// Bodies above this are copied with the GIL released; below it the copy is shorter than the
/// cost of releasing and re-taking the GIL.
const DETACH_ABOVE: usize = 64 * 1024;

/// The outcome of a put, as RocketMQ's `PutMessageStatus` names it. Python sees the members
/// of the `rocketha.PutStatus` enum, so `result.status is PutStatus.PUT_OK` holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[allow(non_camel_case_types)]
pub enum PutStatus {
    PUT_OK,
    FLUSH_DISK_TIMEOUT,
    FLUSH_SLAVE_TIMEOUT,
    SLAVE_NOT_AVAILABLE,
}

const PUT_STATUSES: [PutStatus; 4] = [
    PutStatus::PUT_OK,
    PutStatus::FLUSH_DISK_TIMEOUT,
    PutStatus::FLUSH_SLAVE_TIMEOUT,
    PutStatus::SLAVE_NOT_AVAILABLE,
];

impl PutStatus {
    fn name(&self) -> &'static str {
        match self {
            PutStatus::PUT_OK => "PUT_OK",
            PutStatus::FLUSH_DISK_TIMEOUT => "FLUSH_DISK_TIMEOUT",
            PutStatus::FLUSH_SLAVE_TIMEOUT => "FLUSH_SLAVE_TIMEOUT",
            PutStatus::SLAVE_NOT_AVAILABLE => "SLAVE_NOT_AVAILABLE",
        }
    }

    pub(crate) fn to_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        static ENUM: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let class = ENUM.get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("rocketha.roles")?.getattr("PutStatus")?.unbind())
        })?;
        class.bind(py).getattr(self.name())
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for PutStatus {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let name: String = obj.getattr("name")?.extract()?;
        PUT_STATUSES
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| PyValueError::new_err(format!("{name:?} is not a PutStatus")))
    }
}

/// A message to store. Tags and keys become the `TAGS` and `KEYS` properties, as in RocketMQ.
#[pyclass(frozen, module = "rocketha._core")]
pub struct Message {
    #[pyo3(get)]
    topic: String,
    body: Py<PyBytes>,
    /// Encoded once here so every put of this message is a plain copy.
    properties: Vec<u8>,
    #[pyo3(get)]
    queue_id: i32,
    #[pyo3(get)]
    flag: i32,
}

#[pymethods]
impl Message {
    #[new]
    #[pyo3(signature = (topic, body, *, tags=None, keys=None, properties=None, queue_id=0, flag=0))]
    fn new(
        topic: String,
        body: Bound<'_, PyAny>,
        tags: Option<String>,
        keys: Option<Bound<'_, PyAny>>,
        properties: Option<Bound<'_, PyDict>>,
        queue_id: i32,
        flag: i32,
    ) -> PyResult<Self> {
        let py = body.py();
        let body: Py<PyBytes> = match body.cast::<PyBytes>() {
            Ok(b) => b.clone().unbind(),
            Err(_) => {
                if let Ok(s) = body.extract::<String>() {
                    PyBytes::new(py, s.as_bytes()).unbind()
                } else {
                    let raw: Vec<u8> = body.extract().map_err(|_| {
                        InvalidMessageError::new_err(
                            "body must be bytes, bytearray, memoryview or str",
                        )
                    })?;
                    PyBytes::new(py, &raw).unbind()
                }
            }
        };
        let mut pairs: Vec<(String, String)> = Vec::new();
        if let Some(props) = properties {
            for (k, v) in props.iter() {
                pairs.push((k.extract()?, v.str()?.to_string()));
            }
        }
        if let Some(tags) = tags {
            pairs.retain(|(k, _)| k != PROPERTY_TAGS);
            pairs.push((PROPERTY_TAGS.to_owned(), tags));
        }
        if let Some(keys) = keys {
            let joined = if let Ok(one) = keys.extract::<String>() {
                one
            } else {
                let many: Vec<String> = keys.extract()?;
                many.join(KEY_SEPARATOR)
            };
            if !joined.is_empty() {
                pairs.retain(|(k, _)| k != PROPERTY_KEYS);
                pairs.push((PROPERTY_KEYS.to_owned(), joined));
            }
        }
        let properties =
            record::encode_properties(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|e| InvalidMessageError::new_err(e.to_string()))?;
        Ok(Self {
            topic,
            body,
            properties,
            queue_id,
            flag,
        })
    }

    #[getter]
    fn body(&self, py: Python<'_>) -> Py<PyBytes> {
        self.body.clone_ref(py)
    }

    #[getter]
    fn properties(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        properties_dict(py, &self.properties)
    }

    #[getter]
    fn tags(&self) -> Option<String> {
        record::find_property(&self.properties, PROPERTY_TAGS)
            .map(|t| String::from_utf8_lossy(t).into_owned())
    }

    #[getter]
    fn keys(&self) -> Vec<String> {
        split_keys(&self.properties)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Message(topic={:?}, body=<{} bytes>, queue_id={})",
            self.topic,
            self.body.bind(py).as_bytes().len(),
            self.queue_id
        )
    }
}

fn split_keys(properties: &[u8]) -> Vec<String> {
    record::find_property(properties, PROPERTY_KEYS)
        .map(|k| {
            String::from_utf8_lossy(k)
                .split(KEY_SEPARATOR)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn properties_dict(py: Python<'_>, raw: &[u8]) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in record::decode_properties(raw) {
        d.set_item(k, v)?;
    }
    Ok(d.unbind())
}

fn host_string(addr: &SocketAddr) -> String {
    addr.to_string()
}

/// Where a put landed and how it ended.
#[pyclass(frozen, module = "rocketha._core")]
#[derive(Clone)]
pub struct PutResult {
    status: PutStatus,
    #[pyo3(get)]
    offset: u64,
    #[pyo3(get)]
    size: usize,
    #[pyo3(get)]
    queue_offset: i64,
    #[pyo3(get)]
    store_timestamp: i64,
    store_host: SocketAddr,
}

impl PutResult {
    pub fn new(r: &AppendResult, store_host: SocketAddr) -> Self {
        Self {
            status: PutStatus::PUT_OK,
            offset: r.offset,
            size: r.size,
            queue_offset: r.queue_offset,
            store_timestamp: r.store_timestamp,
            store_host,
        }
    }
}

#[pymethods]
impl PutResult {
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.status.to_py(py)
    }

    /// The commit log offset just past this record: what a replica must ack.
    #[getter]
    fn next_offset(&self) -> u64 {
        self.offset + self.size as u64
    }

    #[getter]
    fn msg_id(&self) -> String {
        record::msg_id(&self.store_host, self.offset as i64)
    }

    /// The same result with another status (the broker's verdict after waiting).
    fn with_status(&self, status: PutStatus) -> Self {
        Self {
            status,
            ..self.clone()
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "PutResult(status={}, offset={}, size={}, queue_offset={})",
            self.status.name(),
            self.offset,
            self.size,
            self.queue_offset
        )
    }
}

/// A stored message with every record field.
#[pyclass(frozen, module = "rocketha._core")]
pub struct MessageExt {
    #[pyo3(get)]
    topic: String,
    body: Vec<u8>,
    properties_raw: Vec<u8>,
    #[pyo3(get)]
    queue_id: i32,
    #[pyo3(get)]
    queue_offset: i64,
    #[pyo3(get)]
    commitlog_offset: i64,
    #[pyo3(get)]
    store_size: i32,
    #[pyo3(get)]
    store_timestamp: i64,
    #[pyo3(get)]
    born_timestamp: i64,
    born_host: SocketAddr,
    store_host: SocketAddr,
    #[pyo3(get)]
    sys_flag: i32,
    #[pyo3(get)]
    body_crc: i32,
    #[pyo3(get)]
    flag: i32,
    #[pyo3(get)]
    reconsume_times: i32,
    #[pyo3(get)]
    prepared_transaction_offset: i64,
}

impl From<&RecordView<'_>> for MessageExt {
    fn from(r: &RecordView<'_>) -> Self {
        Self {
            topic: String::from_utf8_lossy(r.topic).into_owned(),
            body: r.body.to_vec(),
            properties_raw: r.properties.to_vec(),
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            commitlog_offset: r.physical_offset,
            store_size: r.total_size,
            store_timestamp: r.store_timestamp,
            born_timestamp: r.born_timestamp,
            born_host: r.born_host,
            store_host: r.store_host,
            sys_flag: r.sys_flag,
            body_crc: r.body_crc,
            flag: r.flag,
            reconsume_times: r.reconsume_times,
            prepared_transaction_offset: r.prepared_tx_offset,
        }
    }
}

#[pymethods]
impl MessageExt {
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.body)
    }
    #[getter]
    fn properties(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        properties_dict(py, &self.properties_raw)
    }
    #[getter]
    fn tags(&self) -> Option<String> {
        record::find_property(&self.properties_raw, PROPERTY_TAGS)
            .map(|t| String::from_utf8_lossy(t).into_owned())
    }
    #[getter]
    fn keys(&self) -> Vec<String> {
        split_keys(&self.properties_raw)
    }
    #[getter]
    fn born_host(&self) -> String {
        host_string(&self.born_host)
    }
    #[getter]
    fn store_host(&self) -> String {
        host_string(&self.store_host)
    }
    #[getter]
    fn msg_id(&self) -> String {
        record::msg_id(&self.store_host, self.commitlog_offset)
    }
    /// The offset just past this record.
    #[getter]
    fn next_offset(&self) -> i64 {
        self.commitlog_offset + self.store_size as i64
    }
    fn __repr__(&self) -> String {
        format!(
            "MessageExt(topic={:?}, queue_id={}, queue_offset={}, commitlog_offset={}, body=<{} bytes>)",
            self.topic,
            self.queue_id,
            self.queue_offset,
            self.commitlog_offset,
            self.body.len()
        )
    }
}

/// Bytes of a mapped segment lent to Python without a copy (buffer protocol). Holding it keeps
/// the mapping alive; the bytes are immutable once published.
#[pyclass(frozen, module = "rocketha._core")]
pub struct SegmentSlice {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

#[pymethods]
impl SegmentSlice {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        let bytes = &this.file.readable(this.pos)[..this.len];
        // SAFETY: `view` comes from CPython; the bytes live in a mapping kept alive by `slf`,
        // which the view owns.
        unsafe {
            fill_readonly_buffer(
                view,
                flags,
                slf.clone().into_any(),
                bytes,
                "commit log bytes",
            )
        }
    }

    fn __len__(&self) -> usize {
        self.len
    }
}

/// Fills a `Py_buffer` for read-only `bytes` owned by `owner`: the one implementation of the
/// buffer protocol for every zero-copy view we lend to Python.
///
/// # Safety
/// `view` must be a valid `Py_buffer` from CPython and `bytes` must stay valid and unchanged
/// while `owner` is alive.
pub unsafe fn fill_readonly_buffer(
    view: *mut pyo3::ffi::Py_buffer,
    flags: c_int,
    owner: Bound<'_, PyAny>,
    bytes: &[u8],
    what: &str,
) -> PyResult<()> {
    if view.is_null() {
        return Err(PyBufferError::new_err("view is null"));
    }
    if (flags & pyo3::ffi::PyBUF_WRITABLE) == pyo3::ffi::PyBUF_WRITABLE {
        return Err(PyBufferError::new_err(format!("{what} are read-only")));
    }
    // SAFETY: the caller guarantees `view` is valid; the view takes a reference to `owner`,
    // which keeps `bytes` alive until CPython releases the view.
    unsafe {
        (*view).obj = owner.into_ptr();
        (*view).buf = bytes.as_ptr() as *mut std::os::raw::c_void;
        (*view).len = bytes.len() as isize;
        (*view).readonly = 1;
        (*view).itemsize = 1;
        (*view).format = if (flags & pyo3::ffi::PyBUF_FORMAT) == pyo3::ffi::PyBUF_FORMAT {
            c"B".as_ptr() as *mut _
        } else {
            std::ptr::null_mut()
        };
        (*view).ndim = 1;
        (*view).shape = if (flags & pyo3::ffi::PyBUF_ND) == pyo3::ffi::PyBUF_ND {
            &mut (*view).len
        } else {
            std::ptr::null_mut()
        };
        (*view).strides = if (flags & pyo3::ffi::PyBUF_STRIDES) == pyo3::ffi::PyBUF_STRIDES {
            &mut (*view).itemsize
        } else {
            std::ptr::null_mut()
        };
        (*view).suboffsets = std::ptr::null_mut();
        (*view).internal = std::ptr::null_mut();
    }
    Ok(())
}

fn flush_disk_type(name: &str) -> PyResult<FlushDiskType> {
    match name {
        "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
        "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
        other => Err(PyValueError::new_err(format!(
            "flush_disk_type {other:?} is not ASYNC_FLUSH or SYNC_FLUSH"
        ))),
    }
}

pub fn parse_host(addr: &str) -> PyResult<SocketAddr> {
    addr.parse()
        .map_err(|_| PyValueError::new_err(format!("{addr:?} is not an ip:port address")))
}

/// The native store. `rocketha.MessageStore` subclasses it with the Python conveniences.
#[pyclass(subclass, frozen, module = "rocketha._core", name = "MessageStore")]
pub struct PyMessageStore {
    pub inner: Arc<MessageStore>,
    guard: ForkGuard,
    sync_flush: bool,
    sync_flush_timeout: Duration,
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

    /// SYNC_FLUSH: waits for the msync covering `next_offset`, with the GIL released.
    fn flushed_status(&self, py: Python<'_>, next_offset: u64) -> PyResult<PutStatus> {
        if !self.sync_flush {
            return Ok(PutStatus::PUT_OK);
        }
        let store = self.inner.clone();
        let timeout = self.sync_flush_timeout;
        let ok = py
            .detach(move || store.wait_flushed(next_offset, timeout))
            .map_err(to_py)?;
        Ok(if ok {
            PutStatus::PUT_OK
        } else {
            PutStatus::FLUSH_DISK_TIMEOUT
        })
    }
}

/// Producers on this machine: RocketMQ records the client's address; ours is the local host.
const BORN_HOST: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

#[pymethods]
impl PyMessageStore {
    #[new]
    #[pyo3(signature = (path, *, mapped_file_size=1073741824, flush_disk_type="ASYNC_FLUSH", flush_interval_ms=500, sync_flush_timeout_ms=5000, store_host="127.0.0.1:10911", consume_queue_entries=300000, read_only=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        mapped_file_size: u64,
        flush_disk_type: &str,
        flush_interval_ms: u64,
        sync_flush_timeout_ms: u64,
        store_host: &str,
        consume_queue_entries: usize,
        read_only: bool,
    ) -> PyResult<Self> {
        let mut config = StoreConfig::new(path);
        config.mapped_file_size = mapped_file_size;
        config.flush_disk_type = self::flush_disk_type(flush_disk_type)?;
        config.flush_interval = Duration::from_millis(flush_interval_ms.max(1));
        config.store_host = parse_host(store_host)?;
        config.cq_entries_per_file = consume_queue_entries.max(1);
        config.read_only = read_only;
        let sync_flush = config.flush_disk_type == FlushDiskType::SyncFlush;
        let store = py
            .detach(move || MessageStore::open(config))
            .map_err(to_py)?;
        Ok(Self {
            inner: Arc::new(store),
            guard: ForkGuard::new(),
            sync_flush,
            sync_flush_timeout: Duration::from_millis(sync_flush_timeout_ms),
        })
    }

    /// Appends one message. With SYNC_FLUSH, returns after the msync that covers it.
    fn put(&self, py: Python<'_>, msg: PyRef<'_, Message>) -> PyResult<PutResult> {
        let store = self.store()?;
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
        let result = PutResult::new(&r, store.commit_log().store_host());
        let status = self.flushed_status(py, r.next_offset())?;
        Ok(result.with_status(status))
    }

    /// Appends many messages in one call under one lock; validation of every message comes first.
    fn put_batch(&self, py: Python<'_>, msgs: Vec<PyRef<'_, Message>>) -> PyResult<Vec<PutResult>> {
        let store = self.store()?.clone();
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
        let host = store.commit_log().store_host();
        let status = match results.last() {
            Some(last) => self.flushed_status(py, last.next_offset())?,
            None => PutStatus::PUT_OK,
        };
        Ok(results
            .iter()
            .map(|r| PutResult::new(r, host).with_status(status))
            .collect())
    }

    /// A replica's append of raw log bytes at `offset` (must be the current max offset).
    fn append_raw(&self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<()> {
        let store = self.store()?.clone();
        py.detach(|| store.append_raw(offset, data)).map_err(to_py)
    }

    /// Waits for the msync covering `offset`; False on timeout.
    #[pyo3(signature = (offset, timeout))]
    fn wait_flushed(&self, py: Python<'_>, offset: u64, timeout: f64) -> PyResult<bool> {
        let store = self.store()?.clone();
        let timeout = Duration::from_secs_f64(timeout.max(0.0));
        py.detach(|| store.wait_flushed(offset, timeout))
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
            Some((file, pos, len)) => {
                let slice = Bound::new(py, SegmentSlice { file, pos, len })?;
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

    /// `(topic, queue_id, min_queue_offset, max_queue_offset)` of every consume queue.
    fn queues(&self) -> PyResult<Vec<(String, i32, i64, i64)>> {
        Ok(self.store()?.queues())
    }

    /// Segment files: `(path, start_offset, bytes_used)`.
    fn segments(&self) -> PyResult<Vec<(PathBuf, u64, usize)>> {
        Ok(self
            .store()?
            .commit_log()
            .files()
            .files()
            .iter()
            .map(|f| (f.path().to_owned(), f.start(), f.wrote()))
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

    /// Cuts the log (and consume queues) back to `offset`, a record boundary.
    fn truncate_to(&self, py: Python<'_>, offset: u64) -> PyResult<Vec<PathBuf>> {
        let store = self.store()?.clone();
        py.detach(|| store.truncate_to(offset)).map_err(to_py)
    }

    /// What recovery found at open: `(max_offset, scanned_from, records_checked,
    /// truncated_at or None, reason or None, file or None, deleted files)`.
    #[allow(clippy::type_complexity)]
    fn recovery_report(
        &self,
    ) -> PyResult<(
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
