"""``mqadmin`` (rocketmq-tools 4.9.7 and 5.4.0) running the commands operators change a cluster
with against ``rocketha namesrv`` and a rocketha master: ``getBrokerConfig``,
``updateBrokerConfig`` (a live key taken, another refused with the broker's remark),
``updateTopic -a`` (5.x's topic attributes, a bad one refused by name),
``updateSubGroup`` / ``deleteSubGroup``, ``deleteTopic``, ``consumerConnection`` and
``producerConnection``, and the commands that read or write a topic's messages and a group's
offsets (``printMsg``, ``queryMsgById``, ``consumeMessage``, ``sendMessage``,
``cloneGroupOffset``, ``skipAccumulatedMessage``, ``clusterRT``, ...), each checked by what the
broker and the name server then hold, not only by what mqadmin printed."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BrokerProcess, RemotingSocket, RochaNamesrv, start_master, wait_for
from rocketha import Admin, ConsumeFromWhere, Message, Producer, PullConsumer, _children

from benches.peers.rocketmq import VERSION_5, VERSIONS, RocketMQ, Unavailable, rocketmq_home

pytestmark = pytest.mark.interop

GET_KV_CONFIG, QUERY_NOT_FOUND = 101, 22


def resolve(version: str) -> RocketMQ:
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


def tag(version: str) -> str:
    return version.replace(".", "")


def exceptions(out: str) -> list[str]:
    return [line for line in out.splitlines() if "Exception" in line]


@pytest.fixture(scope="module")
def master(
    tmp_path_factory: pytest.TempPathFactory, rocketha_namesrv: RochaNamesrv
) -> Iterator[str]:
    """A rocketha master of its own group; its client address."""
    proc: BrokerProcess = start_master(
        tmp_path_factory.mktemp("admin"), "admin-a", rocketha_namesrv.address
    )
    try:
        yield str(proc.started["listen_address"])
    finally:
        proc.kill()


def broker_config(rmq: RocketMQ, home: Path, ns: str, addr: str) -> dict[str, str]:
    """``getBrokerConfig -b``'s ``key=  value`` lines."""
    out = rmq.mqadmin(home, "getBrokerConfig", "-b", addr, "-n", ns)
    assert exceptions(out) == [], out
    pairs = (line.partition("=") for line in out.splitlines() if "=  " in line)
    return {k.strip(): v.strip() for k, _, v in pairs}


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_reads_and_changes_a_brokers_config(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    config = broker_config(rmq, tmp_path, ns, master)
    assert (config["brokerName"], config["brokerRole"]) == ("admin-a", "SYNC_MASTER")
    assert config["brokerPermission"] == "6" and "haAuthSecret" not in config

    out = rmq.mqadmin(
        tmp_path, "updateBrokerConfig", "-b", master, "-k", "brokerPermission", "-v", "4", "-n", ns
    )
    assert f"update broker config success, {master}" in out, out
    assert broker_config(rmq, tmp_path, ns, master)["brokerPermission"] == "4"
    out = rmq.mqadmin(
        tmp_path, "updateBrokerConfig", "-b", master, "-k", "brokerPermission", "-v", "6", "-n", ns
    )
    assert f"update broker config success, {master}" in out, out

    out = rmq.mqadmin(
        tmp_path, "updateBrokerConfig", "-b", master, "-k", "listenPort", "-v", "1", "-n", ns
    )
    assert "listenPort may not change while the broker runs" in out, out
    assert broker_config(rmq, tmp_path, ns, master)["listenPort"] == "0"


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_creates_and_deletes_groups_and_topics(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    group, topic = f"ops-{tag(version)}", f"Ops{tag(version)}"
    with Admin(ns) as admin:
        out = rmq.mqadmin(
            tmp_path, "updateSubGroup", "-b", master, "-g", group, "-r", "3", "-n", ns
        )
        assert f"create subscription group to {master} success." in out, out
        assert group in admin.groups()
        out = rmq.mqadmin(tmp_path, "deleteSubGroup", "-b", master, "-g", group, "-n", ns)
        assert f"delete subscription group [{group}] from broker [{master}]" in out, out
        assert group not in admin.groups()

        out = rmq.mqadmin(tmp_path, "updateTopic", "-b", master, "-t", topic, "-n", ns)
        assert f"create topic to {master} success." in out, out
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
        out = rmq.mqadmin(tmp_path, "deleteTopic", "-t", topic, "-c", "DefaultCluster", "-n", ns)
        assert f"delete topic [{topic}] from cluster [DefaultCluster] success." in out, out
        assert f"delete topic [{topic}] from NameServer success." in out, out
        assert exceptions(out) == [], out
        assert topic not in admin.topics()
        assert admin.consumer_progress(group) == []


def test_mqadmin_sets_a_topics_message_type_and_a_bad_attribute_is_refused_by_name(
    master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """5.x's ``updateTopic -a`` (4.9 has no attributes): the broker keeps them, answers them
    in GET_TOPIC_CONFIG (``examineTopicConfig``, what ``topicStatus`` asks first), and refuses
    a value ``TopicAttributes`` does not have with a remark mqadmin prints."""
    rmq = resolve(VERSION_5)
    ns, topic = rocketha_namesrv.address, "Later540"
    update = ("updateTopic", "-b", master, "-t", topic, "-n", ns)
    out = rmq.mqadmin(tmp_path, *update, "-a", "+message.type=DELAY")
    assert f"create topic to {master} success." in out, out
    assert exceptions(out) == [], out
    with Admin(ns) as admin:
        assert admin.topic_config(master, topic)["attributes"] == {"message.type": "DELAY"}
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    out = rmq.mqadmin(tmp_path, "topicStatus", "-t", topic, "-n", ns)
    assert exceptions(out) == [], out
    assert len([line for line in out.splitlines() if line.startswith("admin-a")]) == 8, out

    out = rmq.mqadmin(tmp_path, *update, "-a", "+message.type=LATER")
    assert f"topic {topic}: attribute message.type=LATER: value is not in set" in out, out
    assert "create topic to" not in out, out
    out = rmq.mqadmin(tmp_path, *update, "-a", "+queue.type=SimpleCQ")
    assert "attempt to update an unchangeable attribute. key: queue.type" in out, out
    with Admin(ns) as admin:
        assert admin.topic_config(master, topic)["attributes"] == {"message.type": "DELAY"}


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_lists_a_groups_connections(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``consumerConnection`` and ``producerConnection``: the clients connected in a group, from
    their heartbeats, with the consumer group's subscription."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic, group = f"Conn{tag(version)}", f"conn-{tag(version)}"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=1)
        # Routed first: a consumer of a topic nobody routes yet waits for its next route check.
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    with Producer(ns, f"{group}-p") as producer:
        producer.send(Message(topic, b"x", tags="a"))
        consumer = PullConsumer(
            ns,
            group,
            topic,
            subscription="a || b",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        wait_for(lambda: consumer.poll(0.5), what="the consumer's first message")
        out = rmq.mqadmin(tmp_path, "consumerConnection", "-g", group, "-n", ns)
        assert exceptions(out) == [], out
        rows = [line.split() for line in out.splitlines() if "RUST" in line]
        assert len(rows) == 1 and rows[0][1].startswith("127.0.0.1:"), out
        subscriptions = [line.split(None, 1) for line in out.splitlines() if line.startswith(topic)]
        assert subscriptions == [[topic, "a || b"]], out
        assert "ConsumeType: CONSUME_ACTIVELY" in out and "MessageModel: CLUSTERING" in out, out

        out = rmq.mqadmin(tmp_path, "producerConnection", "-g", f"{group}-p", "-t", topic, "-n", ns)
        assert exceptions(out) == [], out
        assert len([line for line in out.splitlines() if "RUST" in line]) == 1, out
        consumer.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_consumer_status_is_relayed_to_the_consumer(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``consumerStatus`` (GET_CONSUMER_RUNNING_INFO): the broker asks the Java consumer itself
    over the consumer's own connection and hands its ``ConsumerRunningInfo`` back; a client id
    that is not connected is refused by name."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic, group = f"Status{tag(version)}", f"status-{tag(version)}"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=2)
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    with Producer(ns, f"{group}-p") as producer:
        producer.send(Message(topic, b"s"))
    member = rmq.group_member(ns, topic, group, "push", home=tmp_path / "member")
    try:
        wait_for(lambda: member.received, what="the Java consumer's first message")
        out = rmq.mqadmin(tmp_path, "consumerStatus", "-g", group, "-n", ns)
        assert exceptions(out) == [], out
        assert "Same subscription in the same group of consumer" in out, out
        assert "Rebalance OK" in out, out
        client_id = next(line.split()[1] for line in out.splitlines() if line.startswith("1 "))
        out = rmq.mqadmin(tmp_path, "consumerStatus", "-g", group, "-i", client_id, "-n", ns)
        # One of the consumer's own properties is named pullTimeDelayMillsWhenException.
        assert [e for e in exceptions(out) if "pullTimeDelayMills" not in e] == [], out
        # formatString's sections: the subscription and each of the topic's queues.
        assert "#Consumer Subscription#" in out and f"{topic}" in out, out
        # (The group's retry topic has its queue too once the consumer has rebalanced on it.)
        queues = [line for line in out.splitlines() if "ProcessQueueInfo [" in line]
        assert len([q for q in queues if q.startswith(f"{topic} ")]) == 2, out
        out = rmq.mqadmin(tmp_path, "consumerStatus", "-g", group, "-i", "nobody@0", "-n", ns)
        assert f"The Consumer <{group}> <nobody@0> not online" in out, out
    finally:
        member.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_resets_a_running_groups_offsets_and_drains_a_broker(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``resetOffsetByTime`` while our consumer runs: it reads the topic again from the start;
    ``queryMsgByUniqueKey`` with its consumption track; ``wipeWritePerm`` / ``addWritePerm``
    drain the broker of sends at the name server and undo it."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic, group = f"Reset{tag(version)}", f"reset-{tag(version)}"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=2)
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    with Producer(ns, f"{group}-p") as producer:
        sent = [producer.send(Message(topic, b"%d" % i)) for i in range(6)]
    with PullConsumer(
        ns, group, topic, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.body for m in consumer.poll(0.5)) or len(got) >= 6)
        consumer.commit_sync()
        out = rmq.mqadmin(
            tmp_path, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", "-n", ns
        )
        assert exceptions(out) == [], out
        again: list[bytes] = []
        wait_for(lambda: again.extend(m.body for m in consumer.poll(0.5)) or len(again) >= 6)
        assert sorted(again) == sorted(got), out

        out = rmq.mqadmin(
            tmp_path, "queryMsgByUniqueKey", "-t", topic, "-i", sent[2].msg_id, "-n", ns
        )
        assert exceptions(out) == [], out
        assert sent[2].msg_id in out and group in out, out

    out = rmq.mqadmin(tmp_path, "wipeWritePerm", "-b", "admin-a", "-n", ns)
    assert f"wipe write perm of broker[admin-a] in name server[{ns}] OK" in out, out
    route = rmq.mqadmin(tmp_path, "topicRoute", "-t", topic, "-n", ns)
    assert '"perm":4' in "".join(route.split()), route
    out = rmq.mqadmin(tmp_path, "addWritePerm", "-b", "admin-a", "-n", ns)
    assert exceptions(out) == [] and "OK" in out, out
    route = rmq.mqadmin(tmp_path, "topicRoute", "-t", topic, "-n", ns)
    assert '"perm":6' in "".join(route.split()), route


def fields(out: str) -> dict[str, str]:
    """``queryMsgById`` / ``queryMsgByOffset``'s ``Name:   value`` lines."""
    pairs = (line.partition(":") for line in out.splitlines() if re.match(r"^[A-Z][\w ]*:  ", line))
    return {k: v.strip() for k, _, v in pairs}


def printed(out: str) -> list[tuple[int, int, str, str]]:
    """The ``MSGID: ... BODY: ...`` lines of ``printMsg``, ``printMsgByQueue`` and
    ``consumeMessage``: (queue id, queue offset, unique key, body) each."""
    rows = []
    for line in out.splitlines():
        m = re.match(r"MSGID: (\w+) .*queueId=(\d+), .*queueOffset=(\d+),.* BODY: (.*)$", line)
        if m:
            rows.append((int(m[2]), int(m[3]), m[1], m[4]))
    return rows


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_reads_and_sends_a_topics_messages(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``topicClusterList``, ``allocateMQ``, ``queryMsgById``, ``queryMsgByOffset``,
    ``printMsg``, ``sendMessage``, ``printMsgByQueue`` and ``consumeMessage`` on a topic whose
    messages we sent: each finds them where the producer was told they landed, bodies and
    all."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"Read{tag(version)}"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=4)
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    with Producer(ns, f"read-{tag(version)}-p") as producer:
        sent = {
            f"body-{i}": producer.send(Message(topic, b"body-%d" % i, tags="t", keys=f"k{i}"))
            for i in range(8)
        }
    where = {(r.queue_id, r.queue_offset): (r.msg_id, body) for body, r in sent.items()}
    assert len(where) == 8

    out = rmq.mqadmin(tmp_path, "topicClusterList", "-t", topic, "-n", ns)
    assert "DefaultCluster" in out.splitlines(), out

    out = rmq.mqadmin(tmp_path, "allocateMQ", "-t", topic, "-i", "c1,c2", "-n", ns)
    line = next((x for x in out.splitlines() if x.startswith('{"result"')), None)
    assert line is not None, out
    allocated = json.loads(line)["result"]
    assert sorted(allocated) == ["c1", "c2"], out
    assert all(len(queues) == 2 for queues in allocated.values()), out
    queues = [q for qs in allocated.values() for q in qs]
    assert {(q["topic"], q["brokerName"]) for q in queues} == {(topic, "admin-a")}, out
    assert sorted(q["queueId"] for q in queues) == [0, 1, 2, 3], out

    # By the broker's offset message id: the store host and commit log offset.
    one = sent["body-5"]
    by_topic = ["-t", topic] if version != VERSIONS[0] else []  # 5.x asks for the topic
    out = rmq.mqadmin(tmp_path, "queryMsgById", "-i", one.offset_msg_id, *by_topic, "-n", ns)
    assert exceptions(out) == [], out
    found = fields(out)
    assert found["OffsetID"] == one.offset_msg_id and found["Topic"] == topic, out
    assert (found["Queue ID"], found["Queue Offset"]) == (
        str(one.queue_id),
        str(one.queue_offset),
    ), out
    assert (found["Tags"], found["Keys"]) == ("[t]", "[k5]"), out
    assert f"UNIQ_KEY={one.msg_id}" in found["Properties"], out
    assert Path(found["Message Body Path"]).read_bytes() == b"body-5", out

    out = rmq.mqadmin(
        tmp_path,
        "queryMsgByOffset",
        "-t",
        topic,
        "-b",
        "admin-a",
        "-i",
        str(one.queue_id),
        "-o",
        str(one.queue_offset),
        "-n",
        ns,
    )
    assert exceptions(out) == [], out
    found = fields(out)
    assert found["OffsetID"] == one.offset_msg_id and found["Keys"] == "[k5]", out

    out = rmq.mqadmin(tmp_path, "printMsg", "-t", topic, "-c", "UTF-8", "-n", ns)
    assert exceptions(out) == [], out
    rows = printed(out)
    assert sorted(rows) == sorted((q, o, key, body) for (q, o), (key, body) in where.items()), out
    heads = re.findall(
        r"^minOffset=0, maxOffset=(\d+), MessageQueue \[.*queueId=(\d+)\]", out, re.M
    )
    assert sorted((int(q), int(n)) for n, q in heads) == [
        (q, sum(1 for qq, _ in where if qq == q)) for q in range(4)
    ], out

    # Into queue 1, then read back from it.
    out = rmq.mqadmin(
        tmp_path,
        "sendMessage",
        "-t",
        topic,
        "-p",
        "from-mqadmin",
        "-k",
        "mk",
        "-c",
        "mt",
        "-b",
        "admin-a",
        "-i",
        "1",
        "-n",
        ns,
    )
    result = [line.split() for line in out.splitlines() if line.startswith("admin-a")]
    assert len(result) == 1, out
    # SLAVE_NOT_AVAILABLE: stored, by a SYNC_MASTER without a slave.
    assert result[0][2] in ("SEND_OK", "SLAVE_NOT_AVAILABLE") and result[0][1] == "1", out
    sent_id = result[0][3]

    out = rmq.mqadmin(
        tmp_path,
        "printMsgByQueue",
        *("-t", topic, "-a", "admin-a", "-i", "1", "-c", "UTF-8"),
        *("-p", "true", "-d", "true", "-f", "true"),
        "-n",
        ns,
    )
    assert exceptions(out) == [], out
    in_queue_1 = sorted((o, key, body) for (q, o), (key, body) in where.items() if q == 1)
    assert [r[1:] for r in printed(out)] == [
        *in_queue_1,
        (len(in_queue_1), sent_id, "from-mqadmin"),
    ], out
    counts = dict(re.findall(r"^Tag: (\S+)\s+Count: (\d+)$", out, re.M))
    assert counts == {"t": str(len(in_queue_1)), "mt": "1"}, out

    out = rmq.mqadmin(
        tmp_path,
        "consumeMessage",
        *("-t", topic, "-b", "admin-a", "-i", "1", "-o", "0", "-c", "2"),
        "-n",
        ns,
    )
    assert "Consume ok" in out and exceptions(out) == [], out
    assert [r[:2] + r[3:] for r in printed(out)] == [
        (1, 0, where[1, 0][1]),
        (1, 1, where[1, 1][1]),
    ], out


def cluster_rt_first_round(rmq: RocketMQ, home: Path, ns: str) -> str:
    """``clusterRT`` sends and prints one round per interval forever: none of its options
    (``-a`` messages a round, ``-i`` seconds between rounds) ends it. Runs it (as
    ``RocketMQ.mqadmin`` does) until the first round's row is printed, then kills it; a stuck
    one is killed after two minutes."""
    args = ("clusterRT", "-a", "5", "-s", "64", "-i", "1", "-c", "DefaultCluster", "-n", ns)
    proc = _children.spawn(
        rmq.mqadmin_command(home, *args),
        cwd=home,
        env=rocketmq_home(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    guard = threading.Timer(120.0, _children.kill, [proc])
    guard.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("DefaultCluster"):
                break
    finally:
        guard.cancel()
        _children.kill(proc)
        assert proc.stdout is not None
        proc.stdout.close()
    (home / "mqadmin-clusterRT.out").write_text("".join(lines))
    return "".join(lines)


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_moves_a_groups_offsets_and_measures_sends(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``getConsumerConfig``, ``cloneGroupOffset`` (into a group made first: it must exist),
    ``checkMsgSendRT``, ``skipAccumulatedMessage``, ``updateTopicPerm``, ``clusterRT`` and
    ``brokerConsumeStats`` (refused: rocketha does not serve request code 317)."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic, group = f"Move{tag(version)}", f"move-{tag(version)}"
    clone = f"{group}-clone"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=2)
        admin.create_group(group, retry_max_times=5, retry_queue_nums=1)
        admin.create_group(clone)
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
        with Producer(ns, f"{group}-p") as producer:
            for i in range(6):
                producer.send(Message(topic, b"%d" % i))
        with PullConsumer(
            ns, group, topic, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        ) as consumer:
            got: list[bytes] = []
            wait_for(lambda: got.extend(m.body for m in consumer.poll(0.5)) or len(got) >= 6)
            consumer.commit_sync()

        def progress(g: str) -> dict[int, tuple[int, int]]:
            return {
                q.queue_id: (q.consumer_offset, q.broker_offset) for q in admin.consumer_progress(g)
            }

        before = progress(group)
        assert sorted(before) == [0, 1] and sum(b for _, b in before.values()) == 6, before
        assert all(c == b for c, b in before.values()), before

        out = rmq.mqadmin(tmp_path, "getConsumerConfig", "-g", group, "-n", ns)
        assert exceptions(out) == [], out
        config = {
            k.strip(): v.strip()
            for k, _, v in (x.partition("=") for x in out.splitlines() if "=  " in x)
        }
        assert config["groupName"] == group, out
        assert (config["retryMaxTimes"], config["retryQueueNums"]) == ("5", "1"), out

        out = rmq.mqadmin(
            tmp_path, "cloneGroupOffset", "-s", group, "-d", clone, "-t", topic, "-n", ns
        )
        assert (
            f"clone group offset success. srcGroup[{group}], destGroup=[{clone}], topic[{topic}]"
            in out
        ), out
        assert progress(clone) == before

        out = rmq.mqadmin(tmp_path, "checkMsgSendRT", "-t", topic, "-a", "3", "-s", "64", "-n", ns)
        rows = [line.split() for line in out.splitlines() if line.startswith("admin-a")]
        assert len(rows) == 3 and all(r[2] == "true" and r[1] in ("0", "1") for r in rows), out
        assert "Avg RT:" in out, out
        heads = {q: b for q, (_, b) in progress(group).items()}
        assert sum(heads.values()) == 9, heads  # its three messages were stored

        out = rmq.mqadmin(tmp_path, "skipAccumulatedMessage", "-g", group, "-t", topic, "-n", ns)
        assert exceptions(out) == [], out
        skipped = {
            int(r[1]): int(r[2])
            for r in (x.split() for x in out.splitlines())
            if r[:1] == ["admin-a"]
        }
        assert skipped == heads, out
        assert progress(group) == {q: (b, b) for q, b in heads.items()}
        assert progress(clone) == {q: (c, heads[q]) for q, (c, _) in before.items()}  # its own

        out = rmq.mqadmin(
            tmp_path, "updateTopicPerm", "-t", topic, "-b", master, "-p", "4", "-n", ns
        )
        assert f"update topic perm from 6 to 4 in {master} success." in out, out
        route = rmq.mqadmin(tmp_path, "topicRoute", "-t", topic, "-n", ns)
        assert '"perm":4' in "".join(route.split()), route

    out = cluster_rt_first_round(rmq, tmp_path, ns)
    row = [line.split() for line in out.splitlines() if line.startswith("DefaultCluster")]
    assert len(row) == 1 and row[0][:2] == ["DefaultCluster", "admin-a"], out
    assert (row[0][3], row[0][4]) == ("5", "0"), out  # -a 5: five sent, none failed

    out = rmq.mqadmin(tmp_path, "brokerConsumeStats", "-b", master, "-n", ns)
    assert "request type 317 not supported" in out, out


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_reads_a_consume_queue_and_keeps_kv_config(
    version: str, master: str, rocketha_namesrv: RochaNamesrv, tmp_path: Path
) -> None:
    """``queryCq``: a window of a queue's entries (commit log offset, size, tag hash) with the
    queue's bounds; ``updateKvConfig`` / ``deleteKvConfig`` on the name server, read back
    over the wire."""
    rmq = resolve(version)
    ns = rocketha_namesrv.address
    topic = f"Cq{tag(version)}"
    with Admin(ns) as admin:
        admin.create_topic(topic, queues=1)
        wait_for(lambda: topic in admin.topics(), what=f"the route of {topic}")
    with Producer(ns, f"cq-{tag(version)}") as producer:
        sent = [producer.send(Message(topic, b"%d" % i)) for i in range(3)]
    out = rmq.mqadmin(tmp_path, "queryCq", "-t", topic, "-q", "0", "-i", "1", "-c", "2", "-n", ns)
    assert exceptions(out) == [], out
    assert "max: 3, min: 0" in out, out
    assert [line for line in out.splitlines() if line.startswith("idx: ")] == [
        "idx: 1",
        "idx: 2",
    ], out
    assert f"physicOffset={int(sent[1].offset_msg_id[-16:], 16)}" in out, out

    key = ["-s", f"ns-{tag(version)}", "-k", "Orders"]
    out = rmq.mqadmin(tmp_path, "updateKvConfig", *key, "-v", "broker-a:8", "-n", ns)
    assert "create or update kv config to namespace success." in out, out
    entry = {"namespace": f"ns-{tag(version)}", "key": "Orders"}
    sock = RemotingSocket(ns)
    assert sock.invoke(GET_KV_CONFIG, entry)[0]["extFields"]["value"] == "broker-a:8"
    out = rmq.mqadmin(tmp_path, "deleteKvConfig", *key, "-n", ns)
    assert "delete kv config from namespace success." in out, out
    assert sock.invoke(GET_KV_CONFIG, entry)[0]["code"] == QUERY_NOT_FOUND
    sock.close()
