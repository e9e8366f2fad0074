"""Consumers across a master failure (issue 15, row 2): a group of two PullConsumer members in
processes of their own keeps consuming from the slave while the SYNC_MASTER is SIGKILLed, and
returns to the master when it is back; every SEND_OK message is delivered at least once, and the
duplicates (RocketMQ's at-least-once) are counted."""

from __future__ import annotations

import logging
import random
import signal
from collections import Counter
from pathlib import Path

import pytest
from common import HA_TIMERS, FaultReport, converges
from helpers import (
    BrokerProcess,
    offsets,
    routed,
    runtime_info,
    start_master,
    start_slave,
    wait_for,
)
from rocketha import NameServer

from benches.clients import ConsumerClient, ProducerClient

TOPIC, GROUP = "Failover", "failover-group"
BACKLOG = 300
#: Short client timers, so that the outage and the return play out in seconds.
CONSUMER = (
    "--commit-interval=0.2",
    "--master-retry-interval=0.2",
    "--long-polling-timeout=0.5",
    # A few messages per pull and few cached ahead: the backlog stays on the brokers.
    "--pull-batch-size=4",
    "--pull-threshold-for-queue=4",
)


def failover_trial(d: Path, rng: random.Random, report: FaultReport) -> None:
    d.mkdir(parents=True)
    keys = {"slaveReadEnable": True, "slaveSyncInterval": 300, **HA_TIMERS}
    with NameServer("127.0.0.1:0") as ns:
        namesrv = ns.listen_address
        master = start_master(d, "broker-a", namesrv, **keys)
        ports = {
            "listenPort": master.started["listen_address"].rsplit(":", 1)[1],
            "haListenPort": master.started["ha_listen_port"],
        }
        ha = f"127.0.0.1:{ports['haListenPort']}"
        slave = start_slave(d, "s", ha, namesrvAddr=namesrv, **keys)
        producer = ProducerClient(d / "producer.log", namesrv, TOPIC, "p", "--rate=300")
        members: list[ConsumerClient] = []
        try:
            # A backlog the members start on.
            wait_for(lambda: len(producer.acked()) >= BACKLOG, 60, "a backlog")
            members = [
                ConsumerClient(d / f"consumer{i}.log", namesrv, GROUP, TOPIC, *CONSUMER)
                for i in range(2)
            ]
            wait_for(lambda: all(m.ready for m in members), 60, "the members to subscribe")

            def delivered() -> int:
                return sum(len(m.keys) for m in members)

            # The slave needs the topic and the group (its sync) to serve the members.
            wait_for(lambda: offsets(address(slave), f"{TOPIC}@{GROUP}"), 60, "a sync")
            wait_for(lambda: delivered() >= rng.randint(1, BACKLOG // 2), 60, "deliveries")
            # The members stall (SIGSTOP) while the producer goes on: the master dies with
            # acked messages they have not pulled, more than their caches and the pulls the
            # master may have answered hold, which only the slave can now give them.
            for m in members:
                m.proc.send_signal(signal.SIGSTOP)
            unread = len(producer.acked()) + rng.randint(50, 300)
            wait_for(lambda: len(producer.acked()) >= unread, 60, "acks while the members stall")
            master.kill()
            for m in members:
                m.proc.send_signal(signal.SIGCONT)
            # The slave serves what the producer had sent: the members go on from it.
            acked_before = set(producer.acked())
            wait_for(
                lambda: acked_before <= {k for m in members for k in m.keys},
                60,
                "the slave to deliver what was acked before the kill",
            )
            acked_at_kill = len(producer.acked())
            master = start_master(d, "broker-a", namesrv, **ports, **keys)
            wait_for(
                lambda: len(producer.acked()) >= acked_at_kill + 50, 60, "sends after the return"
            )
            returned = converges(
                lambda: int(runtime_info(address(master))["msgGetTotalTodayNow"]) > 0,
                60,
                "the members to pull from the returned master",
            )
        finally:
            producer.stop()
            acked = set(producer.acked())
            try:
                converges(lambda: acked <= {k for m in members for k in m.keys}, 60, "every ack")
            finally:
                for m in members:
                    m.stop()
                master.kill()
                slave.stop()
    counts = Counter(k for m in members for k in m.keys)
    skipped = len(acked - counts.keys())
    duplicates = sum(n - 1 for n in counts.values())
    report.trial(
        "g. consumers across a master SIGKILL",
        acked=len(acked),
        acked_lost=skipped,
        redelivered=duplicates,
        converged=returned and not skipped,
    )
    assert skipped == 0, f"{d.name}: {skipped} of {len(acked)} SEND_OK messages never delivered"
    assert returned, f"{d.name}: no pull reached the returned master"
    from_slave = sum(m.consumed_from().get(1, 0) for m in members)
    assert from_slave > 0, f"{d.name}: the slave served no message"


def address(broker: BrokerProcess) -> str:
    return str(broker.started["listen_address"])


@pytest.mark.trials(2, 20)
def test_consumers_follow_the_master_down_and_back_without_skipping(
    trial: int, tmp_path: Path, fault_report: FaultReport
) -> None:
    failover_trial(tmp_path / f"trial{trial}", random.Random(), fault_report)


def test_a_slave_without_slave_read_enable_makes_consumers_wait_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """RocketMQ's default, slaveReadEnable=false: the slave serves no messages, so while the
    master is down a consumer gets nothing. It says so once, naming the setting, and asks the
    slave again only when the master is due (no busy loop), instead of a silent stall."""
    from rocketha import Broker, BrokerConfig, Message, Producer, PullConsumer
    from rocketha.consumer import ConsumeFromWhere

    with NameServer("127.0.0.1:0") as ns:
        common = {"namesrv_addr": ns.listen_address, "listen_port": 0}
        master = Broker(
            BrokerConfig(
                broker_role="ASYNC_MASTER",
                store_path_root_dir=str(tmp_path / "m"),
                ha_listen_address="127.0.0.1",
                ha_listen_port=0,
                **common,  # type: ignore[arg-type]
            )
        ).start()
        slave_conf = BrokerConfig(
            broker_role="SLAVE",
            broker_id=1,
            store_path_root_dir=str(tmp_path / "s"),
            slave_sync_interval=100,
            **common,  # type: ignore[arg-type]
        )
        with Broker(slave_conf) as slave:
            with Producer(ns.listen_address, "p") as producer:
                for i in range(10):
                    producer.send(Message(TOPIC, b"m%d" % i))
            wait_for(lambda: slave.max_offset == master.max_offset, 60, "replication")
            # The slave serves the topic once its metadata sync copied it from the master.
            topics = tmp_path / "s" / "config" / "topics.json"
            wait_for(
                lambda: topics.exists() and TOPIC in topics.read_text(), 60, "the slave's sync"
            )
            master.shutdown()
            # The slave alone routes the topic once its sync has it.
            wait_for(lambda: routed(ns.listen_address, TOPIC), 60, "the slave's route")
            caplog.set_level(logging.INFO, logger="rocketha.consumer")
            with PullConsumer(
                ns.listen_address,
                GROUP,
                [TOPIC],
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                master_retry_interval=0.5,
            ) as consumer:
                wait_for(consumer.waiting_for_master, 60, "the consumer to say it waits")
                assert consumer.poll(1.0) == []
                assert consumer.waiting_for_master() == {"broker-a"}
            said = [r.getMessage() for r in caplog.records if "slaveReadEnable" in r.getMessage()]
            assert len(said) == 1, said
            assert "waits for its master" in said[0] and slave.listen_address in said[0]
