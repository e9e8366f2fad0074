"""The timer store on a rocketha broker process (issue 48): messages sent for a moment
(``deliver_at``, ``delay``, ``TIMER_DELIVER_MS``) reach their consumers not before it, also
after the master was SIGKILLed with thousands pending (none lost, none twice); bad times are
refused by the producer or the broker, naming the problem; ``rocketha status`` shows the
backlog and the lateness.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import RochaNamesrv, routed, spawn_rocketha_namesrv, start_master, wait_for
from rocketha import ConsumeFromWhere, Message, MessageExt, MQBrokerError, Producer, PullConsumer
from rocketha.client import MQClientError


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[RochaNamesrv]:
    with spawn_rocketha_namesrv(tmp_path / "namesrv.log") as ns:
        yield ns


def consume(ns: str, group: str, topic: str, count: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    with PullConsumer(
        ns, group, [topic], consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:

        def more() -> bool:
            got.extend(consumer.poll(0.5))
            return len({m.body for m in got}) >= count

        wait_for(more, timeout=90, what=f"{count} messages of {topic}")
        # Whatever a repeat would bring comes within a poll or two more.
        for _ in range(3):
            got.extend(consumer.poll(0.3))
    return got


def test_timers_survive_a_sigkill_of_the_master_none_lost_none_twice(
    tmp_path: Path, namesrv: RochaNamesrv
) -> None:
    ns = namesrv.address
    master = start_master(tmp_path, "timers", ns, brokerRole="ASYNC_MASTER", metricsPort=0)
    topic = "Timed"
    count = 10_000
    try:
        with Producer(ns, "timer-producer") as producer:
            due = time.time() + 8
            bodies = [f"t-{i}".encode() for i in range(count)]
            for i, body in enumerate(bodies):
                # Spread over one second, 8 s ahead; a tenth by a relative delay.
                if i % 10:
                    producer.send(Message(topic, body), deliver_at=due + (i % 1000) / 1000)
                else:
                    producer.send(Message(topic, body), delay=due + 0.5 - time.time())
        assert time.time() < due, "the sends took too long for the test to mean anything"
        master.kill()
        port = str(master.started["listen_address"]).rsplit(":", 1)[1]
        master = start_master(
            tmp_path, "timers", ns, brokerRole="ASYNC_MASTER", listenPort=port, metricsPort=0
        )
        wait_for(lambda: routed(ns, topic), what="the route")
        got = consume(ns, "timer-audit", topic, count)
        status_url = f"http://127.0.0.1:{master.started['metrics_port']}/status"
        with urllib.request.urlopen(status_url, timeout=10) as r:
            timer = json.load(r)["timer"]
    finally:
        master.kill()
    bodies_got = [m.body for m in got]
    assert set(bodies_got) == set(bodies), "none lost"
    assert len(bodies_got) == count, f"{len(bodies_got) - count} delivered twice"
    for m in got:
        due_ms = m.properties.get("TIMER_DELIVER_MS")
        if due_ms is not None:
            assert m.store_timestamp >= int(due_ms), f"delivered before its time: {m}"
        assert "TIMER_DEQUEUE_MS" in m.properties and "REAL_TOPIC" not in m.properties
    assert timer["delivering"] and timer["pending"] == 0 and timer["delivered"] == count


def test_bad_times_are_refused_by_name_and_nothing_is_stored(
    tmp_path: Path, namesrv: RochaNamesrv
) -> None:
    ns = namesrv.address
    master = start_master(tmp_path, "refuse", ns, brokerRole="ASYNC_MASTER", timerMaxDelaySec=60)
    try:
        with Producer(ns, "refuse-producer") as producer:
            producer.send(Message("Refused", b"route"))
            with pytest.raises(MQBrokerError, match=r"timerMaxDelaySec=60"):
                producer.send(Message("Refused", b"x"), delay=datetime.timedelta(minutes=2))
            with pytest.raises(MQBrokerError, match=r"TIMER_DELAY_SEC=-5 is negative"):
                producer.send(Message("Refused", b"x", properties={"TIMER_DELAY_SEC": "-5"}))
            with pytest.raises(MQClientError, match=r"delay must be a timedelta or seconds"):
                producer.send(Message("Refused", b"x"), delay=-1)
            with pytest.raises(MQClientError, match=r"has no time zone"):
                producer.send(Message("Refused", b"x"), deliver_at=datetime.datetime.now())
            with pytest.raises(MQClientError, match=r"deliver_at and delay exclude each other"):
                producer.send(Message("Refused", b"x"), deliver_at=time.time(), delay=1)
            # A moment passed is delivered at once, as RocketMQ delivers it.
            producer.send(Message("Refused", b"now"), deliver_at=time.time() - 5)
        got = consume(ns, "refuse-audit", "Refused", 2)
        assert sorted(m.body for m in got) == [b"now", b"route"]
    finally:
        master.kill()


def test_a_recall_cancels_a_timer_message_and_bad_recalls_are_refused_by_name(
    tmp_path: Path, namesrv: RochaNamesrv
) -> None:
    ns = namesrv.address
    master = start_master(
        tmp_path, "recall", ns, brokerRole="ASYNC_MASTER", recallMessageEnable=True
    )
    try:
        with Producer(ns, "recall-producer") as producer:
            producer.send(Message("Other", b"route"))
            kept = producer.send(Message("Recalled", b"kept"), delay=2)
            gone = producer.send(Message("Recalled", b"gone"), delay=2)
            assert kept.recall_handle and gone.recall_handle
            assert producer.send(Message("Recalled", b"plain")).recall_handle is None
            assert producer.recall("Recalled", gone.recall_handle) == gone.msg_id
            again = producer.send(Message("Recalled", b"gone too"), delay=2)
            assert again.recall_handle is not None
            recalled = asyncio.run(producer.recall_async("Recalled", again.recall_handle))
            assert recalled == again.msg_id
            with pytest.raises(MQBrokerError, match=r"topic not match"):
                producer.recall("Other", kept.recall_handle)
            got = consume(ns, "recall-audit", "Recalled", 2)
            assert sorted(m.body for m in got) == [b"kept", b"plain"], "the recalled one never"
            with pytest.raises(MQBrokerError, match=r"timestamp invalid.*delivered already"):
                producer.recall("Recalled", kept.recall_handle)
            with pytest.raises(MQClientError, match=r"recall handle 'nope' is invalid"):
                producer.recall("Recalled", "nope")
    finally:
        master.kill()
    off = start_master(tmp_path, "norecall", ns, brokerRole="ASYNC_MASTER")
    try:
        with Producer(ns, "recall-producer-2") as producer:
            sent = producer.send(Message("NoRecall", b"x"), delay=30)
            assert sent.recall_handle is not None
            with pytest.raises(MQBrokerError, match=r"recallMessageEnable=false"):
                producer.recall("NoRecall", sent.recall_handle)
    finally:
        off.kill()
