"""Timer messages (RocketMQ 5's TimerMessageStore: TIMER_DELIVER_MS, delivered at their time)
with the real Java clients, against Apache RocketMQ 5.4.0's name server and broker
(``timerWheelEnable=true``, its default) and against rocketha's alike:

a. Remoting (``TimerPeer``, the 5.4.0 client): a ``DefaultMQProducer`` sends messages due
   :data:`DELAY_MS` ahead (``TIMER_DELIVER_MS``, as ``Message.setDeliverTimeMs`` sets it); a
   push consumer that was already reading the topic gets each one not before its due time and
   within :data:`LATE_MS` after it, the property still on the delivered message.
b. gRPC through Apache RocketMQ 5.4.0's proxy in cluster mode (``Grpc5``, rocketmq-client-java
   5.0.7): a message with ``setDeliveryTimestamp(now + DELAY_MS)`` to a topic created with
   ``+message.type=DELAY`` is received by a ``SimpleConsumer`` not before its time, carrying
   that delivery timestamp.
c. Pop (issue 49): the proxy's ``SimpleConsumer`` receive is POP_MESSAGE to the broker, its
   ack ACK_MESSAGE. Every message sent is received and acked once; a message whose first
   delivery is not acked comes back (delivery attempt 2, from the group's pop retry topic) not
   before its invisible duration (15 s) has passed.
d. What the proxy checks: it builds each topic's route with the message types the topic
   accepts, from the topic's ``message.type`` attribute (GET_TOPIC_CONFIG on the broker: a topic
   without one is NORMAL), and with ``enableTopicMessageTypeCheck`` (its default) every message
   must be of the topic's type, a ``MIXED`` topic excepted. A delayed send to a NORMAL topic
   and a plain send to a DELAY topic are both refused: by the 5.0.7 gRPC client itself, from
   the route (IllegalArgumentException "Current message type not match with topic accept
   message types"), before anything is sent; and by the proxy itself for a remoting producer
   on its remoting port, which has no such check of its own (ProducerProcessor's
   ``TopicMessageTypeValidator``: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "TopicMessageType
   validate failed"). A broker reached directly checks no message type.

The time bounds are the feature (a timer delivered early is wrong, one delivered late is
slow); nothing else waits on a clock: the consumer is reading the topic's queues before the
first send (``READY``), and each run ends at its message count, its timeout only turning a hang
into a failure. Run: ``pytest -m interop tests/interop/test_timer_interop.py``; the rocketha
cases alone: ``-k rocketha``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import spawn_rocketha_namesrv, start_master

from benches.peers.proxy import ApacheProxy, GrpcClient, GrpcSent, Proxy
from benches.peers.python5 import PythonGrpcClient
from benches.peers.rocketmq import VERSION_5, RocketMQ, TimerSendRun, Unavailable

pytestmark = pytest.mark.interop

#: How far ahead each message is due.
DELAY_MS = 3000
#: The latest a remoting consumer may get a due message: RocketMQ's timer wheel turns a slot a
#: second (``timerPrecisionMs``), so a message due in a slot is out within the next second.
LATE_MS = 1500
COUNT = 5
CLUSTER = "TimerCluster"
#: A hang's bound, not a measurement.
RUN_TIMEOUT_MS = 60_000
#: How long a receiver waits for a recalled message that must not come (from its start).
RECALL_WAIT_MS = 20_000
_NAMES = itertools.count()


def resolve() -> RocketMQ:
    try:
        return RocketMQ.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))


@dataclass
class Cluster:
    kind: str
    namesrv: str
    broker: str
    root: Path


@pytest.fixture(scope="module", params=["rocketmq", "rocketha"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A name server and an ASYNC_MASTER of cluster :data:`CLUSTER`, of either kind (the
    session's shared name server holds brokers of other modules' clusters: a proxy serves one
    cluster, so this one is the module's own)."""
    root = tmp_path_factory.mktemp(f"timer-{request.param}")
    name = f"timer-{root.name}"
    if request.param == "rocketmq":
        rmq = resolve()
        with rmq.namesrv(root / "namesrv") as ns:
            broker = rmq.broker(
                root / "broker",
                ns,
                brokerName=name,
                brokerClusterName=CLUSTER,
                recallMessageEnable="true",
            )
            # The proxy creates its system topics on the cluster's brokers at start: the name
            # server must know the broker by then.
            ns.wait_registered(broker.listen_port)
            try:
                yield Cluster("rocketmq", ns.address, broker.address, root)
            finally:
                broker.kill()
        return
    with spawn_rocketha_namesrv(root / "namesrv.log") as rns:
        master = start_master(
            root,
            name,
            rns.address,
            brokerRole="ASYNC_MASTER",
            brokerClusterName=CLUSTER,
            recallMessageEnable=True,
        )
        try:
            yield Cluster("rocketha", rns.address, str(master.started["listen_address"]), root)
        finally:
            master.kill()


@pytest.fixture(scope="module")
def proxy(cluster: Cluster) -> Iterator[Proxy]:
    """Apache RocketMQ 5.4.0's proxy, cluster mode, in front of the module's name server."""
    try:
        apache = ApacheProxy.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))
    with apache.start(cluster.root / f"proxy-{next(_NAMES)}", cluster.namesrv, CLUSTER) as p:
        yield p


@pytest.fixture(scope="module")
def grpc() -> GrpcClient:
    try:
        return GrpcClient.resolve()
    except Unavailable as e:
        pytest.fail(str(e))


def create_topic(cluster: Cluster, topic: str, home: Path, message_type: str | None) -> None:
    """``mqadmin updateTopic`` on the broker (4 queues), ``-a +message.type=TYPE`` if given."""
    args = ["updateTopic", "-n", cluster.namesrv, "-b", cluster.broker, "-t", topic]
    args += ["-r", "4", "-w", "4"]
    if message_type is not None:
        args += ["-a", f"+message.type={message_type}"]
    out = resolve().mqadmin(home, *args)
    assert "success" in out, out[-3000:]


def fresh(stem: str) -> str:
    return f"{stem}{next(_NAMES)}"


# -- a. remoting -------------------------------------------------------------------------------


def test_remoting_timer_is_delivered_at_its_time(cluster: Cluster, tmp_path: Path) -> None:
    rmq = resolve()
    topic = fresh("TimerRemoting")
    create_topic(cluster, topic, tmp_path / "admin", None)
    with rmq.timer_receiver(
        cluster.namesrv,
        topic,
        fresh("timer-group-"),
        COUNT,
        home=tmp_path / "receive",
        timeout_ms=RUN_TIMEOUT_MS,
    ) as receiver:
        receiver.wait_ready()
        run = rmq.timer_send(
            cluster.namesrv, topic, COUNT, home=tmp_path / "send", mode="ahead", at_ms=DELAY_MS
        )
        receiver.finish(RUN_TIMEOUT_MS / 1000 + 60)
    check_sent(run)
    got = {g.msg_id: g for g in receiver.got}
    sent = {s.msg_id: s for s in run.sent}
    assert got.keys() == sent.keys(), (sorted(sent), sorted(got))
    for msg_id, s in sent.items():
        g = got[msg_id]
        assert g.due_ms == s.due_ms == s.sent_ms + DELAY_MS, (s, g)
        # The delivered message still says when it was due, as RocketMQ 5's does.
        assert g.property_ms == s.due_ms, (s, g)
        assert g.lateness_ms >= 0, f"delivered {-g.lateness_ms} ms early: {s} {g}"
        assert g.lateness_ms <= LATE_MS, f"delivered {g.lateness_ms} ms late: {s} {g}"


def check_sent(run: TimerSendRun) -> None:
    assert run.failures == [], run.failures
    assert [s.seq for s in run.sent] == list(range(COUNT)), run.sent
    assert {s.status for s in run.sent} == {"SEND_OK"}, run.sent
    assert len({s.msg_id for s in run.sent}) == COUNT


# -- b. gRPC through Apache's proxy ------------------------------------------------------------


def test_grpc_delivery_timestamp_through_the_proxy(
    cluster: Cluster, proxy: Proxy, grpc: GrpcClient, tmp_path: Path
) -> None:
    topic = fresh("TimerGrpc")
    create_topic(cluster, topic, tmp_path / "admin", "DELAY")
    with grpc.receiver(
        proxy.endpoint,
        topic,
        fresh("timer-grpc-"),
        COUNT,
        RUN_TIMEOUT_MS // 1000,
        home=tmp_path / "receive",
    ) as receiver:
        receiver.wait_ready()
        sent = grpc.send(proxy.endpoint, topic, COUNT, home=tmp_path / "send", delay_ms=DELAY_MS)
        got = receiver.finish(RUN_TIMEOUT_MS / 1000 + 60)
    assert [s.error for s in sent if s.error] == []
    by_id = {r.message_id: r for r in got}
    assert by_id.keys() == {s.message_id for s in sent}, (sent, got)
    for s in sent:
        r = by_id[s.message_id]
        assert s.delivery_ms is not None
        assert r.delivery_ms == s.delivery_ms, (s, r)
        assert r.body == f"g-{s.seq}", r
        assert r.received_ms >= s.delivery_ms, f"{s.delivery_ms - r.received_ms} ms early: {r}"


def test_grpc_timer_through_the_proxy_reaches_a_remoting_consumer_at_its_time(
    cluster: Cluster, proxy: Proxy, grpc: GrpcClient, tmp_path: Path
) -> None:
    """The proxy's send path alone: a delivery timestamp set by the gRPC client becomes the
    broker's timer message, which a remoting consumer of the broker gets at its time."""
    rmq = resolve()
    topic = fresh("TimerGrpcRemoting")
    create_topic(cluster, topic, tmp_path / "admin", "DELAY")
    with rmq.timer_receiver(
        cluster.namesrv,
        topic,
        fresh("timer-grpc-remoting-"),
        COUNT,
        home=tmp_path / "receive",
        timeout_ms=RUN_TIMEOUT_MS,
    ) as receiver:
        receiver.wait_ready()
        sent = grpc.send(proxy.endpoint, topic, COUNT, home=tmp_path / "send", delay_ms=DELAY_MS)
        receiver.finish(RUN_TIMEOUT_MS / 1000 + 60)
    assert [s.error for s in sent if s.error] == []
    got = {g.msg_id: g for g in receiver.got}
    assert got.keys() == {s.message_id for s in sent}, (sent, receiver.got)
    for s in sent:
        g = got[s.message_id]
        assert g.property_ms == s.delivery_ms, (s, g)
        assert g.lateness_ms >= 0, f"delivered {-g.lateness_ms} ms early: {s} {g}"
        assert g.lateness_ms <= LATE_MS, f"delivered {g.lateness_ms} ms late: {s} {g}"


@pytest.fixture(scope="module")
def python_grpc() -> PythonGrpcClient:
    try:
        return PythonGrpcClient.resolve()
    except Unavailable as e:
        pytest.fail(str(e))


def test_python_grpc_client_schedules_and_recalls_through_the_proxy(
    cluster: Cluster, proxy: Proxy, python_grpc: PythonGrpcClient, tmp_path: Path
) -> None:
    """RocketMQ 5's Python client (``rocketmq-python-client``) through the proxy: two
    messages with a delivery timestamp, one recalled by the handle its send returned (gRPC
    RecallMessage, the proxy's RECALL_MESSAGE to the broker); a remoting consumer of the
    broker gets the other at its time, never the recalled one, and recalling it again after
    its time is refused."""
    rmq = resolve()
    topic = fresh("TimerPython")
    create_topic(cluster, topic, tmp_path / "admin", "DELAY")
    with rmq.timer_receiver(
        cluster.namesrv,
        topic,
        fresh("timer-python-"),
        2,
        home=tmp_path / "receive",
        # Long enough for both to be due, and a second would be there: the recalled one.
        timeout_ms=RECALL_WAIT_MS,
    ) as receiver:
        receiver.wait_ready()
        kept = python_grpc.send(proxy.endpoint, topic, delay_ms=DELAY_MS)
        gone = python_grpc.send(proxy.endpoint, topic, delay_ms=DELAY_MS)
        assert kept["recall_handle"] and gone["recall_handle"], (kept, gone)
        recalled = python_grpc.recall(proxy.endpoint, topic, gone["recall_handle"])
        assert "error" not in recalled, recalled
        # Waits its whole time for a second message, which must not come.
        receiver.finish(RECALL_WAIT_MS / 1000 + 60)
    got = {g.msg_id: g for g in receiver.got}
    assert list(got) == [kept["message_id"]], (kept, gone, receiver.got)
    g = got[kept["message_id"]]
    assert g.property_ms == kept["delivery_ms"] and 0 <= g.lateness_ms <= LATE_MS, g
    again = python_grpc.recall(proxy.endpoint, topic, kept["recall_handle"])
    assert "error" in again, again


# -- c. the proxy's message-type check ---------------------------------------------------------

#: What the 5.0.7 client says when the route's topic does not accept a message's type.
CLIENT_REFUSAL = "IllegalArgumentException Current message type not match with topic accept"
#: ProxyException(MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)'s text, as the proxy answers it.
PROXY_REFUSAL = "TopicMessageType validate failed"


def refused(sent: list[GrpcSent]) -> str:
    assert len(sent) == 1 and sent[0].error is not None, sent
    return sent[0].error


def test_grpc_client_refuses_a_type_the_topic_does_not_accept(
    cluster: Cluster, proxy: Proxy, grpc: GrpcClient, tmp_path: Path
) -> None:
    normal = fresh("TimerNormal")
    delay = fresh("TimerDelay")
    create_topic(cluster, normal, tmp_path / "admin", None)
    create_topic(cluster, delay, tmp_path / "admin", "DELAY")
    delayed = refused(grpc.send(proxy.endpoint, normal, 1, home=tmp_path / "d", delay_ms=DELAY_MS))
    assert CLIENT_REFUSAL in delayed and "actualMessageType=DELAY" in delayed, delayed
    assert "acceptMessageTypes=[NORMAL]" in delayed, delayed
    plain = refused(grpc.send(proxy.endpoint, delay, 1, home=tmp_path / "p"))
    assert CLIENT_REFUSAL in plain and "acceptMessageTypes=[DELAY]" in plain, plain
    # Each type to its own kind of topic goes through.
    for topic, delay_ms in ((normal, None), (delay, DELAY_MS)):
        ok = grpc.send(proxy.endpoint, topic, 1, home=tmp_path / f"ok-{topic}", delay_ms=delay_ms)
        assert [s.error for s in ok] == [None], ok


def test_proxy_refuses_a_timer_to_a_normal_topic(
    cluster: Cluster, proxy: Proxy, tmp_path: Path
) -> None:
    """A remoting producer through the proxy's remoting port (the proxy its name server and
    its broker): the client checks no message type, the proxy does."""
    rmq = resolve()
    normal = fresh("TimerProxyNormal")
    delay = fresh("TimerProxyDelay")
    create_topic(cluster, normal, tmp_path / "admin", None)
    create_topic(cluster, delay, tmp_path / "admin", "DELAY")
    via = proxy.remoting_address
    timer = rmq.timer_send(via, normal, 1, home=tmp_path / "t", mode="ahead", at_ms=DELAY_MS)
    assert timer.sent == [] and len(timer.failures) == 1, timer
    assert PROXY_REFUSAL in timer.failures[0], timer.failures
    plain = rmq.timer_send(via, delay, 1, home=tmp_path / "p", mode="plain")
    assert plain.sent == [] and len(plain.failures) == 1, plain
    assert PROXY_REFUSAL in plain.failures[0], plain.failures
    ok = rmq.timer_send(via, delay, 1, home=tmp_path / "ok", mode="ahead", at_ms=DELAY_MS)
    assert [s.status for s in ok.sent] == ["SEND_OK"], ok


# -- c. pop through Apache's proxy ------------------------------------------------------------

#: The receiver's invisible duration (Grpc5's): a message not acked comes back after it.
INVISIBLE_MS = 15_000


def test_grpc_simple_consumer_receives_and_acks_each_message_once(
    cluster: Cluster, proxy: Proxy, grpc: GrpcClient, tmp_path: Path
) -> None:
    topic = fresh("Pop")
    create_topic(cluster, topic, tmp_path / "admin", None)
    with grpc.receiver(
        proxy.endpoint, topic, fresh("pop-"), COUNT, RUN_TIMEOUT_MS // 1000, home=tmp_path / "r"
    ) as receiver:
        receiver.wait_ready()
        sent = grpc.send(proxy.endpoint, topic, COUNT, home=tmp_path / "send")
        got = receiver.finish(RUN_TIMEOUT_MS / 1000 + 60)
    assert [s.error for s in sent if s.error] == []
    ids = [r.message_id for r in got]
    assert sorted(ids) == sorted(s.message_id for s in sent), (sent, got)
    assert {r.attempt for r in got} == {1}
    assert sorted(r.body for r in got) == sorted(f"g-{s.seq}" for s in sent)


def test_a_message_not_acked_comes_back_after_its_invisible_time(
    cluster: Cluster, proxy: Proxy, grpc: GrpcClient, tmp_path: Path
) -> None:
    topic = fresh("PopRetry")
    create_topic(cluster, topic, tmp_path / "admin", None)
    timeout_s = RUN_TIMEOUT_MS // 1000 + INVISIBLE_MS // 1000
    with grpc.receiver(
        proxy.endpoint,
        topic,
        fresh("pop-retry-"),
        COUNT,
        timeout_s,
        home=tmp_path / "r",
        unacked_first=True,
    ) as receiver:
        receiver.wait_ready()
        sent = grpc.send(proxy.endpoint, topic, COUNT, home=tmp_path / "send")
        got = receiver.finish(timeout_s + 60)
    assert [s.error for s in sent if s.error] == []
    by_id: dict[str, list[int]] = {}
    first: dict[str, int] = {}
    for r in got:
        by_id.setdefault(r.message_id, []).append(r.attempt)
        if r.attempt == 1:
            first[r.message_id] = r.received_ms
        else:
            # Its invisible duration ran from the pop, a moment before the first receive ended.
            waited = r.received_ms - first[r.message_id]
            assert waited >= INVISIBLE_MS - 1000, f"back after {waited} ms: {r}"
    assert by_id == {s.message_id: [1, 2] for s in sent}, got


def test_a_fifo_group_consumes_a_message_group_in_order_and_an_unacked_message_holds_the_rest(
    cluster: Cluster, proxy: Proxy, grpc: GrpcClient, tmp_path: Path
) -> None:
    """A FIFO topic, a group with ``consumeMessageOrderly`` (``mqadmin updateSubGroup -o
    true``), one message group: the proxy pops in order (``order=true``), and the queue is held
    by a pop until its messages are acked or visible again, so what is acked is acked in the
    order sent, each message only after its first delivery came back."""
    topic = fresh("Fifo")
    group = fresh("fifo-")
    create_topic(cluster, topic, tmp_path / "admin", "FIFO")
    out = resolve().mqadmin(
        tmp_path / "admin",
        *("updateSubGroup", "-n", cluster.namesrv, "-b", cluster.broker, "-g", group, "-o", "true"),
    )
    assert "success" in out, out[-3000:]
    timeout_s = RUN_TIMEOUT_MS // 1000 + 2 * INVISIBLE_MS // 1000
    with grpc.receiver(
        proxy.endpoint, topic, group, COUNT, timeout_s, home=tmp_path / "r", unacked_first=True
    ) as receiver:
        receiver.wait_ready()
        sent = grpc.send(proxy.endpoint, topic, COUNT, home=tmp_path / "send", message_group="g")
        got = receiver.finish(timeout_s + 60)
    assert [s.error for s in sent if s.error] == []
    acked = [r.body for r in got if r.attempt == 2]
    assert acked == [f"g-{i}" for i in range(COUNT)], got
    attempts: dict[str, list[int]] = {}
    for r in got:
        attempts.setdefault(r.body, []).append(r.attempt)
    assert all(a[:2] == [1, 2] for a in attempts.values()), got
