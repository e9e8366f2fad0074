"""``PushConsumer``, send-back and delayed sends, without a broker that serves send-back:

- input checks (delay level, delivery time, batches, handler options) with clear errors;
- the send-back pieces: the retry message a failed send-back falls back to, the original
  topic restored, where a send-back goes;
- ``processConsumeResult``: a message whose send-back failed stays with the consumer (nothing
  committed past it) and is consumed again later;
- against a rocketha name server and broker: ``start()`` is idempotent, offsets are committed
  only past completed messages (the lowest in flight), an ``async def`` handler runs on the
  consumer's loop;
- orderly consumption (issue 27): one call at a time per queue in offset order, a failure
  retried in place then dead-lettered, members sharing queues by lock and giving them back at
  shutdown; a sharding key's messages in one queue, picked by Java's ``String.hashCode``.

The broker paths (retries per delay level, the DLQ) are in ``tests/interop/
test_push_consumer.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import offsets, wait_for
from rocketha import (
    Broker,
    BrokerConfig,
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    MessageStore,
    MQClientError,
    NameServer,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rocketha import push_consumer as push_module
from rocketha.client import MessageQueue, java_string_hash, with_delivery
from rocketha.process_queue import ProcessQueue
from rocketha.rebalance import SubscribeInfo
from rocketha.send_back import (
    check_max_reconsume_times,
    restore_retry_topic,
    retry_message,
    send_back_target,
)

SEGMENT = 1 << 20


def stored(tmp_path: Path, *msgs: Message) -> list[MessageExt]:
    """``msgs`` as a store reads them back, stored by 10.0.0.1:10911."""
    with MessageStore(
        tmp_path / "store", mapped_file_size_commit_log=SEGMENT, store_host="10.0.0.1:10911"
    ) as store:
        for msg in msgs:
            store.put(msg)
        topics = dict.fromkeys(m.topic for m in msgs)
        return [m for t in topics for m in store.get_messages(t, 0, 0, 100)]


# -- delayed sends --------------------------------------------------------------------------


def test_with_delivery_stamps_one_property() -> None:
    msg = Message("T", b"x", tags="a", properties={"k": "v"}, flag=3)
    assert with_delivery(msg) is msg
    assert with_delivery(msg, 0, None) is msg
    delayed = with_delivery(msg, delay_level=2)
    assert delayed.properties == {"k": "v", "TAGS": "a", "DELAY": "2"}
    assert (delayed.topic, delayed.body, delayed.flag) == ("T", b"x", 3)
    # A time in the past is sent as it is: the broker delivers it at once, as RocketMQ's does.
    timed = with_delivery(msg, deliver_time_ms=1)
    assert timed.properties["TIMER_DELIVER_MS"] == "1" and "DELAY" not in timed.properties


@pytest.mark.parametrize(
    ("level", "time_ms", "error"),
    [
        (-1, None, "delay_level must be >= 0"),
        (2, 1_700_000_000_000, "exclude each other"),
        (0, -5, "deliver_time_ms is a time in epoch milliseconds"),
        (True, None, "delay_level must be an int"),
        (1.5, None, "delay_level must be an int"),
        (0, "soon", "deliver_time_ms must be an int"),
    ],
)
def test_bad_delivery_is_refused(level: object, time_ms: object, error: str) -> None:
    with Producer("127.0.0.1:1") as producer:
        with pytest.raises(MQClientError, match=error):
            producer.send(Message("T", b"x"), delay_level=level, deliver_time_ms=time_ms)  # type: ignore[arg-type]
        with pytest.raises(MQClientError, match=error):
            asyncio.run(
                producer.send_async(Message("T", b"x"), delay_level=level, deliver_time_ms=time_ms)  # type: ignore[arg-type]
            )


def test_a_batch_refuses_delayed_messages() -> None:
    batch_error = pytest.raises(MQClientError, match="a batch cannot hold delayed messages")
    with Producer("127.0.0.1:1") as producer, batch_error:
        producer.send_batch([Message("T", b"a"), Message("T", b"b", properties={"DELAY": 3})])


# -- send-back pieces -----------------------------------------------------------------------


def test_retry_message_is_stamped_as_the_brokers_send_back(tmp_path: Path) -> None:
    (msg,) = stored(
        tmp_path,
        Message("T", b"body", tags="a", properties={"TRAN_MSG": "true", "UNIQ_KEY": "U1"}, flag=7),
    )
    retry = retry_message(msg, "g", 16)
    assert (retry.topic, retry.body, retry.flag) == ("%RETRY%g", b"body", 7)
    props = retry.properties
    assert props["RETRY_TOPIC"] == "T" and props["ORIGIN_MESSAGE_ID"] == "U1"
    assert props["RECONSUME_TIME"] == "1" and props["MAX_RECONSUME_TIMES"] == "16"
    assert props["DELAY"] == "3" and props["TAGS"] == "a" and "TRAN_MSG" not in props


def test_a_retried_message_shows_its_original_topic(tmp_path: Path) -> None:
    retried, other = stored(
        tmp_path,
        Message("%RETRY%g", b"r", properties={"RETRY_TOPIC": "Orders"}),
        Message("%RETRY%other", b"o", properties={"RETRY_TOPIC": "Orders"}),
    )
    shown = restore_retry_topic(retried, "g")
    assert shown.topic == "Orders"
    assert (shown.commitlog_offset, shown.queue_offset, shown.body) == (
        retried.commitlog_offset,
        retried.queue_offset,
        b"r",
    )
    assert restore_retry_topic(other, "g") is other  # another group's retry topic


def test_send_back_goes_to_the_master_of_the_messages_group(tmp_path: Path) -> None:
    (msg,) = stored(tmp_path, Message("T", b"x"))
    routes = [
        SubscribeInfo([], {"a": {0: "10.0.0.9:10911", 1: "10.0.0.1:10911"}}),
        SubscribeInfo([], {"b": {1: "10.0.0.2:10911"}}),
    ]
    # Found by the store host (a slave's here), sent to that group's master.
    assert send_back_target(routes, msg) == ("10.0.0.9:10911", "a")
    assert send_back_target(routes, msg, "a") == ("10.0.0.9:10911", "a")
    # A group with no master in the route, or no route: the store host.
    assert send_back_target(routes, msg, "b") == ("10.0.0.1:10911", "b")
    assert send_back_target([], msg) == ("10.0.0.1:10911", None)


def test_max_reconsume_times() -> None:
    assert check_max_reconsume_times(None) == 16
    assert check_max_reconsume_times(-1) == 16
    assert check_max_reconsume_times(0) == 0
    for bad in (-2, "3", True):
        with pytest.raises(MQClientError, match="max_reconsume_times must be an int >= 0"):
            check_max_reconsume_times(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"handler": "not callable"}, "handler must be callable"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"consume_threads": 0}, "consume_threads must be >= 1"),
        ({"max_reconsume_times": -3}, "max_reconsume_times must be an int >= 0"),
    ],
)
def test_bad_push_consumer_options(options: dict[str, object], error: str) -> None:
    handler = options.pop("handler", lambda m: ConsumeResult.SUCCESS)
    with pytest.raises(MQClientError, match=error):
        PushConsumer("127.0.0.1:1", "g", "T", handler, **options)  # type: ignore[arg-type]


class FakeEngine:
    """Records completions; a send-back of a body in ``refuse`` fails."""

    def __init__(self, refuse: set[bytes]) -> None:
        self.refuse = refuse
        self.sent_back: list[bytes] = []
        self.completed: list[bytes] = []

    def send_back_to(self, pq: ProcessQueue, msg: MessageExt, bound: int) -> None:
        if msg.body in self.refuse:
            raise MQClientError("no broker took it")
        self.sent_back.append(msg.body)

    def complete(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        self.completed.extend(m.body for m in msgs)


def test_a_message_whose_send_back_failed_stays_and_comes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = stored(tmp_path, *(Message("T", f"m{i}".encode()) for i in range(3)))
    consumer = PushConsumer("127.0.0.1:1", "g", "T", lambda m: ConsumeResult.SUCCESS)
    engine = FakeEngine({b"m1"})
    consumer._engine = engine  # type: ignore[assignment]
    pq = ProcessQueue(MessageQueue("T", "b", 0), 3, 3, 0)
    consumer._process_result(pq, msgs, ConsumeResult.SUCCESS)
    assert (engine.completed, engine.sent_back) == ([b"m0", b"m1", b"m2"], [])
    engine.completed.clear()
    monkeypatch.setattr(push_module, "CONSUME_LATER_DELAY", 0.0)
    # Not a ConsumeResult (None here) counts as RECONSUME_LATER, as RocketMQ's null status.
    consumer._process_result(pq, msgs, None)
    assert engine.sent_back == [b"m0", b"m2"]
    # m1 is neither completed (its offset holds the commit back) nor lost: it comes again.
    assert engine.completed == [b"m0", b"m2"]
    batch, _ = consumer._due_later()
    assert batch is not None and batch[0] is pq and [m.body for m in batch[1]] == [b"m1"]
    # A queue taken away by a rebalance: its new owner consumes from the last commit.
    pq.dropped = True
    consumer._process_result(pq, msgs, ConsumeResult.RECONSUME_LATER)
    assert engine.sent_back == [b"m0", b"m2"]


# -- against a rocketha name server and broker ----------------------------------------------


@dataclass
class Cluster:
    namesrv: str
    broker: str


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            broker_name="push",
            broker_role="ASYNC_MASTER",
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            namesrv_addr=ns.listen_address,
        )
        with Broker(config) as broker:
            yield Cluster(ns.listen_address, broker.listen_address)


def test_start_is_idempotent_and_a_shut_down_consumer_stays_down(cluster: Cluster) -> None:
    with Producer(cluster.namesrv) as producer:
        producer.send(Message("PushLife", b"x"))
    got = threading.Event()

    def handler(msg: MessageExt) -> ConsumeResult:
        got.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        cluster.namesrv,
        "push-life",
        "PushLife",
        handler,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )

    def services() -> set[threading.Thread]:
        # The handler pool starts its workers as messages come; the rest start with start().
        return {t for t in threading.enumerate() if not t.name.startswith("rocketha-consume_")}

    assert consumer.start() is consumer
    threads = services()
    with consumer as entered:
        assert entered is consumer and consumer.start() is consumer
        assert services() <= threads
        assert got.wait(30)
    consumer.shutdown()  # again: nothing
    with pytest.raises(MQClientError, match="was shut down"):
        consumer.start()


def test_offsets_are_committed_only_past_completed_messages(cluster: Cluster) -> None:
    topic, group = "PushOffsets", "push-offsets"
    with Producer(cluster.namesrv) as producer:
        results = [producer.send(Message(topic, f"m{i}".encode())) for i in range(20)]
    held = next(r for r in results if r.queue_offset == 1)
    queue = str(held.queue_id)
    release = threading.Event()

    def handler(msg: MessageExt) -> ConsumeResult:
        if msg.queue_id == held.queue_id and msg.queue_offset == 1:
            release.wait(60)
        return ConsumeResult.SUCCESS

    def committed() -> dict[str, int]:
        return offsets(cluster.broker, f"{topic}@{group}") or {}

    ends = {
        str(q): sum(1 for r in results if r.queue_id == q) for q in {r.queue_id for r in results}
    }
    with PushConsumer(
        cluster.namesrv,
        group,
        topic,
        handler,
        consume_threads=4,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit_interval=0.2,
    ):
        others = {q: end for q, end in ends.items() if q != queue}
        wait_for(lambda: {q: committed().get(q) for q in others} == others, what="the other queues")
        # The held message's queue commits no further than it, however long it takes.
        wait_for(lambda: committed().get(queue) == 1, what="the held queue's commit")
        assert committed().get(queue) == 1
        release.set()
        wait_for(lambda: committed().get(queue) == ends[queue], what="the rest")


def test_async_handler_on_a_rocketha_broker(cluster: Cluster) -> None:
    bodies = {f"a{i}".encode() for i in range(12)}
    with Producer(cluster.namesrv) as producer:
        for body in sorted(bodies):
            producer.send(Message("PushAsync", body))
    seen: list[tuple[bytes, str]] = []

    async def handler(msg: MessageExt) -> ConsumeResult:
        await asyncio.sleep(0)
        seen.append((msg.body, threading.current_thread().name))
        return ConsumeResult.SUCCESS

    with PushConsumer(
        cluster.namesrv,
        "push-async",
        "PushAsync",
        handler,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ):
        wait_for(lambda: {b for b, _ in seen} == bodies, what="every message")
    assert {t for _, t in seen} == {"rocketha-consume-loop"}


# -- orderly --------------------------------------------------------------------------------


class Calls:
    """What an orderly handler saw: each call's (queue, offset, body), and whether two calls
    of one queue ever overlapped. Bodies in ``fail`` fail their first ``times`` calls."""

    def __init__(self, fail: frozenset[bytes] = frozenset(), times: int = 0) -> None:
        self.fail, self.times = fail, times
        self.lock = threading.Lock()
        self.calls: list[tuple[int, int, bytes]] = []
        self.active: set[int] = set()
        self.overlapped = False

    def __call__(self, msg: MessageExt) -> ConsumeResult:
        with self.lock:
            self.overlapped |= msg.queue_id in self.active
            self.active.add(msg.queue_id)
            self.calls.append((msg.queue_id, msg.queue_offset, msg.body))
            tries = sum(1 for c in self.calls if c[2] == msg.body)
        time.sleep(0.002)  # room for a second call of the queue to overlap, were one made
        with self.lock:
            self.active.discard(msg.queue_id)
        if msg.body in self.fail and tries <= self.times:
            return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeResult.SUCCESS

    def per_queue(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for queue_id, offset, _ in self.calls:
            out.setdefault(queue_id, []).append(offset)
        return out


def orderly(
    cluster: Cluster, group: str, topic: str, handler: Calls, **options: object
) -> PushConsumer:
    return PushConsumer(
        cluster.namesrv,
        group,
        topic,
        handler,
        orderly=True,
        consume_threads=4,
        suspend_current_queue_time=0.05,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit_interval=0.2,
        **options,  # type: ignore[arg-type]
    )


def test_an_orderly_consumer_takes_each_queue_in_order_and_retries_in_place(
    cluster: Cluster,
) -> None:
    """One call at a time per queue, in offset order; a failed message is consumed again
    after the queue's suspension, before anything behind it, and then committed past."""
    topic, group = "Orderly", "orderly"
    with Producer(cluster.namesrv) as producer:
        sent = [producer.send(Message(topic, f"o{i}".encode())) for i in range(40)]
    failing = next(r for r in sent if r.queue_offset == 3)
    body = f"o{sent.index(failing)}".encode()
    calls = Calls(frozenset({body}), times=2)
    with orderly(cluster, group, topic, calls):
        wait_for(lambda: len(calls.calls) >= len(sent) + 2, what="every message")
        ends = {str(q): sum(1 for r in sent if r.queue_id == q) for q in calls.per_queue()}
        wait_for(lambda: offsets(cluster.broker, f"{topic}@{group}") == ends, what="commits")
    assert not calls.overlapped, "two calls of one queue at once"
    for queue_id, got in calls.per_queue().items():
        expected = list(range(ends[str(queue_id)]))
        if queue_id == failing.queue_id:
            expected[3:3] = [3, 3]  # two failures, consumed again in place
        assert got == expected, (queue_id, got)


def test_an_orderly_message_that_keeps_failing_goes_to_the_dlq(cluster: Cluster) -> None:
    topic, group = "OrderlyDead", "orderly-dead"
    with Producer(cluster.namesrv) as producer:
        producer.send_batch([Message(topic, b"bad"), Message(topic, b"next")], queue_id=0)
    calls = Calls(frozenset({b"bad"}), times=99)
    with orderly(cluster, group, topic, calls, max_reconsume_times=2):
        wait_for(lambda: b"next" in {c[2] for c in calls.calls}, what="the message behind it")
    assert [c[2] for c in calls.calls].count(b"bad") == 2
    with PullConsumer(
        cluster.namesrv,
        f"{group}-dlq",
        f"%DLQ%{group}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as reader:
        dead: list[MessageExt] = []
        wait_for(lambda: dead.extend(reader.poll(0.5)) or bool(dead), what="the dead letter")
    assert [m.body for m in dead] == [b"bad"]


def test_orderly_members_share_queues_by_lock(cluster: Cluster) -> None:
    """Two members hold disjoint queues; when one shuts down it unlocks its queues, and the
    other takes them at once (not after the broker's 60 s lock lifetime), in order."""
    topic, group = "OrderlyShare", "orderly-share"
    with Producer(cluster.namesrv) as producer:
        first = [producer.send(Message(topic, f"a{i}".encode())) for i in range(16)]
    a, b = Calls(), Calls()
    with orderly(cluster, group, topic, a) as stays:
        leaves = orderly(cluster, group, topic, b).start()
        wait_for(lambda: len(a.calls) + len(b.calls) >= len(first), what="the first messages")
        engine = stays._engine
        assert engine is not None
        wait_for(
            lambda: sum(mq.topic == topic for mq in engine.assignment()) == 2, what="the split"
        )
        leaves.shutdown()
        with Producer(cluster.namesrv) as producer:
            more = [producer.send(Message(topic, f"b{i}".encode())) for i in range(16)]
        wait_for(
            lambda: {c[2] for c in a.calls} >= {f"b{i}".encode() for i in range(16)},
            what="the leaver's queues taken over",
        )
    assert {q for q, _, _ in a.calls} & {q for q, _, _ in b.calls} <= {r.queue_id for r in more}
    for calls in (a, b):
        assert all(got == sorted(set(got)) for got in calls.per_queue().values())
    seen = sorted(c[2] for c in a.calls + b.calls)
    assert seen == sorted(
        [f"a{i}".encode() for i in range(16)] + [f"b{i}".encode() for i in range(16)]
    )


def test_java_string_hash() -> None:
    """``String.hashCode`` as Java computes it, so a key picks the queue Java's selector does."""
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("中文") == 20013 * 31 + 25991
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00  # UTF-16 code units


def test_a_sharding_key_sends_its_messages_to_one_queue_in_order(cluster: Cluster) -> None:
    topic = "Sharded"
    with Producer(cluster.namesrv) as producer:
        with pytest.raises(MQClientError, match="sharding_key must be a str"):
            producer.send(Message(topic, b"x"), sharding_key=7)  # type: ignore[arg-type]
        results = {
            key: [producer.send(Message(topic, key.encode()), sharding_key=key) for _ in range(5)]
            for key in ("order-1", "order-2", "order-3", "order-4", "order-5")
        }
    for key, sent in results.items():
        assert len({r.queue_id for r in sent}) == 1, key
        offsets_of_key = [r.queue_offset for r in sent]
        assert offsets_of_key == sorted(offsets_of_key), key
    assert len({sent[0].queue_id for sent in results.values()}) > 1, "keys spread over queues"
