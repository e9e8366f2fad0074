"""TLS on the remoting port (``tls.server.mode``): the project's Producer and PullConsumer with
``use_tls`` through an enforcing name server to an enforcing broker that registers over TLS
itself (``tls.enable``); plain clients refused there with an error, not a hang, and served by a
permissive port; certificates a client does not trust; bad settings refused at start, naming
the key and the file. The hostile-client limits over TLS (output cap, stalled handshakes) are
in ``rust/core/src/remoting/tests/tls.rs``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SEGMENT, Certificates, make_certificates, wait_for
from rocketha import (
    Broker,
    BrokerConfig,
    ConfigError,
    Message,
    MQClientError,
    NameServer,
    Producer,
    PullConsumer,
    SendStatus,
)
from rocketha.consumer import ConsumeFromWhere
from rocketha.tls import server_tls, server_tls_from_properties


def broker_config(tmp: Path, namesrv: str, certs: Certificates, **keys: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "storePathRootDir": str(tmp / "store"),
            "mappedFileSizeCommitLog": str(SEGMENT),
            "listenPort": "0",
            "haListenPort": "0",
            "haListenAddress": "127.0.0.1",
            "namesrvAddr": namesrv,
            "tls.server.certPath": str(certs.cert),
            "tls.server.keyPath": str(certs.key),
            **keys,
        }
    )


def send_once_routed(producer: Producer, topic: str, body: bytes) -> SendStatus:
    """Sends once the broker's registration reached the name server (until then there is no
    route, and the send fails before anything is sent)."""

    def attempt() -> SendStatus | None:
        try:
            return producer.send(Message(topic, body)).status
        except MQClientError as e:
            assert "no route info" in str(e), e
            return None

    status: SendStatus = wait_for(attempt, what=f"a route for {topic}")
    return status


def test_clients_over_tls_to_enforcing_servers_and_plain_ones_refused(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "pki")
    tls = server_tls("enforcing", cert_path=str(certs.cert), key_path=str(certs.key))
    with NameServer("127.0.0.1:0", tls=tls) as ns:
        config = broker_config(
            tmp_path,
            ns.listen_address,
            certs,
            **{
                "tls.server.mode": "enforcing",
                "tls.enable": "true",
                "tls.client.trustCertPath": str(certs.ca),
            },
        )
        with Broker(config) as broker:
            verified = Producer(
                ns.listen_address, "p", use_tls=True, tls_trust_cert_path=str(certs.ca)
            )
            with verified:
                # The broker's registration went over TLS too: the route appears.
                status = send_once_routed(verified, "Secure", b"hello over tls")
                assert status is SendStatus.SEND_OK
                result = verified.send(Message("Secure", b"second"))
                assert result.status is SendStatus.SEND_OK
            consumer = PullConsumer(
                ns.listen_address,
                "g",
                "Secure",
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                use_tls=True,
                tls_verify=False,
            )
            with consumer:
                bodies: list[bytes] = []
                wait_for(
                    lambda: (
                        bodies.extend(m.body for m in consumer.poll(timeout=1.0))
                        or len(bodies) >= 2
                    ),
                    what="both messages pulled over TLS",
                )
            assert bodies == [b"hello over tls", b"second"]
            assert [m.body for m in broker.messages()] == bodies

            # A plain client: the name server closes its connection; an error, not a hang.
            with (
                Producer(ns.listen_address, "plain", send_timeout=2.0) as plain,
                pytest.raises(MQClientError, match="closed the connection"),
            ):
                plain.send(Message("Secure", b"x"))
            # A CA that did not sign the servers' certificates: the handshake fails, saying so.
            stranger = make_certificates(tmp_path / "other")
            with (
                Producer(
                    ns.listen_address, "p", use_tls=True, tls_trust_cert_path=str(stranger.ca)
                ) as untrusting,
                pytest.raises(MQClientError, match="certificate"),
            ):
                untrusting.send(Message("Secure", b"x"))


def test_permissive_serves_plain_and_tls_clients(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "pki")
    tls = server_tls("permissive", cert_path=str(certs.cert), key_path=str(certs.key))
    with NameServer("127.0.0.1:0", tls=tls) as ns:
        # The broker registers in plain text.
        config = broker_config(
            tmp_path, ns.listen_address, certs, **{"tls.server.mode": "permissive"}
        )
        with (
            Broker(config) as broker,
            Producer(ns.listen_address, "plain") as plain,
            Producer(ns.listen_address, "tls", use_tls=True, tls_verify=False) as secure,
        ):
            assert send_once_routed(plain, "Mixed", b"plain") is SendStatus.SEND_OK
            assert secure.send(Message("Mixed", b"tls")).status is SendStatus.SEND_OK
            assert [m.body for m in broker.messages()] == [b"plain", b"tls"]


def test_bad_tls_settings_are_refused_naming_the_key_and_file(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "pki")
    missing = tmp_path / "missing.pem"
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath: .*missing\.pem: cannot read"):
        server_tls("enforcing", cert_path=str(missing), key_path=str(certs.key))
    with pytest.raises(ConfigError, match=r"tls\.server\.keyPath: .*server\.pem: holds no PEM"):
        server_tls("enforcing", cert_path=str(certs.cert), key_path=str(certs.cert))
    with pytest.raises(ConfigError, match=r"tls\.server\.keyPath: .*does not match"):
        other = make_certificates(tmp_path / "other")
        server_tls("enforcing", cert_path=str(certs.cert), key_path=str(other.key))
    with pytest.raises(ConfigError, match=r"tls\.server\.mode: .*disabled, permissive"):
        BrokerConfig.from_properties({"tls.server.mode": "on"})
    with pytest.raises(ConfigError, match=r"tls\.server\.keyPassword: encrypted keys"):
        BrokerConfig.from_properties({"tls.server.keyPassword": "secret"})
    with pytest.raises(ConfigError, match=r"--set: unknown key 'tls\.server\.cert'"):
        server_tls_from_properties({"tls.server.cert": "x"}, "--set")
    with pytest.raises(ConfigError, match=r"tls\.client\.trustCertPath: required"):
        Producer("127.0.0.1:9876", use_tls=True)
    # At broker start, before anything is opened.
    config = broker_config(tmp_path, "127.0.0.1:9876", certs, **{"tls.server.mode": "enforcing"})
    config.tls_server_cert_path = str(missing)
    with pytest.raises(ConfigError, match=r"missing\.pem"):
        Broker(config).start()
    assert not (tmp_path / "store").exists()
