//! `rocketha._core`: thin PyO3 wrappers over rocketha-core. Arguments are extracted first, then
//! every blocking or long call runs with the GIL released (`py.detach`).

use pyo3::prelude::*;

mod arrow;
mod errors;
mod ha;
mod store;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    arrow::register(m)?;
    m.add_class::<store::Message>()?;
    m.add_class::<store::PutResult>()?;
    m.add_class::<store::MessageExt>()?;
    m.add_class::<store::SegmentSlice>()?;
    m.add_class::<store::PyMessageStore>()?;
    m.add_class::<ha::HAMaster>()?;
    m.add_class::<ha::HAClient>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
