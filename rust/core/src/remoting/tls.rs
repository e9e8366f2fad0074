//! TLS on the remoting port, RocketMQ's `TlsSystemConfig` and `TlsHelper` over rustls (its
//! `ring` provider): the server's mode and certificate, and the client's trust.
//!
//! The mode is RocketMQ's `tls.server.mode`: `disabled` (plain TCP only), `permissive` (each
//! connection's first byte decides: 0x16, a TLS handshake record, starts TLS, anything else is
//! plain, as RocketMQ's `HandshakeHandler` sniffs it) and `enforcing` (a plain connection is
//! closed). The TLS byte stream is a transport only: above it the same frames are decoded.
//!
//! Certificates and keys are PEM files, read once at start; a file that cannot be read or holds
//! no usable certificate or key fails the start with an error naming the key and the file.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The first byte of a TLS handshake record (`ContentType.handshake`).
pub(crate) const HANDSHAKE_RECORD: u8 = 0x16;

/// `tls.server.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Plain TCP only.
    #[default]
    Disabled,
    /// TLS or plain TCP, chosen per connection by its first byte.
    Permissive,
    /// TLS only.
    Enforcing,
}

impl TlsMode {
    /// RocketMQ's name of the mode.
    pub fn name(&self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

impl FromStr for TlsMode {
    type Err = TlsError;

    fn from_str(s: &str) -> Result<Self, TlsError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disabled" => Ok(TlsMode::Disabled),
            "permissive" => Ok(TlsMode::Permissive),
            "enforcing" => Ok(TlsMode::Enforcing),
            _ => Err(TlsError::Setting {
                key: "tls.server.mode",
                problem: format!("{s:?} is not one of disabled, permissive, enforcing"),
            }),
        }
    }
}

/// `tls.server.need.client.auth`: whether the server asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    #[default]
    None,
    /// A client may present one; if it does, it must verify.
    Optional,
    /// A client without a certificate that verifies is refused.
    Require,
}

impl FromStr for ClientAuth {
    type Err = TlsError;

    fn from_str(s: &str) -> Result<Self, TlsError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "optional" => Ok(ClientAuth::Optional),
            "require" => Ok(ClientAuth::Require),
            _ => Err(TlsError::Setting {
                key: "tls.server.need.client.auth",
                problem: format!("{s:?} is not one of none, optional, require"),
            }),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    #[error("{key}: {problem}")]
    Setting { key: &'static str, problem: String },
    #[error("{key}: {path}: {problem}")]
    File {
        key: &'static str,
        path: PathBuf,
        problem: String,
    },
}

/// The server side of `TlsSystemConfig`: RocketMQ's `tls.server.*` settings.
#[derive(Debug, Clone, Default)]
pub struct TlsServerSettings {
    pub mode: TlsMode,
    /// `tls.server.certPath`: the certificate chain, PEM, the server's own first.
    pub cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: its private key, PEM (PKCS#8, PKCS#1 or SEC1), unencrypted.
    pub key_path: Option<PathBuf>,
    pub need_client_auth: ClientAuth,
    /// `tls.server.trustCertPath`: the CAs client certificates must chain to.
    pub trust_cert_path: Option<PathBuf>,
}

/// A server's TLS, ready to accept: its mode and the rustls configuration every connection
/// shares.
#[derive(Clone)]
pub struct ServerTls {
    pub(crate) mode: TlsMode,
    pub(crate) config: Arc<rustls::ServerConfig>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("mode", &self.mode)
            .finish()
    }
}

impl ServerTls {
    /// Loads the certificate and key `settings` name (`TlsHelper.buildSslContext(false)`);
    /// `None` when the mode is `disabled`.
    pub fn build(settings: &TlsServerSettings) -> Result<Option<Self>, TlsError> {
        if settings.mode == TlsMode::Disabled {
            return Ok(None);
        }
        let required = |path: &Option<PathBuf>, key: &'static str| {
            path.clone().ok_or_else(|| TlsError::Setting {
                key,
                problem: format!(
                    "required with tls.server.mode={} (a PEM file)",
                    settings.mode.name()
                ),
            })
        };
        let cert_path = required(&settings.cert_path, "tls.server.certPath")?;
        let key_path = required(&settings.key_path, "tls.server.keyPath")?;
        let chain = load_certs(&cert_path, "tls.server.certPath")?;
        let key = load_key(&key_path, "tls.server.keyPath")?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| setting("tls.server.mode", e))?;
        let builder = match settings.need_client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let trust = settings
                    .trust_cert_path
                    .as_ref()
                    .ok_or_else(|| TlsError::Setting {
                        key: "tls.server.trustCertPath",
                        problem: "required with tls.server.need.client.auth (the CAs client \
                              certificates must chain to, PEM)"
                            .into(),
                    })?;
                let roots = Arc::new(load_roots(trust, "tls.server.trustCertPath")?);
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = if auth == ClientAuth::Optional {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| setting("tls.server.trustCertPath", e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::File {
                key: "tls.server.keyPath",
                path: key_path,
                problem: format!("does not match tls.server.certPath: {e}"),
            })?;
        Ok(Some(Self {
            mode: settings.mode,
            config: Arc::new(config),
        }))
    }

    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    pub(crate) fn accept(&self) -> Result<rustls::Connection, String> {
        rustls::ServerConnection::new(self.config.clone())
            .map(rustls::Connection::Server)
            .map_err(|e| e.to_string())
    }
}

/// How a client trusts servers (RocketMQ's `tls.client.*`).
#[derive(Debug, Clone)]
pub enum ServerTrust {
    /// Certificates must chain to these CAs (`tls.client.trustCertPath`) and name the host or
    /// IP address the client connects to.
    CaFile(PathBuf),
    /// Any certificate (`tls.test.mode.enable`, the Java client's default): encryption without
    /// knowing who is at the other end.
    Insecure,
}

/// A client's TLS: the rustls configuration its connections share.
#[derive(Clone)]
pub struct ClientTls {
    pub(crate) config: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// `trust` for the server; `identity` (certificate chain and key files, PEM) for a server
    /// that asks for a client certificate (`tls.client.certPath`, `tls.client.keyPath`).
    pub fn build(trust: &ServerTrust, identity: Option<(&Path, &Path)>) -> Result<Self, TlsError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| setting("tls.client", e))?;
        let builder = match trust {
            ServerTrust::CaFile(path) => {
                builder.with_root_certificates(load_roots(path, "tls.client.trustCertPath")?)
            }
            ServerTrust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(TrustAll(provider()))),
        };
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = load_certs(cert, "tls.client.certPath")?;
                let key_der = load_key(key, "tls.client.keyPath")?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| TlsError::File {
                        key: "tls.client.keyPath",
                        path: key.to_owned(),
                        problem: format!("does not match tls.client.certPath: {e}"),
                    })?
            }
        };
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// The rustls configuration, for a connection of the caller's own.
    #[cfg(test)]
    pub(crate) fn config(&self) -> Arc<rustls::ClientConfig> {
        self.config.clone()
    }

    /// A connection to `host` (the host part of the address dialled: a name, or an IP
    /// address, which the certificate must then list).
    pub(crate) fn connect(&self, host: &str) -> Result<rustls::Connection, String> {
        let name = match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(host.to_owned())
                .map_err(|e| format!("{host:?} is not a server name for TLS: {e}"))?,
        };
        rustls::ClientConnection::new(self.config.clone(), name)
            .map(rustls::Connection::Client)
            .map_err(|e| e.to_string())
    }
}

/// What [`read_plaintext`] saw of the socket.
pub(crate) struct TlsRead {
    /// The peer closed: the end of the stream or its `close_notify`.
    pub(crate) eof: bool,
    /// The socket said WouldBlock: a new edge comes with new bytes.
    pub(crate) drained: bool,
}

/// Reads records from `socket` until it would block (at most `max_reads` reads of rustls' 4 KiB),
/// decrypts them and appends the plaintext to `out`. A TLS failure (a bad handshake, a
/// corrupt record, a certificate refused) is an `InvalidData` error saying why; rustls then
/// has an alert queued for [`write_records`].
pub(crate) fn read_plaintext(
    tls: &mut rustls::Connection,
    mut socket: &mut dyn Read,
    out: &mut Vec<u8>,
    max_reads: usize,
) -> io::Result<TlsRead> {
    let mut seen = TlsRead {
        eof: false,
        drained: false,
    };
    for _ in 0..max_reads {
        match tls.read_tls(&mut socket) {
            Ok(0) => seen.eof = true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                seen.drained = true;
                return Ok(seen);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let state = tls
            .process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")))?;
        let n = state.plaintext_bytes_to_read();
        if n > 0 {
            let start = out.len();
            out.resize(start + n, 0);
            tls.reader().read_exact(&mut out[start..])?;
        }
        if seen.eof || state.peer_has_closed() {
            seen.eof = true;
            return Ok(seen);
        }
    }
    Ok(seen)
}

/// Hands `data` to `tls` to encrypt, once its handshake is done; returns how much it took
/// (0 while handshaking, or while rustls' own buffer is at its 64 KiB limit: the rest stays
/// with the caller, whose cap on unsent bytes so still holds).
pub(crate) fn feed(tls: &mut rustls::Connection, data: &[u8]) -> io::Result<usize> {
    if tls.is_handshaking() {
        return Ok(0);
    }
    tls.writer().write(data)
}

/// Writes `tls`'s pending records to `socket` until none are left or the socket would block;
/// returns whether it wrote anything and whether it blocked.
pub(crate) fn write_records(
    tls: &mut rustls::Connection,
    mut socket: &mut dyn Write,
) -> io::Result<(bool, bool)> {
    let mut wrote = false;
    while tls.wants_write() {
        match tls.write_tls(&mut socket) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => wrote = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((wrote, true)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((wrote, false))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

#[cold]
fn setting(key: &'static str, e: impl fmt::Display) -> TlsError {
    TlsError::Setting {
        key,
        problem: e.to_string(),
    }
}

#[cold]
fn file_error(key: &'static str, path: &Path, problem: impl fmt::Display) -> TlsError {
    TlsError::File {
        key,
        path: path.to_owned(),
        problem: problem.to_string(),
    }
}

fn read_pem(path: &Path, key: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| file_error(key, path, format!("cannot read: {e}")))
}

fn load_certs(path: &Path, key: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_pem(path, key)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(key, path, format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(file_error(
            key,
            path,
            "holds no certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

fn load_key(path: &Path, key: &'static str) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read_pem(path, key)?;
    if pem.windows(b"ENCRYPTED".len()).any(|w| w == b"ENCRYPTED") {
        return Err(file_error(
            key,
            path,
            "an encrypted private key: rocketha reads unencrypted keys only \
             (openssl pkcs8 -topk8 -nocrypt)",
        ));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        file_error(
            key,
            path,
            format!("holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })
}

fn load_roots(path: &Path, key: &'static str) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path, key)? {
        roots
            .add(cert)
            .map_err(|e| file_error(key, path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// Accepts any server certificate, as the Java client's `InsecureTrustManagerFactory` does in
/// test mode; the handshake's signatures are still checked, so the peer holds the key of the
/// certificate it sent.
#[derive(Debug)]
struct TrustAll(Arc<CryptoProvider>);

impl ServerCertVerifier for TrustAll {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_rocketmq_names() {
        assert_eq!("ENFORCING".parse::<TlsMode>().unwrap(), TlsMode::Enforcing);
        assert_eq!(
            "permissive".parse::<TlsMode>().unwrap(),
            TlsMode::Permissive
        );
        let e = "on".parse::<TlsMode>().unwrap_err().to_string();
        assert!(e.contains("tls.server.mode") && e.contains("\"on\""), "{e}");
        assert_eq!(
            "require".parse::<ClientAuth>().unwrap(),
            ClientAuth::Require
        );
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not pem").unwrap();
        let settings = |cert: &Path, key: &Path| TlsServerSettings {
            mode: TlsMode::Enforcing,
            cert_path: Some(cert.to_owned()),
            key_path: Some(key.to_owned()),
            ..TlsServerSettings::default()
        };
        let e = ServerTls::build(&settings(&missing, &garbage))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tls.server.certPath") && e.contains("missing.pem") && e.contains("read"),
            "{e}"
        );
        let e = ServerTls::build(&settings(&garbage, &garbage))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("garbage.pem") && e.contains("no certificate"),
            "{e}"
        );
        let e = ServerTls::build(&TlsServerSettings {
            mode: TlsMode::Permissive,
            ..TlsServerSettings::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tls.server.certPath") && e.contains("required"),
            "{e}"
        );
        assert!(ServerTls::build(&TlsServerSettings::default())
            .unwrap()
            .is_none());
    }
}
