"""The real Apache RocketMQ Java client (5.x and 4.9) with ``useTLS`` against rocketha in
``tls.server.mode=enforcing``: ``rocketha namesrv`` and a rocketha broker that registers with
it over TLS (``tls.enable``), certificates made by the test. ``-Dtls.enable=true`` turns TLS on
for every connection the Java client opens, to the name server and the broker alike; it
verifies the servers' certificate against the test's CA (``tls.test.mode.enable=false``,
``tls.client.authServer=true``, ``tls.client.trustCertPath``). Sync sends answer SEND_OK, the
messages are in rocketha's store, and the Java consumer reads them back over TLS. Run:
``pytest -m interop``."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import (
    SEGMENT,
    BrokerProcess,
    Certificates,
    make_certificates,
    spawn_rocketha_namesrv,
    start_master,
)
from rocketha import MessageStore

from benches.peers.rocketmq import VERSIONS, RocketMQ, Unavailable

pytestmark = pytest.mark.interop

COUNT = 4


@dataclass
class SecureCluster:
    namesrv: str
    broker: BrokerProcess
    store: Path
    certs: Certificates

    def java_flags(self) -> list[str]:
        return [
            "-Dtls.enable=true",
            "-Dtls.test.mode.enable=false",
            "-Dtls.client.authServer=true",
            f"-Dtls.client.trustCertPath={self.certs.ca}",
        ]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    root = tmp_path_factory.mktemp("tls")
    certs = make_certificates(root / "pki")
    server = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": certs.cert,
        "tls.server.keyPath": certs.key,
    }
    flags = [f"--set={key}={value}" for key, value in server.items()]
    with spawn_rocketha_namesrv(root / "namesrv.log", *flags) as ns:
        broker = start_master(
            root,
            "tls",
            ns.address,
            brokerRole="ASYNC_MASTER",
            **server,
            **{"tls.enable": "true", "tls.client.trustCertPath": certs.ca},
        )
        try:
            yield SecureCluster(ns.address, broker, root / "tls-master", certs)
        finally:
            broker.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_java_client_with_use_tls_sends_and_reads_back(
    version: str, cluster: SecureCluster, tmp_path: Path
) -> None:
    try:
        rmq = RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))
    topic = f"Tls{version.replace('.', '')}"
    prefix = f"tls-{version}"
    broker = str(cluster.broker.started["listen_address"])
    jvm = cluster.java_flags()
    sent = rmq.send(
        cluster.namesrv, topic, "sync", COUNT, prefix, home=tmp_path / "p", broker=broker, jvm=jvm
    )
    assert [o.status for o in sent] == ["SEND_OK"] * COUNT, sent
    bodies = {f"{prefix}-{seq}".encode() for seq in range(COUNT)}
    with MessageStore(cluster.store, mapped_file_size_commit_log=SEGMENT, read_only=True) as store:
        store.refresh()
        assert bodies <= {m.body for m in store.messages()}
    got = rmq.consume(cluster.namesrv, topic, COUNT, home=tmp_path / "c", jvm=jvm)
    assert sorted((r.body_len, r.body_crc) for r in got) == sorted(
        (len(b), zlib.crc32(b)) for b in bodies
    ), got
