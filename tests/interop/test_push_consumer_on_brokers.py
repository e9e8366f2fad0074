"""``rocketha.PushConsumer``, ``PullConsumer.send_back`` and delayed sends against a broker
that serves send-back, retry topics, delay levels and the dead-letter queue (issue 26):

- a message the handler fails comes back after each level's delay (the broker's ``3 +
  reconsumeTimes``), under its original topic, and lands in ``%DLQ%<group>`` after
  ``max_reconsume_times``; the DLQ is read with a :class:`PullConsumer`;
- a handler that raises gets the message again; nothing is lost;
- a message sent with ``delay_level`` is not delivered before it is due; one with
  ``deliver_time_ms`` comes at its time, never before it;
- a consumer shut down mid-way and a new one of the group: every message once, none twice;
- an ``async def`` handler runs on the consumer's event loop;
- ``PullConsumer.send_back`` sends a polled message to the retry topic, or straight to the DLQ.

Every test body runs against Apache RocketMQ 5.4.0 and against rocketha's name server and
broker. The brokers run with short delay levels (``messageDelayLevel``). Run: ``pytest -m interop``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers import routed, spawn_rocketha_namesrv, start_master, wait_for
from rocketha import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    MQClientError,
    Producer,
    PullConsumer,
    PushConsumer,
)

from benches.peers.rocketmq import VERSION_5, RocketMQ, Unavailable

pytestmark = pytest.mark.interop

#: Short levels: a retry waits level ``3 + reconsumeTimes``, so 2 s, then 3 s, then 2 s.
DELAY_LEVELS = [1, 1, 2, 3] + [2] * 14
MESSAGE_DELAY_LEVEL = " ".join(f"{s}s" for s in DELAY_LEVELS)
#: RocketMQ 5's ``timerPrecisionMs``: a timer message may come this much before its time.
TIMER_PRECISION = 1.0
#: Slack for clocks read in different processes.
CLOCK_SLACK = 0.05
_NAMES = itertools.count()


@dataclass
class Cluster:
    kind: str
    namesrv: str


@pytest.fixture(scope="module", params=["rocketmq", "rocketha"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """One name server and one master with short delay levels, of either kind."""
    root = tmp_path_factory.mktemp(f"push-{request.param}")
    if request.param == "rocketmq":
        namesrv = request.getfixturevalue("namesrv")
        try:
            rmq = RocketMQ.resolve(VERSION_5)
        except Unavailable as e:
            pytest.fail(str(e))
        broker = rmq.broker(
            root / "broker", namesrv, brokerName="push-a", messageDelayLevel=MESSAGE_DELAY_LEVEL
        )
        try:
            namesrv.wait_registered(broker.listen_port)
            yield Cluster("rocketmq", namesrv.address)
        finally:
            broker.kill()
        return
    with spawn_rocketha_namesrv(root / "namesrv.log") as ns:
        master = start_master(
            root,
            "push-a",
            ns.address,
            brokerRole="ASYNC_MASTER",
            messageDelayLevel=MESSAGE_DELAY_LEVEL,
        )
        try:
            yield Cluster("rocketha", ns.address)
        finally:
            master.kill()


def names(prefix: str) -> tuple[str, str]:
    """A topic and a consumer group of this test's own."""
    n = next(_NAMES)
    return f"{prefix}{n}", f"{prefix.lower()}-group-{n}"


def create_topic(namesrv: str, topic: str, bodies: list[bytes] | None = None) -> None:
    """The topic exists (created by the first send) and is routed; ``bodies`` are sent."""
    with Producer(namesrv, f"{topic}-producer") as producer:
        for body in bodies or []:
            producer.send(Message(topic, body))
    wait_for(lambda: routed(namesrv, topic), what=f"the route of {topic}")


@dataclass
class Seen:
    """What a handler saw: (monotonic time, body, reconsume times, topic, properties, thread)."""

    calls: list[tuple[float, bytes, int, str, dict[str, str], str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, msg: MessageExt) -> None:
        with self.lock:
            self.calls.append(
                (
                    time.monotonic(),
                    msg.body,
                    msg.reconsume_times,
                    msg.topic,
                    msg.properties,
                    threading.current_thread().name,
                )
            )

    def succeed(self, msg: MessageExt) -> ConsumeResult:
        """A handler that records ``msg`` and completes it."""
        self.add(msg)
        return ConsumeResult.SUCCESS

    def of(self, body: bytes) -> list[tuple[float, bytes, int, str, dict[str, str], str]]:
        with self.lock:
            return [c for c in self.calls if c[1] == body]

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [c[1] for c in self.calls]


def push_consumer(
    cluster: Cluster, group: str, topic: str, handler: Callable[..., Any], **kw: Any
) -> PushConsumer:
    """A push consumer from the topic's first offset, committing every half second."""
    kw.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    return PushConsumer(cluster.namesrv, group, topic, handler, auto_commit_interval=0.5, **kw)


def read_dlq(cluster: Cluster, group: str, count: int) -> list[MessageExt]:
    """``count`` messages of the group's dead-letter queue, read with a PullConsumer."""
    dlq = f"%DLQ%{group}"
    wait_for(lambda: routed(cluster.namesrv, dlq), timeout=60, what=f"the route of {dlq}")
    got: list[MessageExt] = []
    with PullConsumer(
        cluster.namesrv,
        f"{group}-dlq-reader",
        [dlq],
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as reader:
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got.extend(reader.poll(timeout=1.0))
    return got


def test_failed_message_comes_back_per_level_then_lands_in_the_dlq(cluster: Cluster) -> None:
    topic, group = names("PushRetry")
    create_topic(cluster.namesrv, topic, [b"ok-1", b"fail", b"ok-2"])
    seen = Seen()

    def handler(msg: MessageExt) -> ConsumeResult:
        seen.add(msg)
        return ConsumeResult.RECONSUME_LATER if msg.body == b"fail" else ConsumeResult.SUCCESS

    with push_consumer(cluster, group, topic, handler, max_reconsume_times=2):
        wait_for(lambda: len(seen.of(b"fail")) >= 3, timeout=120, what="the third attempt")
        dlq = read_dlq(cluster, group, 1)
    attempts = seen.of(b"fail")
    assert [a[2] for a in attempts] == [0, 1, 2]
    # Every attempt shows the original topic; the retries carry where they came from.
    assert {a[3] for a in attempts} == {topic}
    assert all(a[4].get("RETRY_TOPIC") == topic for a in attempts[1:])
    # Attempt i waited level 3 + (i - 1), the broker's 3 + reconsumeTimes of the one before.
    for i in (1, 2):
        waited = attempts[i][0] - attempts[i - 1][0]
        assert waited >= DELAY_LEVELS[i + 1] - CLOCK_SLACK, (i, waited)
    assert sorted(b for b in seen.bodies() if b != b"fail") == [b"ok-1", b"ok-2"]
    assert [m.body for m in dlq] == [b"fail"]
    assert dlq[0].topic == f"%DLQ%{group}"
    assert dlq[0].properties.get("RETRY_TOPIC") == topic


def test_a_handler_that_raises_gets_the_message_again(cluster: Cluster) -> None:
    topic, group = names("PushRaise")
    bodies = [f"m{i}".encode() for i in range(10)]
    create_topic(cluster.namesrv, topic, bodies)
    seen = Seen()

    def handler(msg: MessageExt) -> ConsumeResult:
        seen.add(msg)
        if msg.body == b"m3" and msg.reconsume_times == 0:
            raise RuntimeError("boom")
        return ConsumeResult.SUCCESS

    with push_consumer(cluster, group, topic, handler, consume_threads=4):
        wait_for(lambda: len(seen.of(b"m3")) >= 2, timeout=90, what="m3 again")
        wait_for(lambda: set(seen.bodies()) == set(bodies), what="every message")
    assert [a[2] for a in seen.of(b"m3")] == [0, 1]
    assert sorted(seen.bodies()) == sorted([*bodies, b"m3"])


def test_delayed_messages_are_not_delivered_before_they_are_due(cluster: Cluster) -> None:
    topic, group = names("PushDelay")
    create_topic(cluster.namesrv, topic, [b"seed"])
    seen = Seen()

    with push_consumer(cluster, group, topic, seen.succeed), Producer(cluster.namesrv) as producer:
        sent = time.monotonic()
        producer.send(Message(topic, b"level-4"), delay_level=4)
        producer.send(Message(topic, b"now"))
        wait_for(lambda: len(seen.bodies()) >= 3, timeout=60, what="every message")
    (level,) = seen.of(b"level-4")
    assert level[0] - sent >= DELAY_LEVELS[3] - CLOCK_SLACK
    # RocketMQ keeps the level in the delivered message.
    assert level[4].get("DELAY") == "4"
    (now,) = seen.of(b"now")
    assert now[0] < level[0]


def test_a_timer_message_comes_at_its_time_or_is_refused(cluster: Cluster) -> None:
    """Both deliver at ``deliver_time_ms``, never before it (RocketMQ within its timer's
    precision, at its slot's end; rocketha at the message's own time)."""
    topic, group = names("PushTimer")
    create_topic(cluster.namesrv, topic, [b"seed"])
    seen = Seen()

    with push_consumer(cluster, group, topic, seen.succeed), Producer(cluster.namesrv) as producer:
        due_ms = int(time.time() * 1000) + 3000
        timer_sent = time.monotonic()
        producer.send(Message(topic, b"timer"), deliver_time_ms=due_ms)
        wait_for(lambda: seen.of(b"timer"), timeout=60, what="the timer message")
    (timer,) = seen.of(b"timer")
    assert timer[0] - timer_sent >= 3.0 - TIMER_PRECISION - CLOCK_SLACK
    if cluster.kind == "rocketha":
        assert timer[0] - timer_sent >= 3.0 - CLOCK_SLACK, "rocketha delivers not before its time"


def test_a_consumer_restarted_mid_way_loses_nothing_and_repeats_nothing(
    cluster: Cluster,
) -> None:
    topic, group = names("PushRestart")
    bodies = [f"r{i}".encode() for i in range(40)]
    create_topic(cluster.namesrv, topic, bodies)
    first, second = Seen(), Seen()

    def slow(msg: MessageExt) -> ConsumeResult:
        time.sleep(0.05)
        first.add(msg)
        return ConsumeResult.SUCCESS

    consumer = push_consumer(cluster, group, topic, slow, consume_threads=2).start()
    wait_for(lambda: len(first.bodies()) >= 10, what="ten messages")
    consumer.shutdown()  # waits for the handlers running, commits what they completed
    assert len(first.bodies()) < len(bodies), "stopped mid-way"

    def fast(msg: MessageExt) -> ConsumeResult:
        second.add(msg)
        return ConsumeResult.SUCCESS

    with push_consumer(cluster, group, topic, fast):
        wait_for(
            lambda: len(first.bodies()) + len(second.bodies()) >= len(bodies),
            what="the rest",
        )
        time.sleep(1.0)  # anything delivered twice would come now
    assert sorted(first.bodies() + second.bodies()) == sorted(bodies)


def test_async_handler_runs_on_the_consumers_loop(cluster: Cluster) -> None:
    topic, group = names("PushAsync")
    bodies = [f"a{i}".encode() for i in range(8)]
    create_topic(cluster.namesrv, topic, bodies)
    seen = Seen()
    loops: set[int] = set()

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.01)
        for msg in msgs:
            seen.add(msg)
        if any(m.body == b"a5" and m.reconsume_times == 0 for m in msgs):
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    with push_consumer(cluster, group, topic, handler, batch_size=4):
        wait_for(lambda: len(seen.of(b"a5")) >= 2, timeout=90, what="a5 again")
    assert {c[5] for c in seen.calls} == {"rocketha-consume-loop"}
    assert len(loops) == 1
    assert set(bodies) <= set(seen.bodies())


def test_pull_consumer_send_back(cluster: Cluster) -> None:
    topic, group = names("PullBack")
    create_topic(cluster.namesrv, topic, [b"again", b"dead"])
    retry = f"%RETRY%{group}"
    with PullConsumer(
        cluster.namesrv,
        group,
        [topic],
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        got: list[MessageExt] = []
        wait_for(lambda: got.extend(consumer.poll(0.5)) or len(got) >= 2, what="both")
        by_body = {m.body: m for m in got}
        consumer.send_back(by_body[b"again"], delay_level=1)
        consumer.send_back(by_body[b"dead"], delay_level=-1)
    wait_for(lambda: routed(cluster.namesrv, retry), what=f"the route of {retry}")
    with PullConsumer(
        cluster.namesrv,
        group,
        [retry],
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval=1.0,
    ) as retries:
        again: list[MessageExt] = []
        wait_for(lambda: again.extend(retries.poll(0.5)) or again, what="the retry")
    assert [(m.body, m.reconsume_times, m.properties.get("RETRY_TOPIC")) for m in again] == [
        (b"again", 1, topic)
    ]
    assert [m.body for m in read_dlq(cluster, group, 1)] == [b"dead"]


def test_bad_send_back_input_is_refused(cluster: Cluster) -> None:
    topic, group = names("PullBad")
    create_topic(cluster.namesrv, topic, [b"x"])
    with PullConsumer(
        cluster.namesrv,
        group,
        [topic],
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        got: list[MessageExt] = []
        wait_for(lambda: got.extend(consumer.poll(0.5)) or got, what="the message")
        with pytest.raises(MQClientError, match="max_reconsume_times"):
            consumer.send_back(got[0], max_reconsume_times=-5)
        with pytest.raises(MQClientError, match="delay_level must be an int"):
            consumer.send_back(got[0], delay_level="1")  # type: ignore[arg-type]
