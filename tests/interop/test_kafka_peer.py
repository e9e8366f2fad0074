"""The Kafka peer of ``rocketha bench peers`` (``benches/peers/kafka.py``): the two-broker KRaft
cluster comes up with the topic fully replicated, acknowledges ``acks=all`` sends through
``KafkaPeer load``, and leaves no process behind, also when the block fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from benches.peers.kafka import Kafka
from benches.peers.rocketmq import Unavailable

pytestmark = pytest.mark.interop


def resolve() -> Kafka:
    try:
        return Kafka.resolve()
    except Unavailable as e:
        pytest.fail(str(e))


def test_cluster_acknowledges_acks_all_and_stops(workdir: Path) -> None:
    kafka = resolve()
    with kafka.cluster(workdir / "kafka", "KafkaPeerTest") as cluster:
        brokers = cluster.brokers
        assert len(brokers) == 2 and all(b.proc.poll() is None for b in brokers)
        r = kafka.load(cluster.bootstrap, "KafkaPeerTest", 2, 0.5, home=workdir / "load")
        assert r["sent"] > 0 and r["ok"] == r["sent"], r
        assert r["statuses"] == {"SEND_OK": r["sent"]}, r
    assert all(b.proc.poll() is not None for b in brokers)


def test_cluster_is_stopped_when_the_block_fails(workdir: Path) -> None:
    kafka = resolve()
    brokers = []
    with (
        pytest.raises(RuntimeError, match="inside"),
        kafka.cluster(workdir / "kafka", "KafkaPeerFail") as cluster,
    ):
        brokers = cluster.brokers
        raise RuntimeError("inside")
    assert len(brokers) == 2
    assert all(b.proc.poll() is not None for b in brokers)
