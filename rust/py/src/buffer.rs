//! Zero-copy views of commit log bytes for Python (the buffer protocol).

use std::os::raw::c_int;

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use rocketha_core::commitlog::LogSlice;

/// Bytes of a mapped segment lent to Python without a copy (buffer protocol). Holding it keeps
/// the mapping alive; the bytes are immutable once published.
#[pyclass(frozen, module = "rocketha._core")]
pub struct SegmentSlice(pub(crate) LogSlice);

#[pymethods]
impl SegmentSlice {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let bytes = slf.get().0.bytes();
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
        self.0.len()
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
