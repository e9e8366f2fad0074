//! `rocketha_bench_baseline`: the baselines the benchmarks compare against, measured in the same
//! run, for the Python harness in `benches/` (GIL released while they run). Not part of
//! rocketha: a build of the package ships none of this.

use std::path::PathBuf;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

mod baselines;

fn os_error(e: std::io::Error) -> PyErr {
    PyOSError::new_err(e.to_string())
}

/// Seconds to memcpy `data` repeatedly into a preallocated mmap of `total` bytes in `dir`.
#[pyfunction]
fn mmap_memcpy(py: Python<'_>, dir: PathBuf, data: Vec<u8>, total: usize) -> PyResult<f64> {
    py.detach(|| baselines::mmap_memcpy(&dir, &data, total))
        .map(|d| d.as_secs_f64())
        .map_err(os_error)
}

/// Seconds to copy `total` bytes over loopback TCP in `chunk`-byte writes.
#[pyfunction]
fn tcp_copy(py: Python<'_>, total: usize, chunk: usize) -> PyResult<f64> {
    py.detach(|| baselines::tcp_copy(total, chunk.max(1)))
        .map(|d| d.as_secs_f64())
        .map_err(os_error)
}

/// Seconds to copy `total` bytes over loopback TCP into a new file in `dir`, received straight
/// into its mapping (no flush).
#[pyfunction]
fn tcp_copy_to_file(py: Python<'_>, dir: PathBuf, total: usize, chunk: usize) -> PyResult<f64> {
    py.detach(|| baselines::tcp_copy_to_file(&dir, total, chunk.max(1)))
        .map(|d| d.as_secs_f64())
        .map_err(os_error)
}

/// Loopback TCP round trips of 8 bytes, in seconds each.
#[pyfunction]
fn tcp_ping_pong(py: Python<'_>, rounds: usize) -> PyResult<Vec<f64>> {
    py.detach(|| baselines::tcp_ping_pong(rounds))
        .map(|v| v.iter().map(|d| d.as_secs_f64()).collect())
        .map_err(os_error)
}

/// Lateness in seconds of `rounds` condition-variable wake-ups at a deadline `interval_ms`
/// away: the timer jitter any deadline sleeper sees on this machine.
#[pyfunction]
fn timer_wakeups(py: Python<'_>, rounds: usize, interval_ms: u64) -> Vec<f64> {
    py.detach(|| baselines::timer_wakeups(rounds, std::time::Duration::from_millis(interval_ms)))
        .iter()
        .map(|d| d.as_secs_f64())
        .collect()
}

/// A loopback TCP connection to an echo thread; each `round_trip()` is one 8-byte round trip
/// with the GIL released. Producer threads calling it in a loop give the ceiling of blocking
/// calls per second that Python threads can make when another thread completes each one.
#[pyclass(module = "rocketha_bench_baseline")]
struct PingPong(baselines::PingPong);

#[pymethods]
impl PingPong {
    #[new]
    fn new() -> PyResult<Self> {
        baselines::PingPong::new().map(Self).map_err(os_error)
    }

    /// Seconds the round trip took.
    fn round_trip(&mut self, py: Python<'_>) -> PyResult<f64> {
        py.detach(|| self.0.round_trip())
            .map(|d| d.as_secs_f64())
            .map_err(os_error)
    }
}

#[pymodule]
fn rocketha_bench_baseline(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mmap_memcpy, m)?)?;
    m.add_function(wrap_pyfunction!(tcp_copy, m)?)?;
    m.add_function(wrap_pyfunction!(tcp_copy_to_file, m)?)?;
    m.add_function(wrap_pyfunction!(tcp_ping_pong, m)?)?;
    m.add_function(wrap_pyfunction!(timer_wakeups, m)?)?;
    m.add_class::<PingPong>()?;
    Ok(())
}
