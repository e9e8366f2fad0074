"""Topics by the thousand (issue 32). A topic change is one line of ``config/topics.journal``,
not a rewrite of ``topics.json``, and the name servers learn it from the changed topic alone
(``registerIncrementBrokerData``):

- a master SIGKILLed while a client creates topics as fast as it can restarts with every topic
  it acknowledged; the name server routes them, and the slave ends up with the same table;
- a stopped broker's ``topics.json`` holds every topic by itself, in RocketMQ's format;
- a topic is routed as soon as its creation is acknowledged, long before the next whole
  registration.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    UPDATE_AND_CREATE_TOPIC,
    BrokerProcess,
    RemotingSocket,
    RochaNamesrv,
    ask_json,
    routed,
    spawn_rocketha_namesrv,
    start_master,
    start_slave,
    wait_for,
)

#: GET_ALL_TOPIC_CONFIG: the broker's whole table, as a slave syncs it.
GET_ALL_TOPIC_CONFIG = 21


@pytest.fixture
def rocketha_namesrv(tmp_path: Path) -> Iterator[RochaNamesrv]:
    with spawn_rocketha_namesrv(tmp_path / "namesrv.log") as ns:
        yield ns


def _fields(topic: str) -> dict[str, str]:
    return {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }


def _table(address: str) -> set[str]:
    return set(ask_json(address, GET_ALL_TOPIC_CONFIG)["topicConfigTable"])


def _create_until_killed(address: str, acked: list[str], stop: threading.Event) -> None:
    """Creates topics one after the other until ``stop`` or the broker's death; each one
    the broker acknowledged goes to ``acked``."""
    try:
        sock = RemotingSocket(address)
    except OSError:
        return
    try:
        while not stop.is_set():
            topic = f"Scale{len(acked)}"
            response, _ = sock.invoke(UPDATE_AND_CREATE_TOPIC, _fields(topic))
            assert response["code"] == 0, response
            acked.append(topic)
    except (OSError, AssertionError):
        return  # killed mid-request: that one was not acknowledged
    finally:
        sock.close()


def test_a_master_killed_mid_creation_keeps_every_acknowledged_topic(
    tmp_path: Path, rocketha_namesrv: RochaNamesrv
) -> None:
    ns = rocketha_namesrv.address
    master = start_master(tmp_path, "scale", ns, brokerRole="ASYNC_MASTER")
    slave = start_slave(tmp_path, "scale-slave", None, brokerName="scale", namesrvAddr=ns,
                        slaveSyncInterval=500)  # fmt: skip
    acked: list[str] = []
    stop = threading.Event()
    creator = threading.Thread(
        target=_create_until_killed, args=(master.started["listen_address"], acked, stop)
    )
    creator.start()
    try:
        # Enough for the journal to be folded into topics.json a few times first.
        wait_for(lambda: len(acked) >= 3000 or not creator.is_alive(), timeout=300,
                 what="3,000 topics created")  # fmt: skip
        master.kill()
    finally:
        stop.set()
        creator.join()
    assert len(acked) >= 3000, "the creator stopped early"
    master = BrokerProcess(master.conf)
    try:
        address = str(master.started["listen_address"])
        missing = set(acked) - _table(address)
        assert not missing, f"{len(missing)} acknowledged topics lost, e.g. {sorted(missing)[:5]}"
        for topic in (acked[0], acked[len(acked) // 2], acked[-1]):
            wait_for(lambda t=topic: routed(ns, t), what=f"a route for {topic}")  # type: ignore[misc]
        wait_for(lambda: set(acked) <= _table(slave.started["listen_address"]),
                 what="the slave to hold every topic")  # fmt: skip
    finally:
        master.stop()
        slave.stop()
    # Stopped: the file alone holds every topic, as RocketMQ's broker and tools read it.
    store = Path(master.conf.read_text().split("storePathRootDir=")[1].splitlines()[0])
    journal = store / "config" / "topics.journal"
    assert not journal.exists() or journal.stat().st_size == 0
    on_disk = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert set(acked) <= set(on_disk)


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "compressedRegister"])
def test_a_created_topic_is_routed_at_once(
    tmp_path: Path, rocketha_namesrv: RochaNamesrv, compressed: bool
) -> None:
    """The periodic whole registration is 30 s away (``registerNameServerPeriod``, set to an
    hour here): the route comes from the increment the creation sends, as JSON or in
    RocketMQ's compressed form (``compressedRegister``, which rocketha also uses by itself for
    a table too large for a frame as JSON)."""
    ns = rocketha_namesrv.address
    master = start_master(
        tmp_path,
        "incr",
        ns,
        brokerRole="ASYNC_MASTER",
        registerNameServerPeriod=3_600_000,
        compressedRegister=compressed,
    )
    try:
        sock = RemotingSocket(master.started["listen_address"])
        try:
            for i in range(20):
                response, _ = sock.invoke(UPDATE_AND_CREATE_TOPIC, _fields(f"Incr{i}"))
                assert response["code"] == 0, response
                wait_for(lambda i=i: routed(ns, f"Incr{i}"), what=f"a route for Incr{i}")  # type: ignore[misc]
        finally:
            sock.close()
    finally:
        master.stop()
