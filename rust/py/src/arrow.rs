//! Arrow column buffers for the Spark source (`rocketha.spark`): a reader that decodes commit log
//! ranges in Rust with the GIL released, and batches whose buffers Python wraps with
//! `pyarrow.py_buffer` without a copy.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use rocketha_core::arrow::{self, ColumnBatch, Limits};
use rocketha_core::MessageStore;

use crate::buffer::fill_readonly_buffer;
use crate::errors::to_py;
use crate::store::PyMessageStore;

/// Which records to keep: a topic list (`None`: all) and queue offset bounds
/// `(topic, queue_id, from, to)`, `to` exclusive.
#[pyclass(frozen, module = "rocketha._core")]
pub struct RecordFilter(pub(crate) arrow::RecordFilter);

#[pymethods]
impl RecordFilter {
    #[new]
    #[pyo3(signature = (topics=None, queue_bounds=Vec::new()))]
    fn new(topics: Option<Vec<String>>, queue_bounds: Vec<(String, i32, i64, i64)>) -> Self {
        Self(arrow::RecordFilter::new(topics, queue_bounds))
    }
}

/// One decoded batch. `buffers()` lists its Arrow buffers in the order documented on
/// `rocketha_core::arrow::ColumnBatch::buffers`.
#[pyclass(frozen, module = "rocketha._core")]
pub struct ColumnarBatch(pub(crate) Arc<ColumnBatch>);

#[pymethods]
impl ColumnarBatch {
    #[getter]
    fn num_rows(&self) -> usize {
        self.0.num_rows()
    }

    /// Commit log bytes of the records in the batch.
    #[getter]
    fn record_bytes(&self) -> usize {
        self.0.record_bytes()
    }

    /// `(tags, keys)` null counts; no other column has nulls.
    #[getter]
    fn null_counts(&self) -> (usize, usize) {
        self.0.null_counts()
    }

    /// Entries of the properties map over all rows.
    #[getter]
    fn property_entries(&self) -> usize {
        self.0.property_entries()
    }

    /// Every buffer as an object with the buffer protocol; each keeps the batch alive.
    fn buffers(&self, py: Python<'_>) -> PyResult<Vec<Py<ArrowBuffer>>> {
        (0..self.0.buffers().len())
            .map(|index| {
                Py::new(
                    py,
                    ArrowBuffer {
                        batch: self.0.clone(),
                        index,
                    },
                )
            })
            .collect()
    }
}

/// One buffer of a batch, lent to Python read-only.
#[pyclass(frozen, module = "rocketha._core")]
pub struct ArrowBuffer {
    batch: Arc<ColumnBatch>,
    index: usize,
}

#[pymethods]
impl ArrowBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        let bytes = this
            .batch
            .buffers()
            .get(this.index)
            .copied()
            .ok_or_else(|| PyIndexError::new_err(format!("no buffer {}", this.index)))?;
        // SAFETY: `view` comes from CPython; the bytes belong to the batch, which is never
        // mutated after decoding and stays alive through `slf`, owned by the view.
        unsafe {
            fill_readonly_buffer(
                view,
                flags,
                slf.clone().into_any(),
                bytes,
                "Arrow batch buffers",
            )
        }
    }

    fn __len__(&self) -> usize {
        self.batch.buffers().get(self.index).map_or(0, |b| b.len())
    }
}

/// Reads the records starting in `[start, end)` of a store as Arrow batches.
#[pyclass(frozen, module = "rocketha._core")]
pub struct ArrowReader {
    store: Arc<MessageStore>,
    filter: Py<RecordFilter>,
    end: u64,
    limits: Limits,
    check_crc: bool,
    /// The next offset to read. Atomics rather than a lock: a reader is used by one thread at a
    /// time, they only make the frozen class mutable.
    offset: AtomicU64,
    done: AtomicBool,
}

#[pymethods]
impl ArrowReader {
    #[new]
    #[pyo3(signature = (store, start, end, filter, *, max_rows, max_bytes, check_crc=false))]
    fn new(
        store: PyRef<'_, PyMessageStore>,
        start: u64,
        end: u64,
        filter: Py<RecordFilter>,
        max_rows: usize,
        max_bytes: usize,
        check_crc: bool,
    ) -> PyResult<Self> {
        Ok(Self {
            store: store.store()?.clone(),
            filter,
            end,
            limits: Limits {
                max_rows,
                max_bytes,
            },
            check_crc,
            offset: AtomicU64::new(start),
            done: AtomicBool::new(start >= end),
        })
    }

    /// The next batch (possibly empty when a filter dropped every record it walked), or `None`
    /// once the range is read.
    fn next_batch(&self, py: Python<'_>) -> PyResult<Option<ColumnarBatch>> {
        if self.done.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let store = self.store.clone();
        let filter = self.filter.get();
        let from = self.offset.load(Ordering::Relaxed);
        let decoded = py
            .detach(|| {
                arrow::decode_range(
                    store.commit_log(),
                    from,
                    self.end,
                    &filter.0,
                    self.limits,
                    self.check_crc,
                )
            })
            .map_err(to_py)?;
        self.offset.store(decoded.next_offset, Ordering::Relaxed);
        self.done.store(decoded.done, Ordering::Relaxed);
        Ok(Some(ColumnarBatch(Arc::new(decoded.batch))))
    }

    #[getter]
    fn offset(&self) -> u64 {
        self.offset.load(Ordering::Relaxed)
    }
}

/// Streaming admission control: the offset that admits at most `max_rows` accepted records and
/// `max_bytes` of them (at least one) from `start`, not past `end`.
#[pyfunction]
#[pyo3(signature = (store, start, end, filter, *, max_rows, max_bytes))]
fn admit(
    py: Python<'_>,
    store: PyRef<'_, PyMessageStore>,
    start: u64,
    end: u64,
    filter: PyRef<'_, RecordFilter>,
    max_rows: usize,
    max_bytes: usize,
) -> PyResult<u64> {
    let store = store.store()?.clone();
    let limits = Limits {
        max_rows,
        max_bytes,
    };
    let filter = &filter.0;
    py.detach(|| arrow::admit(store.commit_log(), start, end, filter, limits))
        .map_err(to_py)
}

/// Record-aligned partition boundaries of `[start, end)`: every segment start, more when
/// `min_parts` asks. Includes `start` and `end`.
#[pyfunction]
fn split_points(
    py: Python<'_>,
    store: PyRef<'_, PyMessageStore>,
    start: u64,
    end: u64,
    min_parts: usize,
) -> PyResult<Vec<u64>> {
    let store = store.store()?.clone();
    py.detach(|| arrow::split_points(store.commit_log(), start, end, min_parts))
        .map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordFilter>()?;
    m.add_class::<ColumnarBatch>()?;
    m.add_class::<ArrowBuffer>()?;
    m.add_class::<ArrowReader>()?;
    m.add_function(wrap_pyfunction!(admit, m)?)?;
    m.add_function(wrap_pyfunction!(split_points, m)?)?;
    Ok(())
}
