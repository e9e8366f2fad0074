//! `rocketha._core.BrokerConfig`: the core's one `broker.conf` (every key, its default, its
//! typed parse and validation), built from RocketMQ-keyed properties and snake_case keywords,
//! and handed whole to the store and the broker. `rocketha.BrokerConfig` is its typed view.

use std::collections::{BTreeMap, HashMap};

use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};
use rocketha_core::{BrokerConfig, ConfigError as CoreError, Value};

use crate::errors::ConfigError;

#[pyclass(frozen, module = "rocketha._core", name = "BrokerConfig")]
pub struct PyBrokerConfig {
    pub(crate) inner: BrokerConfig,
    ignored: BTreeMap<String, String>,
}

/// A keyword's value as the text a `broker.conf` would hold: booleans are `true`/`false`,
/// enums are their names (`str()` of a `StrEnum`); `None` is no value, so the key keeps its
/// default (unset, for the keys that may be).
fn text(value: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if value.is_none() {
        return Ok(None);
    }
    if value.is_instance_of::<PyBool>() {
        return Ok(Some(value.extract::<bool>()?.to_string()));
    }
    Ok(Some(value.str()?.to_string()))
}

fn to_py(py: Python<'_>, value: Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Int(n) => n.into_pyobject(py)?.into_any().unbind(),
        Value::Bool(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        Value::Unset => py.None(),
    })
}

/// The error as the user should read it: a key from the command line (`origins`) is named as
/// given there, every other by `source` (the file, or `<code>`).
fn describe(
    e: &CoreError,
    source: &str,
    origins: &HashMap<String, String>,
    given: &HashMap<String, String>,
) -> PyErr {
    let message = match (origins.get(e.key()), e) {
        (Some(origin), CoreError::Invalid { key, problem }) => {
            let value = given.get(*key).map(String::as_str).unwrap_or_default();
            format!("{origin} {key}={value}: {problem}")
        }
        (Some(origin), CoreError::UnknownKey { .. }) => format!("{origin}: {e}"),
        (None, _) => format!("{source}: {e}"),
    };
    ConfigError::new_err(message)
}

#[pymethods]
impl PyBrokerConfig {
    /// The defaults, then `properties` (RocketMQ's keys, as in `broker.conf`), then `fields`
    /// (snake_case, as `rocketha.BrokerConfig`'s), checked as a whole. Errors name `source`, or
    /// a key's entry in `origins` (`--set`) when it has one.
    #[new]
    #[pyo3(signature = (properties=None, *, source=None, origins=None, **fields))]
    fn new(
        properties: Option<&Bound<'_, PyDict>>,
        source: Option<String>,
        origins: Option<HashMap<String, String>>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let source = source.unwrap_or_else(|| "<code>".to_owned());
        let origins = origins.unwrap_or_default();
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (key, value) in properties.into_iter().flat_map(|d| d.iter()) {
            if let Some(value) = text(&value)? {
                pairs.push((key.extract()?, value));
            }
        }
        for (field, value) in fields.into_iter().flat_map(|d| d.iter()) {
            let field: String = field.extract()?;
            let key = BrokerConfig::key_of(&field).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "BrokerConfig() got an unexpected keyword argument {field:?}"
                ))
            })?;
            if let Some(value) = text(&value)? {
                pairs.push((key.to_owned(), value));
            }
        }
        let given: HashMap<String, String> = pairs.iter().cloned().collect();
        let loaded = BrokerConfig::from_properties(pairs.iter().map(|(k, v)| (&**k, &**v)))
            .map_err(|e| describe(&e, &source, &origins, &given))?;
        Ok(Self {
            inner: loaded.config,
            ignored: loaded.ignored,
        })
    }

    /// A field by its snake_case name; `in_sync_replicas` resolved by the role.
    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        if name == "in_sync_replicas" {
            return to_py(py, Value::Int(self.inner.in_sync_replicas()));
        }
        self.inner
            .values()
            .into_iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| to_py(py, value))
            .unwrap_or_else(|| {
                Err(PyAttributeError::new_err(format!(
                    "BrokerConfig has no field {name:?}"
                )))
            })
    }

    /// `{field: value}` of every key, as `__getattr__` gives them.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (field, value) in self.inner.values() {
            d.set_item(field, to_py(py, value)?)?;
        }
        d.set_item("in_sync_replicas", self.inner.in_sync_replicas())?;
        Ok(d)
    }

    /// RocketMQ keys that were read but are not acted on.
    #[getter]
    fn ignored_keys(&self) -> BTreeMap<String, String> {
        self.ignored.clone()
    }

    /// The config as a `broker.conf` text, secrets left out.
    fn to_properties(&self) -> String {
        self.inner.to_properties()
    }

    /// Distinct slaves a SYNC_MASTER put waits for (`inSyncReplicas` - 1).
    #[getter]
    fn slave_acks_required(&self) -> usize {
        self.inner.slave_acks_required()
    }

    /// What the name servers hand this master's slaves for an HA port bound at `port`.
    fn advertised_ha_address(&self, port: u16) -> String {
        self.inner.advertised_ha_address(port)
    }

    fn __repr__(&self) -> String {
        format!(
            "<rocketha._core.BrokerConfig {}>",
            self.inner.get("brokerName").unwrap_or_default()
        )
    }
}

/// `[(field, key)]` of every key, in the order of the fields.
#[pyfunction]
pub(crate) fn broker_config_keys() -> Vec<(&'static str, &'static str)> {
    BrokerConfig::FIELDS
        .iter()
        .copied()
        .zip(BrokerConfig::KEYS.iter().copied())
        .collect()
}

/// `[(line, key, value)]` of a `broker.conf` text; a line that is not `key=value` raises
/// `ConfigError` naming `source` and the line.
#[pyfunction]
pub(crate) fn parse_properties(text: &str, source: &str) -> PyResult<Vec<(usize, String, String)>> {
    rocketha_core::parse_properties(text).map_err(|e| {
        ConfigError::new_err(format!(
            "{source}:{}: cannot parse {:?} (expected key=value)",
            e.line, e.text
        ))
    })
}
