//! TLS settings for Python: `ServerTls` (a broker's or name server's `tls.server.*`) and
//! `ClientTls` (`useTLS` with its trust), each loaded and checked once, when built, so a bad
//! certificate file fails the start with a `ConfigError` naming the key and the file.

use std::path::PathBuf;

use pyo3::prelude::*;
use rocketha_core::remoting::{
    ClientAuth, ClientTls as CoreClientTls, ServerTls as CoreServerTls, ServerTrust, TlsError,
    TlsMode, TlsServerSettings,
};

use crate::errors::ConfigError;

fn config_error(e: TlsError) -> PyErr {
    ConfigError::new_err(e.to_string())
}

/// A server's TLS: RocketMQ's `tls.server.mode` and its certificate.
#[pyclass(frozen, module = "rocketha._core")]
pub struct ServerTls {
    /// None when the mode is `disabled`.
    pub(crate) inner: Option<CoreServerTls>,
}

#[pymethods]
impl ServerTls {
    #[new]
    #[pyo3(signature = (mode, *, cert_path=None, key_path=None, need_client_auth="none", trust_cert_path=None))]
    fn new(
        mode: &str,
        cert_path: Option<PathBuf>,
        key_path: Option<PathBuf>,
        need_client_auth: &str,
        trust_cert_path: Option<PathBuf>,
    ) -> PyResult<Self> {
        let settings = TlsServerSettings {
            mode: mode.parse::<TlsMode>().map_err(config_error)?,
            cert_path,
            key_path,
            need_client_auth: need_client_auth
                .parse::<ClientAuth>()
                .map_err(config_error)?,
            trust_cert_path,
        };
        Ok(Self {
            inner: CoreServerTls::build(&settings).map_err(config_error)?,
        })
    }

    /// `disabled`, `permissive` or `enforcing`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner
            .as_ref()
            .map_or(TlsMode::Disabled, CoreServerTls::mode)
            .name()
    }
}

/// A client's TLS (`useTLS`): the CAs it trusts (`tls.client.trustCertPath`), or any
/// certificate (`insecure`, RocketMQ's `tls.test.mode.enable`); a certificate and key of its
/// own for servers that ask for one.
#[pyclass(frozen, module = "rocketha._core")]
pub struct ClientTls {
    pub(crate) inner: CoreClientTls,
}

#[pymethods]
impl ClientTls {
    #[new]
    #[pyo3(signature = (*, trust_cert_path=None, insecure=false, cert_path=None, key_path=None))]
    fn new(
        trust_cert_path: Option<PathBuf>,
        insecure: bool,
        cert_path: Option<PathBuf>,
        key_path: Option<PathBuf>,
    ) -> PyResult<Self> {
        let trust = match (trust_cert_path, insecure) {
            (Some(path), false) => ServerTrust::CaFile(path),
            (None, true) => ServerTrust::Insecure,
            (Some(_), true) => {
                return Err(ConfigError::new_err(
                    "tls.client.trustCertPath: set, and also insecure (trust any \
                     certificate): choose one",
                ))
            }
            (None, false) => {
                return Err(ConfigError::new_err(
                    "tls.client.trustCertPath: required to verify servers (the CA that \
                     signed their certificates, PEM); or trust any certificate explicitly \
                     (tls.test.mode.enable, the Java client's default)",
                ))
            }
        };
        let identity = match (&cert_path, &key_path) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            (None, None) => None,
            _ => {
                return Err(ConfigError::new_err(
                    "tls.client.certPath and tls.client.keyPath: set both or neither",
                ))
            }
        };
        Ok(Self {
            inner: CoreClientTls::build(&trust, identity).map_err(config_error)?,
        })
    }
}
