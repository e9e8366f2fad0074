//! TLS on the remoting port (`tls.server.mode`), over real loopback sockets with certificates
//! made for the test: round trips in enforcing and permissive mode, plain clients refused by
//! an enforcing server, certificates a client does not trust, and the hostile-client limits
//! (the output cap, the idle timer) holding for TLS connections too.

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::remoting::codes::SerializeType;
use crate::remoting::{
    ClientAuth, ClientConfig, ClientError, ClientTls, NettyRemotingClient, ServerConfig, ServerTls,
    ServerTrust, TlsMode, TlsServerSettings,
};

use super::fixture::*;

/// A CA, a server certificate it signed for 127.0.0.1, and a client certificate, as PEM files.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let write = |name: &str, pem: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    let leaf = |names: Vec<String>| {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(names).unwrap();
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (cert, key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
    let (client_cert, client_key) = leaf(vec!["client".into()]);
    Pki {
        ca: write("ca.pem", ca.pem()),
        cert: write("server.pem", cert),
        key: write("server.key", key),
        client_cert: write("client.pem", client_cert),
        client_key: write("client.key", client_key),
        _dir: dir,
    }
}

fn server_tls(pki: &Pki, mode: TlsMode, need_client_auth: ClientAuth) -> ServerConfig {
    let tls = ServerTls::build(&TlsServerSettings {
        mode,
        cert_path: Some(pki.cert.clone()),
        key_path: Some(pki.key.clone()),
        need_client_auth,
        trust_cert_path: Some(pki.ca.clone()),
    })
    .unwrap();
    ServerConfig {
        tls,
        ..ServerConfig::default()
    }
}

fn tls_client(trust: ServerTrust, identity: Option<(&Path, &Path)>) -> NettyRemotingClient {
    NettyRemotingClient::start(ClientConfig {
        tls: Some(ClientTls::build(&trust, identity).unwrap()),
        ..ClientConfig::default()
    })
    .unwrap()
}

fn round_trip(client: &NettyRemotingClient, addr: &str, body: &[u8]) -> Result<(), ClientError> {
    let response = client.invoke_sync(addr, echo(body, SerializeType::Json), TIMEOUT)?;
    assert_eq!(response.body, body);
    Ok(())
}

#[test]
fn enforcing_serves_tls_clients_and_closes_plain_ones() {
    let pki = pki();
    let f = start(server_tls(&pki, TlsMode::Enforcing, ClientAuth::None));
    let addr = f.server.local_addr().to_string();
    let verified = tls_client(ServerTrust::CaFile(pki.ca.clone()), None);
    round_trip(&verified, &addr, b"over tls").unwrap();
    // Larger than rustls' 64 KiB buffer and its 16 KiB records, both ways, many in flight.
    let big: Vec<u8> = (0..3 << 20).map(|i| i as u8).collect();
    let results: Vec<_> = std::thread::scope(|s| {
        (0..4)
            .map(|_| s.spawn(|| round_trip(&verified, &addr, &big)))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect()
    });
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    // By name too: the certificate lists localhost.
    let by_name = format!("localhost:{}", f.server.local_addr().port());
    round_trip(&verified, &by_name, b"by name").unwrap();
    // The Java client's test mode trusts any certificate.
    round_trip(&tls_client(ServerTrust::Insecure, None), &addr, b"any").unwrap();

    let mut plain = client(&f.server);
    let err = plain
        .invoke(echo(b"plain", SerializeType::Json), TIMEOUT)
        .unwrap_err();
    assert!(matches!(err, ClientError::Closed { .. }), "{err}");
    let event = closed_with(&f.server, "tls.server.mode=enforcing");
    assert!(event.problem, "{event:?}");
}

#[test]
fn a_tls_client_on_a_plain_port_is_told_apart() {
    let f = start(ServerConfig::default());
    let client = tls_client(ServerTrust::Insecure, None);
    let err = round_trip(&client, &f.server.local_addr().to_string(), b"x").unwrap_err();
    assert!(!err.may_have_arrived(), "{err:?}");
    closed_with(&f.server, "a TLS handshake? this port serves plain TCP");
}

#[test]
fn permissive_serves_both_and_an_untrusted_certificate_is_refused() {
    let pki = pki();
    let f = start(server_tls(&pki, TlsMode::Permissive, ClientAuth::None));
    let addr = f.server.local_addr().to_string();
    let mut plain = client(&f.server);
    plain
        .invoke(echo(b"plain", SerializeType::RocketMq), TIMEOUT)
        .unwrap();
    let tls = tls_client(ServerTrust::CaFile(pki.ca.clone()), None);
    round_trip(&tls, &addr, b"tls").unwrap();

    // A client trusting another CA: the handshake fails, naming the certificate, and the
    // request never left the process.
    let other = self::pki();
    let stranger = tls_client(ServerTrust::CaFile(other.ca.clone()), None);
    let err = round_trip(&stranger, &addr, b"x").unwrap_err();
    assert!(!err.may_have_arrived(), "{err:?}");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[test]
fn a_required_client_certificate_is_checked() {
    let pki = pki();
    let f = start(server_tls(&pki, TlsMode::Enforcing, ClientAuth::Require));
    let addr = f.server.local_addr().to_string();
    let trust = ServerTrust::CaFile(pki.ca.clone());
    let with_cert = tls_client(trust.clone(), Some((&pki.client_cert, &pki.client_key)));
    round_trip(&with_cert, &addr, b"mutual").unwrap();
    let without = tls_client(trust, None);
    assert!(round_trip(&without, &addr, b"x").is_err());
    closed_with(&f.server, "TLS");
}

#[test]
fn a_tls_client_that_never_reads_is_closed_at_the_output_cap() {
    let pki = pki();
    let f = start(ServerConfig {
        max_output_per_connection: 256 * 1024,
        ..server_tls(&pki, TlsMode::Enforcing, ClientAuth::None)
    });
    let config = ClientTls::build(&ServerTrust::Insecure, None).unwrap();
    let name = "127.0.0.1".try_into().unwrap();
    let session = rustls::ClientConnection::new(config.config(), name).unwrap();
    let socket = TcpStream::connect(f.server.local_addr()).unwrap();
    socket.set_write_timeout(Some(TIMEOUT)).unwrap();
    let mut hog = rustls::StreamOwned::new(session, socket);
    send_without_reading(&mut hog);
    let event = closed_with(&f.server, "max_output_per_connection");
    assert!(event.problem);
}

#[test]
fn a_handshake_that_never_completes_is_closed_by_the_idle_timer() {
    let pki = pki();
    let f = start(ServerConfig {
        idle_timeout: Some(Duration::from_millis(200)),
        ..server_tls(&pki, TlsMode::Enforcing, ClientAuth::None)
    });
    // A record header announcing a ClientHello that never comes.
    let mut stalled = TcpStream::connect(f.server.local_addr()).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    assert!(read_until_closed(&mut stalled).is_empty());
    closed_with(&f.server, "idle for 200 ms");
}
