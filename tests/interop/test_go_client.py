"""The Go client (``rocketmq-client-go`` v2, ``tests/interop/go``) against rocketha (issue 26):
a push consumer answering ``ConsumeRetryLater`` gets each message again after its level's
delay, under its own topic, until ``maxReconsumeTimes``; then ``%DLQ%<group>`` holds it. (That
client counts any answer to its send-back as success and commits past the message: before the
broker served CONSUMER_SEND_MSG_BACK, every failed message was lost.)

Needs ``go`` on PATH and the Go module proxy (the build resolves ``go.sum`` once).
Run: ``pytest -m interop``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import RochaNamesrv, start_master, wait_for
from rocketha import ConsumeFromWhere, Message, MessageExt, Producer, PullConsumer, _children

pytestmark = pytest.mark.interop

SOURCE = Path(__file__).resolve().parent / "go"
#: A failed message waits level ``3 + reconsumeTimes``: 2 s, then 3 s.
LEVELS = [1, 1, 2, 3] + [1] * 14


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
        with out.open("w") as stdout:
            proc = _children.spawn(
                [str(goconsumer), ns, topic, group, "2", "120"],
                stdout=stdout,
                stderr=subprocess.STDOUT,
            )
        try:
            with PullConsumer(
                ns,
                "go-fails-dlq-reader",
                [f"%DLQ%{group}"],
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ) as reader:
                dead: list[MessageExt] = []
                wait_for(
                    lambda: dead.extend(reader.poll(0.5)) or len(dead) >= len(bodies),
                    timeout=90,
                    what=f"the dead letters (the Go consumer printed:\n{out.read_text()})",
                )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
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
