"""``mqadmin`` (rocketmq-tools 4.9.7 and 5.4.0) running the commands operators change a cluster
with against ``rocketha namesrv`` and a rocketha master: ``getBrokerConfig``,
``updateBrokerConfig`` (a live key taken, another refused with the broker's remark),
``updateSubGroup`` / ``deleteSubGroup``, ``deleteTopic``, ``consumerConnection`` and
``producerConnection``, each checked by what the broker
and the name server then hold, not only by what mqadmin printed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BrokerProcess, RochaNamesrv, start_master, wait_for
from rocketha import Admin, ConsumeFromWhere, Message, Producer, PullConsumer

from benches.peers.rocketmq import VERSIONS, RocketMQ, Unavailable

pytestmark = pytest.mark.interop


def resolve(version: str) -> RocketMQ:
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


def tag(version: str) -> str:
    return version.replace(".", "")


def exceptions(out: str) -> list[str]:
    return [line for line in out.splitlines() if "Exception" in line]


@pytest.fixture(scope="module")
def master(
    tmp_path_factory: pytest.TempPathFactory, rocketha_namesrv: RochaNamesrv
) -> Iterator[str]:
    """A rocketha master of its own group; its client address."""
    proc: BrokerProcess = start_master(
        tmp_path_factory.mktemp("admin"), "admin-a", rocketha_namesrv.address
    )
    try:
        yield str(proc.started["listen_address"])
    finally:
        proc.kill()


def broker_config(rmq: RocketMQ, home: Path, ns: str, addr: str) -> dict[str, str]:
    """``getBrokerConfig -b``'s ``key=  value`` lines."""
    out = rmq.mqadmin(home, "getBrokerConfig", "-b", addr, "-n", ns)
    assert exceptions(out) == [], out
    pairs = (line.partition("=") for line in out.splitlines() if "=  " in line)
    return {k.strip(): v.strip() for k, _, v in pairs}


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_reads_and_changes_a_brokers_config(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    config = broker_config(rmq, tmp_path, ns, master)
    assert (config["brokerName"], config["brokerRole"]) == ("admin-a", "SYNC_MASTER")
    assert config["brokerPermission"] == "6" and "haAuthSecret" not in config

    out = rmq.mqadmin(
        tmp_path, "updateBrokerConfig", "-b", master, "-k", "brokerPermission", "-v", "4", "-n", ns
    )
    assert f"update broker config success, {master}" in out, out
    assert broker_config(rmq, tmp_path, ns, master)["brokerPermission"] == "4"
    out = rmq.mqadmin(
        tmp_path, "updateBrokerConfig", "-b", master, "-k", "brokerPermission", "-v", "6", "-n", ns
    )
    assert f"update broker config success, {master}" in out, out

    out = rmq.mqadmin(
        tmp_path, "updateBrokerConfig", "-b", master, "-k", "listenPort", "-v", "1", "-n", ns
    )
    assert "listenPort may not change while the broker runs" in out, out
    assert broker_config(rmq, tmp_path, ns, master)["listenPort"] == "0"


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_creates_and_deletes_groups_and_topics(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    group, topic = f"ops-{tag(version)}", f"Ops{tag(version)}"
    with Admin(ns) as admin:
        out = rmq.mqadmin(
            tmp_path, "updateSubGroup", "-b", master, "-g", group, "-r", "3", "-n", ns
        )
        assert f"create subscription group to {master} success." in out, out
        assert group in admin.groups()
        out = rmq.mqadmin(tmp_path, "deleteSubGroup", "-b", master, "-g", group, "-n", ns)
        assert f"delete subscription group [{group}] from broker [{master}]" in out, out
        assert group not in admin.groups()

        out = rmq.mqadmin(tmp_path, "updateTopic", "-b", master, "-t", topic, "-n", ns)
        assert f"create topic to {master} success." in out, out
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
        out = rmq.mqadmin(tmp_path, "deleteTopic", "-t", topic, "-c", "DefaultCluster", "-n", ns)
        assert f"delete topic [{topic}] from cluster [DefaultCluster] success." in out, out
        assert f"delete topic [{topic}] from NameServer success." in out, out
        assert exceptions(out) == [], out
        assert topic not in admin.topics()
        assert admin.consumer_progress(group) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_lists_a_groups_connections(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``consumerConnection`` and ``producerConnection``: the clients connected in a group, from
    their heartbeats, with the consumer group's subscription."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic, group = f"Conn{tag(version)}", f"conn-{tag(version)}"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=1)
        # Routed first: a consumer of a topic nobody routes yet waits for its next route check.
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    with Producer(ns, f"{group}-p") as producer:
        producer.send(Message(topic, b"x", tags="a"))
        consumer = PullConsumer(
            ns,
            group,
            topic,
            subscription="a || b",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        wait_for(lambda: consumer.poll(0.5), what="the consumer's first message")
        out = rmq.mqadmin(tmp_path, "consumerConnection", "-g", group, "-n", ns)
        assert exceptions(out) == [], out
        rows = [line.split() for line in out.splitlines() if "RUST" in line]
        assert len(rows) == 1 and rows[0][1].startswith("127.0.0.1:"), out
        subscriptions = [line.split(None, 1) for line in out.splitlines() if line.startswith(topic)]
        assert subscriptions == [[topic, "a || b"]], out
        assert "ConsumeType: CONSUME_ACTIVELY" in out and "MessageModel: CLUSTERING" in out, out

        out = rmq.mqadmin(tmp_path, "producerConnection", "-g", f"{group}-p", "-t", topic, "-n", ns)
        assert exceptions(out) == [], out
        assert len([line for line in out.splitlines() if "RUST" in line]) == 1, out
        consumer.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_resets_a_running_groups_offsets_and_drains_a_broker(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``resetOffsetByTime`` while our consumer runs: it reads the topic again from the start;
    ``queryMsgByUniqueKey`` with its consumption track; ``wipeWritePerm`` / ``addWritePerm``
    drain the broker of sends at the name server and undo it."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic, group = f"Reset{tag(version)}", f"reset-{tag(version)}"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=2)
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    with Producer(ns, f"{group}-p") as producer:
        sent = [producer.send(Message(topic, b"%d" % i)) for i in range(6)]
    with PullConsumer(
        ns, group, topic, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.body for m in consumer.poll(0.5)) or len(got) >= 6)
        consumer.commit_sync()
        out = rmq.mqadmin(
            tmp_path, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", "-n", ns
        )
        assert exceptions(out) == [], out
        again: list[bytes] = []
        wait_for(lambda: again.extend(m.body for m in consumer.poll(0.5)) or len(again) >= 6)
        assert sorted(again) == sorted(got), out

        out = rmq.mqadmin(
            tmp_path, "queryMsgByUniqueKey", "-t", topic, "-i", sent[2].msg_id, "-n", ns
        )
        assert exceptions(out) == [], out
        assert sent[2].msg_id in out and group in out, out

    out = rmq.mqadmin(tmp_path, "wipeWritePerm", "-b", "admin-a", "-n", ns)
    assert f"wipe write perm of broker[admin-a] in name server[{ns}] OK" in out, out
    route = rmq.mqadmin(tmp_path, "topicRoute", "-t", topic, "-n", ns)
    assert '"perm":4' in "".join(route.split()), route
    out = rmq.mqadmin(tmp_path, "addWritePerm", "-b", "admin-a", "-n", ns)
    assert exceptions(out) == [] and "OK" in out, out
    route = rmq.mqadmin(tmp_path, "topicRoute", "-t", topic, "-n", ns)
    assert '"perm":6' in "".join(route.split()), route
