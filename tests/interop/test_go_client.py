"""The Go client (``rocketmq-client-go`` v2, ``tests/interop/go``) against rocketha (issue 26):
a push consumer answering ``ConsumeRetryLater`` gets each message again after its level's
delay, under its own topic, until ``maxReconsumeTimes``; then ``%DLQ%<group>`` holds it. (That
client counts any answer to its send-back as success and commits past the message: before the
broker served CONSUMER_SEND_MSG_BACK, every failed message was lost.) An orderly consumer
locks its queues (LOCK_BATCH_MQ, issue 27) and gets each in offset order, and a member killed
mid-stream leaves its queues to the other once their locks expire.

Needs ``go`` on PATH and the Go module proxy (the build resolves ``go.sum`` once).
Run: ``pytest -m interop``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import RochaNamesrv, start_master, wait_for
from rocketha import ConsumeFromWhere, Message, MessageExt, Producer, PullConsumer, _children
from rocketha.acl import mq_client_api

pytestmark = pytest.mark.interop

SOURCE = Path(__file__).resolve().parent / "go"
#: A failed message waits level ``3 + reconsumeTimes``: 2 s, then 3 s.
LEVELS = [1, 1, 2, 3] + [1] * 14
#: The killed member test's broker lock life and client lock renewal (RocketMQ's, / 10).
LOCK_LIFE_MS, LOCK_INTERVAL_MS = 6_000, 2_000


@pytest.fixture(scope="module")
def goconsumer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go consumer, built once for the module."""
    if shutil.which("go") is None:
        pytest.fail("the Go client test needs go on PATH (https://go.dev/dl/ or apt's golang)")
    binary = tmp_path_factory.mktemp("go") / "goconsumer"
    done = _children.run(
        ["go", "build", "-o", str(binary), "."],
        cwd=SOURCE,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    assert done.returncode == 0, f"go build failed:\n{done.stderr}"
    return binary


def wait_for_route(namesrv: str, topic: str) -> None:
    """Until the name server routes ``topic``: the first send creates it on the broker, which
    registers it with the name server a moment later, and the Go client's ``Start`` fails on a
    topic with no route ("route info not found, it may not exist") instead of waiting."""
    api = mq_client_api("127.0.0.1", None)
    try:
        wait_for(
            lambda: api.get_topic_route_info(namesrv, topic, 3.0) is not None,
            what=f"the route of {topic}",
        )
    finally:
        api.close()


@contextmanager
def running(binary: Path, out: Path, *args: str) -> Iterator[None]:
    """The Go consumer with ``args``, its output in ``out``; SIGTERMed (it shuts down and
    prints DONE) and waited for at exit."""
    with out.open("w") as stdout:
        proc = _children.spawn([str(binary), *args], stdout=stdout, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_a_go_push_consumer_that_fails_gets_each_message_again_then_the_dlq_has_it(
    tmp_path: Path, rocketha_namesrv: RochaNamesrv, goconsumer: Path
) -> None:
    ns = rocketha_namesrv.address
    levels = " ".join(f"{s}s" for s in LEVELS)
    master = start_master(tmp_path, "go-a", ns, brokerRole="ASYNC_MASTER", messageDelayLevel=levels)
    topic, group = "GoFails", "go-fails"
    bodies = [f"go-{i}" for i in range(3)]
    out = tmp_path / "goconsumer.out"
    try:
        with Producer(ns, "go-producer") as producer:
            for body in bodies:
                producer.send(Message(topic, body.encode()))
            wait_for_route(ns, topic)
        with (
            running(goconsumer, out, ns, topic, group, "2", "120"),
            PullConsumer(
                ns,
                "go-fails-dlq-reader",
                [f"%DLQ%{group}"],
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ) as reader,
        ):
            dead: list[MessageExt] = []
            wait_for(
                lambda: dead.extend(reader.poll(0.5)) or len(dead) >= len(bodies),
                timeout=90,
                what=f"the dead letters (the Go consumer printed:\n{out.read_text()})",
            )
    finally:
        master.kill()
    calls: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for line in out.read_text().splitlines():
        if line.startswith("CALL "):
            _, ms, body, times, got_topic = line.split(" ")
            calls[body].append((int(ms) / 1000, int(times), got_topic))
    for body in bodies:
        mine = calls[body]
        assert [times for _, times, _ in mine] == [0, 1, 2], out.read_text()
        assert {t for _, _, t in mine} == {topic}, "the client restores RETRY_TOPIC"
        for (first, _, _), (then, times, _) in itertools.pairwise(mine):
            assert then - first >= LEVELS[3 + times - 2] - 0.05, mine
    assert sorted(m.body.decode() for m in dead) == bodies
    assert {m.reconsume_times for m in dead} == {3}


def test_a_go_orderly_consumer_locks_its_queues_and_gets_each_in_order(
    tmp_path: Path, rocketha_namesrv: RochaNamesrv, goconsumer: Path
) -> None:
    """``WithConsumerOrder(true)``: the client consumes a queue only once its master locked it
    (LOCK_BATCH_MQ, which rocketha refused before: it got none of its messages); each queue
    comes in offset order, every message once."""
    ns = rocketha_namesrv.address
    master = start_master(tmp_path, "go-o", ns, brokerRole="ASYNC_MASTER")
    topic, group = "GoOrderly", "go-orderly"
    out = tmp_path / "goconsumer.out"
    try:
        with Producer(ns, "go-producer") as producer:
            sent = [producer.send(Message(topic, f"go-{i}".encode())) for i in range(40)]
        wait_for_route(ns, topic)
        with running(goconsumer, out, ns, topic, group, "16", "120", "orderly"):
            wait_for(
                lambda: out.read_text().count("GOT ") >= len(sent),
                timeout=90,
                what=f"every message (the Go consumer printed:\n{out.read_text()})",
            )
    finally:
        master.kill()
    got: dict[int, list[int]] = defaultdict(list)
    bodies = []
    for line in out.read_text().splitlines():
        if line.startswith("GOT "):
            _, queue_id, offset, body = line.split(" ")
            got[int(queue_id)].append(int(offset))
            bodies.append(body)
    assert sorted(bodies) == sorted(f"go-{i}" for i in range(len(sent))), out.read_text()
    for queue_id, offsets in got.items():
        assert offsets == list(range(len(offsets))), (queue_id, offsets)


def members(broker: str, group: str) -> int:
    """How many consumers of ``group`` the broker knows (GET_CONSUMER_LIST_BY_GROUP)."""
    api = mq_client_api("127.0.0.1", None)
    try:
        code, _, _, body = api.invoke_admin(
            broker, 38, ext_fields={"consumerGroup": group}, body=b"", timeout=3.0
        )
    finally:
        api.close()
    return len(json.loads(body)["consumerIdList"]) if code == 0 else 0


def test_a_go_orderly_member_killed_mid_stream_leaves_its_queues_to_the_other(
    tmp_path: Path, rocketha_namesrv: RochaNamesrv, goconsumer: Path
) -> None:
    """Two Go orderly members; one is SIGKILLed after its first messages. Its locks stay on
    the master until they expire, then the survivor locks its queues and reads on from the
    dead member's last commit: the survivor sees each queue in offset order, and every message
    reaches one of them (those the dead one took but never committed come again). The lock
    life and the members' renewals are RocketMQ's 60 s and 20 s cut by ten, keeping their
    ratio: the same sequence, a tenth of the wait."""
    ns = rocketha_namesrv.address
    master = start_master(
        tmp_path, "go-k", ns, brokerRole="ASYNC_MASTER", rebalanceLockMaxLiveTime=LOCK_LIFE_MS
    )
    orderly = ["16", "300", "orderly", str(LOCK_INTERVAL_MS)]
    address = str(master.started["listen_address"])
    topic, group = "GoOrderlyKilled", "go-orderly-killed"
    survivor_out, doomed_out = tmp_path / "survivor.out", tmp_path / "doomed.out"
    sent: list[str] = []
    try:
        with Producer(ns, "go-producer") as producer:
            producer.send(Message(topic, b"first"))
            sent.append("first")
            wait_for_route(ns, topic)
            with running(goconsumer, survivor_out, ns, topic, group, *orderly):
                with doomed_out.open("w") as stdout:
                    doomed = _children.spawn(
                        [str(goconsumer), ns, topic, group, *orderly],
                        stdout=stdout,
                        stderr=subprocess.STDOUT,
                    )
                try:
                    wait_for(lambda: members(address, group) == 2, what="both members")
                    for i in range(40):
                        sent.append(f"a-{i}")
                        producer.send(Message(topic, sent[-1].encode()))
                    # Its queues may still be locked by the first member: up to one lock life.
                    wait_for(
                        lambda: "GOT " in doomed_out.read_text(),
                        timeout=150,
                        what="the doomed member's first message",
                    )
                finally:
                    _children.kill(doomed)
                for i in range(40):
                    sent.append(f"b-{i}")
                    producer.send(Message(topic, sent[-1].encode()))
                taken = {line.split(" ")[3] for line in _got(doomed_out)}
                wait_for(
                    lambda: (
                        {line.split(" ")[3] for line in _got(survivor_out)} | taken >= set(sent)
                    ),
                    timeout=240,
                    what="the survivor to take the dead member's queues",
                )
    finally:
        master.kill()
    offsets: dict[int, list[int]] = defaultdict(list)
    for line in _got(survivor_out):
        _, queue_id, offset, _ = line.split(" ")
        offsets[int(queue_id)].append(int(offset))
    assert taken and len(offsets) == 4, offsets
    for queue_id, seen in offsets.items():
        assert seen == sorted(set(seen)), (queue_id, seen)


def _got(out: Path) -> list[str]:
    return [line for line in out.read_text().splitlines() if line.startswith("GOT ")]
