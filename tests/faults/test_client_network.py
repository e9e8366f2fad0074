"""Network faults between a producer and the broker's client port (issue 15), through the fault
proxy: answers split at arbitrary bytes or delayed must come back right, and a send whose
answer is cut off or stalled past its timeout must be reported as unknown (it may be stored),
never as failed and never as a wrong answer."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from common import FaultReport
from helpers import SEGMENT
from proxy import CutAfter, Delay, Fault, FaultProxy, Rechunk, StallAfter
from rocketha import Broker, BrokerConfig, Message, SendStatusUnknownError
from rocketha._core import MQClientAPI

SUCCESS = 0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path / "broker"),
        mapped_file_size_commit_log=SEGMENT,
        listen_port=0,
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
    )
    with Broker(config) as b:
        yield b


def send(api: MQClientAPI, addr: str, body: bytes, timeout: float = 10.0) -> tuple[int, int]:
    """One SEND_MESSAGE_V2: the answer's code and queue offset."""
    code, _remark, _id, _queue, queue_offset, _ids, _recall = api.send_message(
        addr, [Message("Net", body)], producer_group="net", queue_id=0, timeout=timeout
    )
    return code, queue_offset


def stored_offsets(broker: Broker) -> dict[bytes, int]:
    return {m.body: m.queue_offset for m in broker.messages() if m.topic == "Net"}


@pytest.mark.faults
@pytest.mark.parametrize(
    "fault", [Rechunk(random.Random(7), largest=5), Delay(0.02)], ids=["rechunk", "delay"]
)
def test_answers_split_or_delayed_come_back_right(
    broker: Broker, fault: Fault, fault_report: FaultReport
) -> None:
    proxy = FaultProxy(broker.listen_address, fault)
    api = MQClientAPI()
    try:
        answers = {b"m%d" % i: send(api, proxy.address, b"m%d" % i) for i in range(60)}
    finally:
        api.close()
        proxy.close()
    stored = stored_offsets(broker)
    wrong = {body: a for body, a in answers.items() if a != (SUCCESS, stored.get(body))}
    fault_report.trial(f"g. client link: {type(fault).__name__}", converged=not wrong)
    assert not wrong, wrong


@pytest.mark.faults
@pytest.mark.parametrize(
    "fault, timeout",
    # Ten bytes into the answer: its length prefix and a little more.
    [(CutAfter(10), 10.0), (StallAfter(10, seconds=3.0), 1.0)],
    ids=["cut mid-answer", "stalled past the timeout"],
)
def test_a_lost_answer_is_unknown_and_the_next_send_reconnects(
    broker: Broker, fault: Fault, timeout: float, fault_report: FaultReport
) -> None:
    proxy = FaultProxy(broker.listen_address, fault)
    api = MQClientAPI()
    try:
        assert send(api, broker.listen_address, b"first")[0] == SUCCESS
        with pytest.raises(SendStatusUnknownError):
            send(api, proxy.address, b"second", timeout)
        # The next send gets a new connection (the proxy leaves that one alone).
        code, offset = send(api, proxy.address, b"third")
    finally:
        api.close()
        proxy.close()
    stored = stored_offsets(broker)
    fault_report.trial(f"g. client link: {type(fault).__name__}", converged=True)
    # The unknown one was stored: the request arrived, only its answer was lost.
    assert set(stored) == {b"first", b"second", b"third"}
    assert (code, offset) == (SUCCESS, stored[b"third"])
