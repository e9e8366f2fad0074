"""The project's PullConsumer against ``rocketha namesrv``, a SYNC_MASTER and a SLAVE (which
found its master through the name server) as processes: exactly-once across restarts with
committed offsets, a group splitting queues, the redirect to the slave and back, the master's
SIGKILL and return, asyncio, bad input."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import helpers
import pytest
from helpers import BrokerProcess, offsets, runtime_info, wait_for
from rocketha import (
    ConsumeFromWhere,
    Message,
    MQBrokerError,
    MQClientError,
    Producer,
    PullConsumer,
    _children,
)
from rocketha._core import MQClientAPI
from rocketha.client import MessageQueue
from rocketha.rebalance import allocate_message_queue_averagely

NamesrvProcess = tuple[subprocess.Popen[str], str]
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@dataclass
class Cluster:
    tmp: Path
    namesrv: str
    master: BrokerProcess
    slave: BrokerProcess
    master_keys: dict[str, object]

    @property
    def master_address(self) -> str:
        return str(self.master.started["listen_address"])

    @property
    def slave_address(self) -> str:
        return str(self.slave.started["listen_address"])

    def restart_master(self) -> None:
        """The master again, on its old ports: the route names its client port there, and the
        slave's HA client reconnects to the HA port it knows."""
        port = self.master_address.rsplit(":", 1)[1]
        ha_port = self.master.started["ha_listen_port"]
        self.master = start_master(
            self.tmp, self.namesrv, listenPort=port, haListenPort=ha_port, **self.master_keys
        )
        wait_for(lambda: slave_connected(self.master_address), what="the slave to reconnect")


def start_master(tmp: Path, namesrv: str, **keys: object) -> BrokerProcess:
    """broker-a's SYNC_MASTER, which lets a consumer behind its head read from the slave."""
    return helpers.start_master(tmp, "broker-a", namesrv, slaveReadEnable=True, **keys)


def start_slave(tmp: Path, namesrv: str) -> BrokerProcess:
    return helpers.start_slave(
        tmp, "slave", None, namesrvAddr=namesrv, slaveReadEnable=True, slaveSyncInterval=500
    )


def slave_connected(address: str) -> bool:
    return int(runtime_info(address).get("haConnectionNum", "0")) >= 1


@pytest.fixture
def cluster(tmp_path: Path, namesrv_process: NamesrvProcess) -> Iterator[Cluster]:
    _, namesrv = namesrv_process
    master_keys: dict[str, object] = {}
    master = start_master(tmp_path, namesrv)
    slave = start_slave(tmp_path, namesrv)
    c = Cluster(tmp_path, namesrv, master, slave, master_keys)
    try:
        wait_for(lambda: slave_connected(c.master_address), what="the slave to connect")
        yield c
    finally:
        c.slave.kill()
        if c.master.proc.poll() is None:
            c.master.kill()


def send(namesrv: str, topic: str, bodies: list[bytes]) -> None:
    """Sends ``bodies``, then waits until the name server routes ``topic``: the first send
    creates it on the broker, which registers it right after (a consumer started before
    that waits for its next route poll, 20 s)."""
    with Producer(namesrv, "test-producer") as producer:
        for body in bodies:
            producer.send(Message(topic, body))
    wait_for(lambda: helpers.routed(namesrv, topic), what=f"{topic}'s route")


def drain(consumer: PullConsumer, want: int) -> list[bytes]:
    got: list[bytes] = []
    wait_for(
        lambda: got.extend(m.body for m in consumer.poll(0.2)) or len(got) >= want,
        what=f"{want} messages",
    )
    return got


def test_every_message_once_across_a_restart(cluster: Cluster) -> None:
    bodies = [f"m{i}".encode() for i in range(300)]
    send(cluster.namesrv, "T1", bodies)
    with PullConsumer(cluster.namesrv, "g1", "T1", consume_from_where=FIRST) as c:
        assert len(c.assignment()) == 4
        first = drain(c, 100)
        c.commit_sync()
    # Messages polled after the commit are committed at close.
    with PullConsumer(cluster.namesrv, "g1", "T1", consume_from_where=FIRST) as c:
        rest = drain(c, 300 - len(first))
        assert c.poll(0.5) == []
    assert sorted(first + rest) == sorted(bodies)


def test_two_consumers_split_the_queues(cluster: Cluster) -> None:
    send(cluster.namesrv, "T2", [b"x"])  # creates the topic
    # The default rebalance_interval (20 s): the members' change itself triggers the split.
    kw = {"consume_from_where": FIRST}
    with (
        PullConsumer(cluster.namesrv, "g2", "T2", **kw) as a,
        PullConsumer(  # type: ignore[arg-type]
            cluster.namesrv, "g2", "T2", **kw
        ) as b,
    ):
        wait_for(
            lambda: (
                len(a.assignment()) == len(b.assignment()) == 2
                and not set(a.assignment()) & set(b.assignment())
            ),
            what="the queues split two and two",
        )
        bodies = [f"s{i}".encode() for i in range(200)]
        send(cluster.namesrv, "T2", bodies)
        got: list[bytes] = []
        wait_for(
            lambda: got.extend(m.body for c in (a, b) for m in c.poll(0.05)) or len(got) >= 201,
            what="every message",
        )
        assert a.consumed_from() and b.consumed_from(), "both members consumed"
    assert sorted(got) == sorted([b"x", *bodies])


def test_a_lagging_consumer_moves_to_the_slave_and_back(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    _, namesrv = namesrv_process
    # A master that counts nothing as in memory: a consumer behind the head is sent to the
    # slave.
    master = start_master(tmp_path, namesrv, accessMessageInMemoryMaxRatio=0)
    slave = start_slave(tmp_path, namesrv)
    try:
        wait_for(lambda: slave_connected(str(master.started["listen_address"])), what="slave")
        bodies = [bytes([i % 256]) * 1024 for i in range(2000)]
        send(namesrv, "T3", bodies)
        with PullConsumer(namesrv, "g3", "T3", consume_from_where=FIRST) as c:
            got = drain(c, len(bodies))
            assert c.consumed_from().get(1, 0) > 0, c.consumed_from()
            send(namesrv, "T3", [b"tail"] * 4)
            before = c.consumed_from().get(0, 0)
            got += drain(c, 4)
            assert c.consumed_from().get(0, 0) > before, "back to the master once caught up"
        assert len(got) == len(bodies) + 4
    finally:
        slave.kill()
        master.kill()


def test_the_masters_death_and_return(cluster: Cluster) -> None:
    bodies = [f"k{i}".encode() for i in range(200)]
    send(cluster.namesrv, "T4", bodies)
    # A small cache, so that most of the rest is still to be pulled when the master dies.
    with PullConsumer(
        cluster.namesrv,
        "g4",
        "T4",
        consume_from_where=FIRST,
        master_retry_interval=0.2,
        pull_batch_size=4,
        pull_threshold_for_queue=4,
    ) as c:
        got = drain(c, 100)
        c.commit_sync()
        # The slave has the topic and the committed offsets after its sync.
        committed = {f"{q.queue_id}": c.committed(q) for q in c.assignment()}
        wait_for(
            lambda: offsets(cluster.slave_address, "T4@g4") == committed,
            what="the slave to sync the offsets",
        )
        cluster.master.kill()
        got += drain(c, 200 - len(got))
        assert c.consumed_from().get(1, 0) > 0, "the slave served after the master died"
        assert c.poll(0.3) == []
    # A new member finds the offsets committed to the slave; its pulls return to the master
    # once it is back (a short long poll, so every queue's held pull on the slave ends soon).
    # The name server dropped the dead master's route, so the member learns of its return at
    # its next route refresh: a short one here.
    after: list[bytes] = []
    with PullConsumer(
        cluster.namesrv,
        "g4",
        "T4",
        consume_from_where=FIRST,
        master_retry_interval=0.2,
        long_polling_timeout=0.5,
        rebalance_interval=0.5,
    ) as c:
        assert c.poll(0.5) == []
        cluster.restart_master()

        def one_more_from_the_master() -> bool:
            before = c.consumed_from().get(0, 0)
            after.append(f"after{len(after)}".encode())
            send(cluster.namesrv, "T4", after[-1:])
            got.extend(drain(c, 1))
            return c.consumed_from().get(0, 0) > before

        wait_for(one_more_from_the_master, what="a message served by the returned master")
    assert sorted(got) == sorted([*bodies, *after])


def test_asyncio_iteration(cluster: Cluster) -> None:
    bodies = [f"a{i}".encode() for i in range(50)]
    send(cluster.namesrv, "T5", bodies)

    async def main() -> list[bytes]:
        got: list[bytes] = []
        with PullConsumer(cluster.namesrv, "g5", "T5", consume_from_where=FIRST) as c:
            async for msg in c:
                got.append(msg.body)
                if len(got) == len(bodies):
                    break
        return got

    assert sorted(asyncio.run(main())) == sorted(bodies)


def test_asyncio_over_the_masters_death(cluster: Cluster) -> None:
    bodies = [f"d{i}".encode() for i in range(120)]
    send(cluster.namesrv, "T10", bodies)

    async def main() -> tuple[list[bytes], dict[int, int]]:
        got: list[bytes] = []
        with PullConsumer(
            cluster.namesrv,
            "g10",
            "T10",
            consume_from_where=FIRST,
            master_retry_interval=0.2,
            pull_batch_size=2,
            pull_threshold_for_queue=2,
        ) as c:
            async for msg in c:
                got.append(msg.body)
                if len(got) == 40:
                    c.commit_sync()
                    committed = {f"{q.queue_id}": c.committed(q) for q in c.assignment()}
                    await asyncio.to_thread(
                        wait_for,
                        lambda want=committed: offsets(cluster.slave_address, "T10@g10") == want,
                        60.0,
                        "the slave to sync the offsets",
                    )
                    cluster.master.kill()
                if len(got) == len(bodies):
                    break
            return got, c.consumed_from()

    got, sources = asyncio.run(main())
    assert sorted(got) == sorted(bodies)
    assert sources.get(1, 0) > 0, "the slave served after the master died"


def test_seek_and_tag_filter(cluster: Cluster) -> None:
    with Producer(cluster.namesrv, "p") as p:
        for i in range(20):
            p.send(Message("T6", f"t{i}".encode(), tags="a" if i % 2 else "b"))
    with PullConsumer(cluster.namesrv, "g6", "T6", subscription="a", consume_from_where=FIRST) as c:
        got = drain(c, 10)
        assert sorted(got) == sorted(f"t{i}".encode() for i in range(1, 20, 2))
        c.commit_sync()
        mq = next(q for q in c.assignment() if c.committed(q))
        c.seek(mq, 0)
        again = drain(c, 1)
        assert set(again) <= set(got)


def test_a_topic_created_later_is_waited_for(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """As Java's and Kafka's consumers: no route yet is a wait (said once), not an error."""
    with (
        caplog.at_level(logging.INFO, logger="rocketha.consumer"),
        PullConsumer(cluster.namesrv, "g-later", "Later", rebalance_interval=0.2) as c,
    ):
        assert c.poll(0.5) == []
        send(cluster.namesrv, "Later", [b"a", b"b"])
        assert sorted(drain(c, 2)) == [b"a", b"b"]
    waits = [r for r in caplog.records if "know no topic 'Later' yet" in r.getMessage()]
    assert len(waits) == 1 and waits[0].levelno == logging.WARNING


def test_bad_input_names_the_field(cluster: Cluster) -> None:
    send(cluster.namesrv, "T7", [b"x"])
    with pytest.raises(MQClientError, match=r"subscription: .*names no tag"):
        PullConsumer(cluster.namesrv, "g7", "T7", subscription="||")
    with pytest.raises(MQClientError, match="group"):
        PullConsumer(cluster.namesrv, "", "T7")


def test_an_unknown_group_is_refused_when_groups_are_not_auto_created(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    _, namesrv = namesrv_process
    master = start_master(tmp_path, namesrv, autoCreateSubscriptionGroup=False)
    try:
        send(namesrv, "T8", [b"x"])
        # The broker registers the topic it just created a moment later.
        api = MQClientAPI()
        wait_for(lambda: api.get_topic_route_info(namesrv, "T8", 5.0), what="T8's route")
        consumer = PullConsumer(namesrv, "g-unknown", "T8", consume_from_where=FIRST)
        with consumer, pytest.raises(MQBrokerError, match="g-unknown") as e:
            wait_for(lambda: consumer.poll(0.2) and False, what="the refusal")
        assert e.value.code == 26
    finally:
        master.kill()


def test_consume_cli(cluster: Cluster) -> None:
    send(cluster.namesrv, "T9", [f"c{i}".encode() for i in range(30)])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocketha",
            "consume",
            "--namesrv",
            cluster.namesrv,
            "--group",
            "g9",
            "--topic",
            "T9",
            "--count",
            "30",
            "--json",
            "--from-beginning",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 30
    assert '"queue_offset"' in lines[0]


def test_allocate_message_queue_averagely() -> None:
    queues = [MessageQueue("T", b, i) for b in ("b", "a") for i in range(4)]
    cids = ["c3", "c1", "c2"]
    split = {c: allocate_message_queue_averagely(queues, cids, c) for c in cids}
    # Sorted queues in contiguous runs, the first consumers one more: 3, 3, 2.
    assert [(q.broker_name, q.queue_id) for q in split["c1"]] == [("a", 0), ("a", 1), ("a", 2)]
    assert [(q.broker_name, q.queue_id) for q in split["c2"]] == [("a", 3), ("b", 0), ("b", 1)]
    assert [(q.broker_name, q.queue_id) for q in split["c3"]] == [("b", 2), ("b", 3)]
    many = [f"c{i}" for i in range(10)]
    assert sum(len(allocate_message_queue_averagely(queues, many, c)) for c in many) == 8
    assert allocate_message_queue_averagely(queues, many, "c9") == []
    assert allocate_message_queue_averagely(queues, cids, "unknown") == []


def test_consume_cli_commits_on_sigterm(cluster: Cluster) -> None:
    bodies = [f"q{i}" for i in range(40)]
    send(cluster.namesrv, "T11", [b.encode() for b in bodies])
    args = [sys.executable, "-m", "rocketha", "consume", "--namesrv", cluster.namesrv]
    args += ["--group", "g11", "--topic", "T11", "--from-beginning"]
    proc = _children.spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = [proc.stdout.readline().strip() for _ in range(40)]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "consumed 40 messages of T11" in err
    assert sorted(first) == sorted(bodies)
    # Committed on the way out: the group's next member gets nothing again.
    with PullConsumer(cluster.namesrv, "g11", "T11", consume_from_where=FIRST) as c:
        assert c.poll(1.0) == []


def test_leaving_a_loop_early_commits_only_what_it_saw(cluster: Cluster) -> None:
    bodies = [f"l{i}".encode() for i in range(20)]
    send(cluster.namesrv, "T12", bodies)
    seen: list[bytes] = []
    with PullConsumer(cluster.namesrv, "g12", "T12", consume_from_where=FIRST) as c:
        for msg in c:
            seen.append(msg.body)
            if len(seen) == 5:
                break
    with PullConsumer(cluster.namesrv, "g12", "T12", consume_from_where=FIRST) as c:
        rest = drain(c, 15)
        assert c.poll(0.5) == []
    assert sorted(seen + rest) == sorted(bodies)


def test_an_offset_past_the_end_moves_to_where_the_broker_says(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    bodies = [f"o{i}".encode() for i in range(20)]
    send(cluster.namesrv, "T9", bodies)
    caplog.set_level(logging.WARNING, logger="rocketha.consumer")
    with PullConsumer(cluster.namesrv, "g9", "T9", consume_from_where=FIRST) as c:
        assert sorted(drain(c, len(bodies))) == sorted(bodies)
        c.commit_sync()
        mq = next(q for q in c.assignment() if c.committed(q))
        end = c.committed(mq)
        assert end is not None
        # PULL_OFFSET_MOVED: past the end of a queue never cleaned, the broker sends the
        # consumer back to its first message (RocketMQ 4.9's `nextOffsetCorrection` to the
        # min offset when it is 0), so the queue is read again.
        c.seek(mq, end + 1000)
        again = drain(c, end)
        assert f"{mq}: OffsetOverflowBadly: topic T9 queueId {mq.queue_id}" in caplog.text
        assert f"moving from {end + 1000} to 0" in caplog.text, caplog.text
        assert len(again) == end and set(again) <= set(bodies), again
        c.commit_sync()
        assert c.committed(mq) == end
        assert c.poll(0.3) == []


def test_a_bad_topic_name_is_refused_before_any_connection() -> None:
    """As the Java client's ``Validators.checkTopic``: the name is checked first (the name
    server address here listens nowhere, so reaching it would fail differently)."""
    for bad, why in [("bad topic!", "characters other than"), ("t" * 128, "longer than")]:
        with pytest.raises(MQClientError, match=why):
            PullConsumer("127.0.0.1:1", "g", [bad])
