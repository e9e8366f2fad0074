"""Delay levels and send-back on a rocketha broker process, across a SIGKILL (issue 26):

- messages waiting for their level, and retries a consumer sent back, are all delivered by the
  master restarted on its store: none lost (a repeat is allowed: at least once), none before
  its level's delay;
- bad send-backs get RocketMQ's codes and a remark naming the problem, and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    RemotingSocket,
    RochaNamesrv,
    routed,
    spawn_rocketha_namesrv,
    start_master,
    wait_for,
)
from rocketha import ConsumeFromWhere, Message, MessageExt, Producer, PullConsumer

#: Level 1 is 1 s; levels 3 and up (a first retry's) are 3 s.
LEVELS = "1s 1s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s 3s"
CONSUMER_SEND_MSG_BACK = 36


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[RochaNamesrv]:
    with spawn_rocketha_namesrv(tmp_path / "namesrv.log") as ns:
        yield ns


def poll_until(consumer: PullConsumer, done: object, got: list[MessageExt], what: str) -> None:
    def more() -> bool:
        got.extend(consumer.poll(0.5))
        return bool(done(got))  # type: ignore[operator]

    wait_for(more, timeout=60, what=what)


def test_delayed_messages_and_retries_survive_a_sigkill_of_the_master(
    tmp_path: Path, namesrv: RochaNamesrv
) -> None:
    ns = namesrv.address
    keys = {"brokerRole": "ASYNC_MASTER", "messageDelayLevel": LEVELS}
    master = start_master(tmp_path, "later", ns, **keys)
    topic, group = "Later", "later-group"
    retry = f"%RETRY%{group}"
    try:
        with Producer(ns, "later-producer") as producer:
            early = [f"early-{i}".encode() for i in range(10)]
            for body in early:
                producer.send(Message(topic, body), delay_level=1)
            plain = [f"plain-{i}".encode() for i in range(10)]
            for body in plain:
                producer.send(Message(topic, body))
            wait_for(lambda: routed(ns, topic), what="the route")
            with PullConsumer(
                ns,
                group,
                [topic],
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ) as consumer:
                got: list[MessageExt] = []
                want = set(early) | set(plain)
                poll_until(consumer, lambda g: want <= {m.body for m in g}, got, "the first 20")
                for m in got:
                    if m.body in plain:
                        consumer.send_back(m)  # level 3 + 0: 3 s
            delayed = [f"delayed-{i}".encode() for i in range(30)]
            for body in delayed:
                producer.send(Message(topic, body), delay_level=3)
        # Level 1 delivered (its offset maybe not yet written), levels 3 still waiting.
        master.kill()
        port = str(master.started["listen_address"]).rsplit(":", 1)[1]
        master = start_master(tmp_path, "later", ns, listenPort=port, **keys)
        wait_for(lambda: routed(ns, retry), what=f"the route of {retry}")
        with PullConsumer(
            ns,
            "later-audit",
            [topic, retry],
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        ) as audit:
            seen: list[MessageExt] = []
            want = set(delayed) | set(plain) | set(early)
            poll_until(
                audit,
                lambda g: (
                    want <= {m.body for m in g if m.topic == topic}
                    and set(plain) <= {m.body for m in g if m.topic == retry}
                ),
                seen,
                "every delayed message and every retry after the restart",
            )
    finally:
        master.kill()
    for m in seen:
        if m.body in delayed and m.topic == topic:
            # Delivered no sooner than its level's 3 s after the producer sent it.
            assert m.store_timestamp - m.born_timestamp >= 3000 - 50, m
    retried = [m for m in seen if m.topic == retry]
    assert {m.reconsume_times for m in retried} == {1}
    assert {m.properties.get("RETRY_TOPIC") for m in retried} == {topic}


def send_back_request(
    sock: RemotingSocket, group: str, offset: int, msg_id: str
) -> dict[str, object]:
    """CONSUMER_SEND_MSG_BACK of the message at commit log ``offset`` for ``group``."""
    fields = {
        "offset": str(offset),
        "group": group,
        "delayLevel": "0",
        "originMsgId": msg_id,
        "originTopic": "Back",
        "unitMode": "false",
        "maxReconsumeTimes": "16",
    }
    response, _ = sock.invoke(CONSUMER_SEND_MSG_BACK, fields)
    return response


@pytest.mark.parametrize("auto_create_group", [True, False])
def test_bad_send_backs_are_refused_with_a_reason_and_store_nothing(
    tmp_path: Path, namesrv: RochaNamesrv, auto_create_group: bool
) -> None:
    master = start_master(
        tmp_path,
        "back",
        namesrv.address,
        brokerRole="ASYNC_MASTER",
        autoCreateSubscriptionGroup=auto_create_group,
    )
    sock = RemotingSocket(str(master.started["listen_address"]))
    try:
        with Producer(namesrv.address, "back-producer") as producer:
            sent = producer.send(Message("Back", b"x"))
        offset = int(sent.offset_msg_id[16:], 16)
        cases = [(offset + 1, "look message by offset failed"), (1 << 40, "no message starts")]
        if not auto_create_group:
            cases = [(offset, "subscription group not exist, back-group")]
        for at, needle in cases:
            refused = send_back_request(sock, "back-group", at, sent.msg_id)
            assert refused["code"] == (1 if auto_create_group else 26), refused
            assert needle in str(refused.get("remark")), refused
        # Nothing was stored: no dead letter, and no retry topic without a group.
        assert not routed(namesrv.address, "%DLQ%back-group")
        if not auto_create_group:
            assert not routed(namesrv.address, "%RETRY%back-group")
    finally:
        sock.close()
        master.kill()
