"""The operators' side (issue #27's admin surface) through :class:`rocketha.Admin`, against a
name server and a SYNC_MASTER with its SLAVE: topics created, listed and deleted, consumer
groups with their lag per queue and offsets reset to a time, a broker's config read and
changed at runtime, and the refusals of what may not change."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import SEGMENT, broker_pair, wait_for
from rocketha import (
    Admin,
    Broker,
    BrokerConfig,
    ConsumeFromWhere,
    Message,
    MQBrokerError,
    MQClientError,
    NameServer,
    Producer,
    PullConsumer,
)


def routed(admin: Admin, topic: str) -> bool:
    return topic in admin.topics()


def queues_of(broker: Broker, topic: str) -> list[tuple[int, int]]:
    """(queue id, max offset) of each consume queue the broker's store has for ``topic``."""
    return [(q, head) for t, q, _, head in broker.store.queues() if t == topic]


def test_a_topic_is_created_listed_and_deleted_everywhere(tmp_path: Path) -> None:
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as (master, _slave),
        Admin(ns.listen_address) as admin,
    ):
        assert admin.masters() == {"broker-a": master.listen_address}
        assert admin.clusters()["DefaultCluster"]["broker-a"][0] == master.listen_address
        assert admin.create_topic("Orders", queues=3) == [master.listen_address]
        wait_for(lambda: routed(admin, "Orders"), what="the new topic's route")
        with Producer(ns.listen_address, "admin-p") as producer:
            for i in range(6):
                producer.send(Message("Orders", b"%d" % i))
        assert queues_of(master, "Orders") == [(0, 2), (1, 2), (2, 2)]

        admin.delete_topic("Orders")
        assert not routed(admin, "Orders")
        assert queues_of(master, "Orders") == []
        with pytest.raises(MQBrokerError, match="conflict with system topic"):
            admin.delete_topic("TBW102")
        with pytest.raises(MQClientError, match="no cluster 'Nope'"):
            admin.create_topic("Orders", cluster="Nope")


def test_a_topics_attributes_are_set_synced_and_refused_by_name(tmp_path: Path) -> None:
    """RocketMQ 5's topic attributes (``updateTopic -a``): set and kept on the master, synced
    to its slave, refused with the key and the value when bad."""
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as (master, slave),
        Admin(ns.listen_address) as admin,
    ):
        admin.create_topic("Later", queues=2, attributes={"message.type": "DELAY"})
        config = admin.topic_config(master.listen_address, "Later")
        assert config["attributes"] == {"message.type": "DELAY"}
        assert (config["readQueueNums"], config["writeQueueNums"]) == (2, 2)
        delay = {"message.type": "DELAY"}
        wait_for(
            lambda: _attributes_on(admin, slave.listen_address, "Later") == delay,
            what="the slave's sync of the attributes",
        )
        admin.create_topic("Later", queues=4)
        assert admin.topic_config(master.listen_address, "Later")["attributes"] == {
            "message.type": "DELAY"
        }, "an update that names none keeps them"

        with pytest.raises(MQBrokerError, match=r"message\.type=LATER: value is not in set") as e:
            admin.create_topic("Later", attributes={"message.type": "LATER"})
        assert e.value.code == 1 and "topic Later" in e.value.remark
        with pytest.raises(MQBrokerError, match="unsupported key: colour") as e:
            admin.create_topic("Later", attributes={"colour": "red"})
        with pytest.raises(MQBrokerError, match="MIXED message type is not supported") as e:
            admin.create_topic("Later", attributes={"message.type": "MIXED"})
        assert e.value.code == 29  # INVALID_PARAMETER
        with pytest.raises(MQBrokerError, match=r"delete a nonexistent key: reserve\.time"):
            admin.create_topic("Later", attributes={"reserve.time": None})
        admin.create_topic("Later", attributes={"message.type": None})
        assert admin.topic_config(master.listen_address, "Later")["attributes"] == {}


def _attributes_on(admin: Admin, broker_addr: str, topic: str) -> dict[str, str] | None:
    """The topic's attributes on that broker; None while it does not have the topic."""
    try:
        return admin.topic_config(broker_addr, topic)["attributes"]
    except MQBrokerError:
        return None


def test_a_message_not_of_its_topics_type_is_refused_when_checked(tmp_path: Path) -> None:
    """``enableTopicMessageTypeCheck``: the proxy's check, at the broker (off by default)."""
    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            broker_name="typed",
            store_path_root_dir=str(tmp_path / "typed"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            namesrv_addr=ns.listen_address,
            enable_topic_message_type_check=True,
        )
        with (
            Broker(config),
            Admin(ns.listen_address) as admin,
            Producer(ns.listen_address, "typed-p", retry_times_when_send_failed=0) as producer,
        ):
            admin.create_topic("Plain", queues=1)
            admin.create_topic("Later", queues=1, attributes={"message.type": "DELAY"})
            wait_for(lambda: {"Plain", "Later"} <= set(admin.topics()), what="the routes")
            with pytest.raises(
                MQBrokerError, match="expected type is NORMAL, but actual type is DELAY"
            ) as e:
                producer.send(Message("Plain", b"later"), delay_level=1)
            assert e.value.code == 13  # MESSAGE_ILLEGAL
            producer.send(Message("Plain", b"now"))
            producer.send(Message("Later", b"later"), delay_level=1)
            with pytest.raises(
                MQBrokerError, match="expected type is DELAY, but actual type is NORMAL"
            ):
                producer.send(Message("Later", b"now"))


def test_a_groups_lag_per_queue_and_its_offsets_reset_to_a_time(tmp_path: Path) -> None:
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as _pair,
        Admin(ns.listen_address) as admin,
        Producer(ns.listen_address, "admin-p") as producer,
    ):
        admin.create_group("billing", retry_max_times=3)
        assert "billing" in admin.groups()
        admin.create_topic("Bills", queues=2)
        wait_for(lambda: routed(admin, "Bills"), what="the topic's route")
        for q in (0, 1):
            producer.send_batch([Message("Bills", b"early %d" % i) for i in range(3)], queue_id=q)
        time.sleep(0.05)  # store times are whole milliseconds: the reset time falls between
        middle = int(time.time() * 1000)
        time.sleep(0.05)
        for q in (0, 1):
            producer.send_batch(
                [Message("Bills", b"late %d" % (2 * q + i)) for i in range(2)], queue_id=q
            )
        consumer = PullConsumer(
            ns.listen_address,
            "billing",
            "Bills",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.body for m in consumer.poll(1.0)) or len(got) >= 10)
        consumer.commit_sync()
        assert [
            (q.queue_id, q.broker_offset, q.lag) for q in admin.consumer_progress("billing")
        ] == [
            (0, 5, 0),
            (1, 5, 0),
        ]

        # While the consumer runs: the brokers move it at its next pull (a held one is woken),
        # and it reads the late messages again.
        reset = admin.reset_offset("billing", "Bills", middle)
        assert reset == {("broker-a", 0): 3, ("broker-a", 1): 3}
        again: list[bytes] = []
        wait_for(lambda: again.extend(m.body for m in consumer.poll(1.0)) or len(again) >= 4)
        assert sorted(again) == [b"late %d" % i for i in range(4)]
        consumer.commit_sync()
        consumer.close()
        assert sum(q.lag for q in admin.consumer_progress("billing")) == 0

        # With none running: the next consumer of the group starts from the reset offsets.
        assert admin.reset_offset("billing", "Bills", 0) == {("broker-a", 0): 0, ("broker-a", 1): 0}
        assert sum(q.lag for q in admin.consumer_progress("billing")) == 10
        with PullConsumer(ns.listen_address, "billing", "Bills") as restarted:
            every: list[bytes] = []
            wait_for(lambda: every.extend(m.body for m in restarted.poll(1.0)) or len(every) >= 10)
            assert len(every) == 10

        admin.delete_group("billing")
        assert "billing" not in admin.groups()
        assert admin.consumer_progress("billing") == []


def test_a_brokers_config_is_read_and_its_live_keys_change_at_runtime(tmp_path: Path) -> None:
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as (master, _slave),
        Admin(ns.listen_address) as admin,
        Producer(ns.listen_address, "admin-p", retry_times_when_send_failed=0) as producer,
    ):
        config = admin.broker_config(master.listen_address)
        assert (config["brokerName"], config["brokerRole"]) == ("broker-a", "SYNC_MASTER")
        assert "haAuthSecret" not in config
        producer.send(Message("Live", b"before"))

        with pytest.raises(MQBrokerError, match="listenPort may not change while the broker runs"):
            admin.update_broker_config(master.listen_address, {"listenPort": 1})
        with pytest.raises(MQBrokerError, match="did you mean 'brokerPermission'"):
            admin.update_broker_config(master.listen_address, {"brokerPermision": 4})
        assert admin.broker_config(master.listen_address)["brokerPermission"] == "6"

        # Read-only: the broker refuses sends and the name server routes none here.
        admin.update_broker_config(master.listen_address, {"brokerPermission": 4})
        assert admin.broker_config(master.listen_address)["brokerPermission"] == "4"
        # Refused by the broker, or not sent at all once the producer has the read-only route.
        with pytest.raises(
            (MQBrokerError, MQClientError),
            match=r"sending message is forbidden|has no writable queue on a master",
        ):
            producer.send(Message("Live", b"refused"))
        admin.update_broker_config(master.listen_address, {"brokerPermission": 6})
        wait_for(lambda: _sent(producer), what="sends taken again")

        admin.update_broker_config(master.listen_address, {"autoCreateTopicEnable": False})
        # Until the re-registration reaches the name server and the producer's routes, a send
        # may still see the read-only template route of a moment ago; never a created topic.
        wait_for(lambda: "not exist" in _refusal(producer, "NeverCreated"), what="not exist")


def _refusal(producer: Producer, topic: str) -> str:
    """Why a send to ``topic`` is refused; a send that is taken fails the test."""
    try:
        producer.send(Message(topic, b"x"))
    except (MQBrokerError, MQClientError) as e:
        return str(e)
    raise AssertionError(f"a send to {topic} was taken")


def _sent(producer: Producer) -> bool:
    try:
        producer.send(Message("Live", b"after"))
    except (MQBrokerError, MQClientError):
        return False
    return True


def test_rocketha_admin_as_an_operator_types_it(tmp_path: Path) -> None:
    """``rocketha admin``'s commands, each run as a process: the output an operator reads, and
    a refusal as one line naming the key, exit status 2."""
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as (master, _slave),
    ):

        def admin(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "rocketha", "admin", "-n", ns.listen_address, *argv],
                capture_output=True,
                text=True,
                timeout=120,
            )

        r = admin("topic", "create", "Cli", "--queues", "2")
        assert r.stdout == f"create topic Cli to {master.listen_address} success.\n", r.stderr
        typed = admin("topic", "update", "Cli", "--queues", "2", "-a", "+message.type=FIFO")
        assert typed.returncode == 0, typed.stderr
        with Admin(ns.listen_address) as api:
            config = api.topic_config(master.listen_address, "Cli")
            assert config["attributes"] == {"message.type": "FIFO"}
        bad = admin("topic", "update", "Cli", "-a", "message.type=FIFO")
        assert bad.returncode == 2 and "write +key=value or -key" in bad.stderr, bad.stderr
        refused = admin("topic", "update", "Cli", "--queues", "2", "-a", "+queue.type=SimpleCQ")
        assert refused.returncode == 2, refused.stdout
        assert "attempt to update an unchangeable attribute. key: queue.type" in refused.stderr
        wide = admin("topic", "create", "Wide", "--queues", "100000")
        assert wide.returncode == 2 and wide.stdout == "", wide.stdout
        assert "may be at most 1024 (maxTopicQueueNums)" in wide.stderr, wide.stderr
        for bad in ("Bad Name", "x" * 128):
            refused = admin("topic", "create", bad)
            assert refused.returncode == 2 and bad[:20] in refused.stderr, refused.stderr
        listed = admin("topic", "list").stdout.split()
        assert "Wide" not in listed and "Bad" not in listed
        assert "Cli" in admin("topic", "list").stdout.split()
        rows = admin("cluster", "list").stdout.splitlines()
        assert rows[1].split() == ["DefaultCluster", "broker-a", "0", master.listen_address]
        with Producer(ns.listen_address, "cli-p") as producer:
            sent = [producer.send(Message("Cli", b"%d" % i, keys=f"k{i}")) for i in range(5)]
        with PullConsumer(
            ns.listen_address,
            "cli-g",
            "Cli",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        ) as consumer:
            got: list[bytes] = []
            wait_for(lambda: got.extend(m.body for m in consumer.poll(1.0)) or len(got) >= 3)
        lag = admin("group", "lag", "cli-g").stdout
        assert lag.splitlines()[0].split() == [
            "#Topic",
            "#Broker",
            "Name",
            "#QID",
            "#Broker",
            "Offset",
            "#Consumer",
            "Offset",
            "#Diff",
        ]
        assert lag.endswith(f"Diff Total: {5 - len(got)}\n")

        found = admin("find", "--topic", "Cli", "--key", "k3")
        assert found.returncode == 0 and found.stdout.startswith(sent[3].msg_id), found.stdout
        assert admin("find", "--topic", "Cli", "--id", sent[1].msg_id).returncode == 0
        assert admin("find", "--topic", "Cli", "--key", "nobody").stdout == "no message found\n"

        config = admin("config", "get", master.listen_address).stdout
        assert "brokerName" in config and "broker-a" in config
        refused = admin("config", "set", master.listen_address, "listenPort=1")
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.startswith("rocketha: MQBrokerError: broker ")
        assert "listenPort may not change while the broker runs" in refused.stderr
        r = admin("config", "set", master.listen_address, "brokerPermission=6")
        assert r.stdout == f"update broker config success, {master.listen_address}\n"

        assert admin("topic", "delete", "Cli").returncode == 0
        assert "Cli" not in admin("topic", "list").stdout.split()
        gone = admin("-n", "127.0.0.1:1", "topic", "list")
        assert gone.returncode == 2 and "no name server answered" in gone.stderr
