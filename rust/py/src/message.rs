//! Python classes of messages and put outcomes: `Message`, `PutResult`, `MessageExt`.

use std::net::SocketAddr;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict};
use rocketha_core::commitlog::record::{
    self, RecordView, KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS,
};
use rocketha_core::commitlog::AppendResult;
use rocketha_core::store::group_transfer::PutStatus;

use crate::errors::InvalidMessageError;

/// The Python enum for `PutStatus` (`rocketha.roles.PutStatus`), handed over by that module at
/// import so results compare with `is`; the binding never imports Python modules itself.
static PUT_STATUS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Called once by `rocketha.roles` with its `PutStatus` enum.
#[pyfunction]
pub(crate) fn register_put_status(py: Python<'_>, enum_class: Bound<'_, PyAny>) -> PyResult<()> {
    for status in PutStatus::ALL {
        enum_class.getattr(status.name())?;
    }
    let _ = PUT_STATUS.set(py, enum_class.unbind());
    Ok(())
}

pub(crate) fn put_status_to_py(py: Python<'_>, status: PutStatus) -> PyResult<Bound<'_, PyAny>> {
    let class = PUT_STATUS.get(py).ok_or_else(|| {
        PyRuntimeError::new_err("PutStatus is not registered: import rocketha, not rocketha._core")
    })?;
    class.bind(py).getattr(status.name())
}

fn put_status_from_py(obj: &Bound<'_, PyAny>) -> PyResult<PutStatus> {
    let name: String = obj.getattr("name")?.extract()?;
    PutStatus::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| PyValueError::new_err(format!("{name:?} is not a PutStatus")))
}

/// A message to store. Tags and keys become the `TAGS` and `KEYS` properties, as in RocketMQ.
#[pyclass(frozen, module = "rocketha._core")]
pub struct Message {
    #[pyo3(get)]
    pub(crate) topic: String,
    pub(crate) body: Py<PyBytes>,
    /// Encoded once here so every put of this message is a plain copy.
    pub(crate) properties: Vec<u8>,
    #[pyo3(get)]
    pub(crate) queue_id: i32,
    #[pyo3(get)]
    pub(crate) flag: i32,
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
            status: PutStatus::PutOk,
            offset: r.offset,
            size: r.size,
            queue_offset: r.queue_offset,
            store_timestamp: r.store_timestamp,
            store_host,
        }
    }

    pub fn with_status(&self, status: PutStatus) -> Self {
        Self {
            status,
            ..self.clone()
        }
    }

    pub fn next_offset(&self) -> u64 {
        self.offset + self.size as u64
    }
}

#[pymethods]
impl PutResult {
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        put_status_to_py(py, self.status)
    }

    /// The commit log offset just past this record: what a replica must ack.
    #[getter]
    #[pyo3(name = "next_offset")]
    fn py_next_offset(&self) -> u64 {
        self.next_offset()
    }

    #[getter]
    fn msg_id(&self) -> String {
        record::msg_id(&self.store_host, self.offset as i64)
    }

    /// The same result with another status (the broker's verdict after waiting).
    #[pyo3(name = "with_status")]
    fn py_with_status(&self, status: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(self.with_status(put_status_from_py(status)?))
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
#[derive(Clone)]
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
    /// A copy under `topic`, every other field the same: RocketMQ's `setTopic`, as a push
    /// consumer shows a retried message under its original topic (`RETRY_TOPIC`).
    fn with_topic(&self, topic: String) -> Self {
        Self {
            topic,
            ..self.clone()
        }
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
