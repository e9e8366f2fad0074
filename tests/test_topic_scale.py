"""Topics by the thousand (issue 32). A topic change is one line of ``config/topics.journal``,
not a rewrite of ``topics.json``, and the name servers learn it from the changed topic alone
(``registerIncrementBrokerData``):

- a master SIGKILLed while clients create topics and groups as fast as it answers restarts with
  every one it acknowledged; the name server routes them, and the slave ends up with the same
  tables;
- a stopped broker's ``topics.json`` and ``subscriptionGroup.json`` hold everything by
  themselves, in RocketMQ's format;
- a topic is routed as soon as its creation is acknowledged, long before the next whole
  registration.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
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

#: GET_ALL_TOPIC_CONFIG and GET_ALL_SUBSCRIPTIONGROUP_CONFIG: a broker's whole tables, as a
#: slave syncs them; UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (``mqadmin updateSubGroup``).
GET_ALL_TOPIC_CONFIG, GET_ALL_GROUPS, UPDATE_AND_CREATE_GROUP = 21, 201, 200


@pytest.fixture
def rocketha_namesrv(tmp_path: Path) -> Iterator[RochaNamesrv]:
    with spawn_rocketha_namesrv(tmp_path / "namesrv.log") as ns:
        yield ns


def _topic(name: str) -> tuple[int, dict[str, str], bytes]:
    fields = {
        "topic": name,
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }
    return UPDATE_AND_CREATE_TOPIC, fields, b""


def _group(name: str) -> tuple[int, dict[str, str], bytes]:
    return UPDATE_AND_CREATE_GROUP, {}, json.dumps({"groupName": name}).encode()


def _tables(address: str) -> tuple[set[str], set[str]]:
    """The broker's topics and consumer groups."""
    topics = ask_json(address, GET_ALL_TOPIC_CONFIG)["topicConfigTable"]
    return set(topics), set(ask_json(address, GET_ALL_GROUPS)["subscriptionGroupTable"])


def _create_until_killed(
    address: str,
    request: Callable[[str], tuple[int, dict[str, str], bytes]],
    acked: list[str],
    stop: threading.Event,
) -> None:
    """Creates ``Scale0``, ``Scale1``, ... with ``request`` one after the other until ``stop``
    or the broker's death; each one the broker acknowledged goes to ``acked``."""
    try:
        sock = RemotingSocket(address)
    except OSError:
        return
    try:
        while not stop.is_set():
            name = f"Scale{len(acked)}"
            code, fields, body = request(name)
            response, _ = sock.invoke(code, fields, body)
            assert response["code"] == 0, response
            acked.append(name)
    except (OSError, AssertionError):
        return  # killed mid-request: that one was not acknowledged
    finally:
        sock.close()


def test_a_master_killed_mid_creation_keeps_every_acknowledged_topic_and_group(
    tmp_path: Path, rocketha_namesrv: RochaNamesrv
) -> None:
    """Two clients create topics and groups as fast as the master answers; it is SIGKILLed
    once each has 5,000 (in the middle of 10,000, with its journals folded into the files a
    few times by then)."""
    ns = rocketha_namesrv.address
    master = start_master(tmp_path, "scale", ns, brokerRole="ASYNC_MASTER")
    # The restarted master listens on a new port: the slave learns it when it registers.
    slave = start_slave(tmp_path, "scale-slave", None, brokerName="scale", namesrvAddr=ns,
                        slaveSyncInterval=500, registerNameServerPeriod=1000)  # fmt: skip
    topics: list[str] = []
    groups: list[str] = []
    stop = threading.Event()
    address = master.started["listen_address"]
    creators = [
        threading.Thread(target=_create_until_killed, args=(address, request, acked, stop))
        for request, acked in ((_topic, topics), (_group, groups))
    ]
    for creator in creators:
        creator.start()
    try:
        wait_for(lambda: min(len(topics), len(groups)) >= 5000
                 or not all(c.is_alive() for c in creators),
                 timeout=300, what="5,000 topics and groups created")  # fmt: skip
        master.kill()
    finally:
        stop.set()
        for creator in creators:
            creator.join()
    assert min(len(topics), len(groups)) >= 5000, "a creator stopped early"
    master = BrokerProcess(master.conf)
    try:
        have_topics, have_groups = _tables(str(master.started["listen_address"]))
        lost = (set(topics) - have_topics) | (set(groups) - have_groups)
        assert not lost, f"{len(lost)} acknowledged creations lost, e.g. {sorted(lost)[:5]}"
        for topic in (topics[0], topics[len(topics) // 2], topics[-1]):
            wait_for(lambda t=topic: routed(ns, t), what=f"a route for {topic}")  # type: ignore[misc]

        def slave_has_all() -> bool:
            slave_topics, slave_groups = _tables(slave.started["listen_address"])
            return set(topics) <= slave_topics and set(groups) <= slave_groups

        wait_for(slave_has_all, what="the slave to hold every topic and group")
    finally:
        master.stop()
        slave.stop()
    # Stopped: the files alone hold everything, as RocketMQ's broker and tools read them.
    config = Path(master.conf.read_text().split("storePathRootDir=")[1].splitlines()[0]) / "config"
    for name, key, made in (
        ("topics", "topicConfigTable", topics),
        ("subscriptionGroup", "subscriptionGroupTable", groups),
    ):
        journal = config / f"{name}.journal"
        assert not journal.exists() or journal.stat().st_size == 0, journal
        assert set(made) <= set(json.loads((config / f"{name}.json").read_text())[key])


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
                response, _ = sock.invoke(*_topic(f"Incr{i}"))
                assert response["code"] == 0, response
                wait_for(lambda i=i: routed(ns, f"Incr{i}"), what=f"a route for Incr{i}")  # type: ignore[misc]
        finally:
            sock.close()
    finally:
        master.stop()
