"""Consumer offsets across a broker SIGKILL (issue 15, row 3): a consumer committing offsets
resumes after the restart from what the broker had persisted, with at most one
``flushConsumerOffsetInterval`` of redelivery and never a skipped message; and
``consumerOffset.json``, written and renamed with fsyncs, is never torn however often the
broker is killed while it persists."""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from pathlib import Path

from common import FaultReport
from helpers import BrokerProcess, offsets, routed, start_master, wait_for
from rocketha import ConsumeFromWhere, Message, NameServer, Producer, PullConsumer, RocketHAError
from rocketha._core import MQClientAPI
from rocketha.client import AUTO_CREATE_TOPIC_KEY_TOPIC as TBW102
from rocketha.client import MessageQueue

TOPIC, GROUP = "Offsets", "offsets-group"
KEY = f"{TOPIC}@{GROUP}"
#: ``flushConsumerOffsetInterval`` of the redelivery trials (ms), small so a run spans many.
FLUSH_MS = 200
#: The redelivery bound's window: one flush interval, and one more for the broker's flush
#: thread to be scheduled late on a loaded machine.
WINDOW_S = 2 * FLUSH_MS / 1000
MESSAGES = 1500
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
#: The torn-write trials' broker persists its offsets every 5 ms: many kills land in a write.
TORN_KEYS = {"brokerRole": "ASYNC_MASTER", "flushConsumerOffsetInterval": 5}


def listen(broker: BrokerProcess) -> str:
    return str(broker.started["listen_address"])


def restart(d: Path, namesrv: str, broker: BrokerProcess, **keys: object) -> BrokerProcess:
    """The broker again on its store and port (the route names it there)."""
    return start_master(d, "broker-a", namesrv, listenPort=listen(broker).rsplit(":")[1], **keys)


def redelivery_trial(d: Path, rng: random.Random, report: FaultReport) -> None:
    d.mkdir(parents=True)
    keys = {"brokerRole": "ASYNC_MASTER", "flushConsumerOffsetInterval": FLUSH_MS}
    bodies = [f"m{i}".encode() for i in range(MESSAGES)]
    with NameServer("127.0.0.1:0") as ns:
        namesrv = ns.listen_address
        broker = start_master(d, "broker-a", namesrv, **keys)
        try:
            wait_for(lambda: routed(namesrv, TBW102), 60, "the broker's registration")
            with Producer(namesrv, "offsets-producer") as producer:
                for body in bodies:
                    producer.send(Message(TOPIC, body))
            # Offsets reach the broker only by commit_sync, so each commit has a known time.
            first = PullConsumer(
                namesrv, GROUP, TOPIC, consume_from_where=FIRST, auto_commit_interval=3600
            )
            before: list[bytes] = []
            #: (monotonic time of the answer, queue -> committed offset), one per commit.
            commits: list[tuple[float, dict[MessageQueue, int]]] = []
            pace = threading.Event()
            try:
                kill_after = rng.randint(100, MESSAGES - 200)
                while len(before) < kill_after:
                    before += [m.body for m in first.poll(1.0, max_messages=5)]
                    first.commit_sync()
                    done = time.monotonic()
                    commits.append((done, {q: first.committed(q) or 0 for q in first.assignment()}))
                    # Consumption spread over several flush intervals.
                    pace.wait(0.005)
                killed_at = time.monotonic()
                broker.kill()
            finally:
                first.close()
            # Offsets the broker had surely persisted: those committed a window before the kill.
            persisted = [c for t, c in commits if t <= killed_at - WINDOW_S]
            floor = persisted[-1] if persisted else {}
            last = commits[-1][1]
            broker = restart(d, namesrv, broker, **keys)
            loaded = {
                MessageQueue(TOPIC, "broker-a", int(q)): o
                for q, o in (offsets(listen(broker), KEY) or {}).items()
            }
            after: list[bytes] = []
            starts: dict[MessageQueue, int] = {}
            with PullConsumer(namesrv, GROUP, TOPIC, consume_from_where=FIRST) as second:

                def drained() -> bool:
                    for m in second.poll(0.2):
                        starts.setdefault(
                            MessageQueue(TOPIC, "broker-a", m.queue_id), m.queue_offset
                        )
                        after.append(m.body)
                    return len(set(before) | set(after)) >= MESSAGES

                wait_for(drained, 120, "every message after the restart")
        finally:
            broker.kill()
    skipped = len(set(bodies) - set(before) - set(after))
    redelivered = len(set(before) & set(after))
    bound = sum(last[q] - floor.get(q, 0) for q in last)
    report.trial(
        "h. consumer offsets across a broker SIGKILL",
        acked=MESSAGES,
        acked_lost=skipped,
        redelivered=redelivered,
        converged=not skipped and redelivered <= bound,
    )
    detail = f"loaded {loaded}, committed {last}, persisted at least {floor}"
    assert skipped == 0, f"{d.name}: {skipped} messages never delivered; {detail}"
    # The file holds a commit between the window's and the last one, and the consumer resumes
    # exactly there: what it redelivers is what the file had not caught up with.
    assert all(floor.get(q, 0) <= loaded.get(q, 0) <= last[q] for q in last), detail
    assert all(starts[q] == loaded.get(q, 0) for q in starts), f"{detail}, resumed at {starts}"
    assert redelivered <= bound, f"{d.name}: {redelivered} redelivered, bound {bound}; {detail}"


def test_a_consumer_resumes_from_its_persisted_offsets_after_a_broker_sigkill(
    tmp_path: Path, long_run: bool, fault_report: FaultReport
) -> None:
    rng = random.Random()
    for trial in range(20 if long_run else 2):
        redelivery_trial(tmp_path / f"trial{trial}", rng, fault_report)
        shutil.rmtree(tmp_path / f"trial{trial}")


def torn_write_trial(
    d: Path, namesrv: str, broker: BrokerProcess, rng: random.Random, report: FaultReport
) -> BrokerProcess:
    """Commits as fast as the broker answers, SIGKILLs it after a random number of commits,
    checks the file and that the restarted broker loaded it; returns the restarted broker."""
    config = d / "broker-a-master" / "config"
    stop = threading.Event()
    commits = 0
    api = MQClientAPI()

    def commit() -> None:
        nonlocal commits
        while not stop.is_set():
            commits += 1
            try:
                for q in range(4):
                    api.update_consumer_offset(
                        listen(broker), GROUP, TOPIC, q, commits, oneway=False, timeout=3
                    )
            except RocketHAError:
                return

    committer = threading.Thread(target=commit)
    committer.start()
    target = rng.randint(1, 400)
    try:
        wait_for(lambda: commits >= target, 60, f"{target} commits")
    finally:
        broker.kill()
        stop.set()
        committer.join()
        api.close()
    corrupt = 0
    try:
        on_disk = json.loads((config / "consumerOffset.json").read_text())
    except ValueError:
        corrupt, on_disk = 1, {}
    # A kill inside a write leaves its temporary file behind; the broker must not load it,
    # and deletes it at start.
    mid_write = any(config.glob("consumerOffset*.tmp"))
    broker = restart(d, namesrv, broker, **TORN_KEYS)
    loaded = offsets(listen(broker), KEY)
    left = sorted(p.name for p in config.glob("consumerOffset*.tmp"))
    expected = {str(q): o for q, o in on_disk.get("offsetTable", {}).get(KEY, {}).items()}
    report.trial(
        "i. consumerOffset.json across SIGKILLs" + (", mid-write" if mid_write else ""),
        corrupt=corrupt,
        converged=loaded == expected,
    )
    assert not corrupt, "consumerOffset.json is torn"
    assert loaded == expected, f"loaded {loaded}, the file holds {expected}"
    assert not left, f"temporary files survived the restart: {left}"
    return broker


def test_consumer_offset_json_is_never_torn_by_a_sigkill_while_it_is_persisted(
    tmp_path: Path, long_run: bool, fault_report: FaultReport
) -> None:
    rng = random.Random()
    with NameServer("127.0.0.1:0") as ns:
        namesrv = ns.listen_address
        broker = start_master(tmp_path, "broker-a", namesrv, **TORN_KEYS)
        try:
            wait_for(lambda: routed(namesrv, TBW102), 60, "the broker's registration")
            with Producer(namesrv, "torn-producer") as producer:
                producer.send(Message(TOPIC, b"creates the topic"))
            # The broker registers the topic it created after answering the send; a member
            # heartbeats only the brokers of the routes it found.
            wait_for(lambda: routed(namesrv, TOPIC), 60, "the new topic's route")
            # A member's heartbeat creates the group, which commits need.
            PullConsumer(namesrv, GROUP, TOPIC).close()
            # One commit persisted first: from then on the file must always be there, whole.
            api = MQClientAPI()
            try:
                api.update_consumer_offset(
                    listen(broker), GROUP, TOPIC, 0, 0, oneway=False, timeout=10
                )
            finally:
                api.close()
            offset_file = tmp_path / "broker-a-master" / "config" / "consumerOffset.json"
            wait_for(offset_file.exists, 60, "the first persist of consumerOffset.json")
            for _ in range(50 if long_run else 5):
                broker = torn_write_trial(tmp_path, namesrv, broker, rng, fault_report)
        finally:
            broker.kill()
