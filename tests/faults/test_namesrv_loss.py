"""Name server loss (issue 15): with one of two name servers gone a producer carries on through
the other; with both gone it keeps sending on the routes it has; when one returns, the broker
registers with it again."""

from __future__ import annotations

from pathlib import Path

import pytest
import rocketha.client
from common import FaultReport
from helpers import SEGMENT, routed, wait_for
from rocketha import Broker, BrokerConfig, Message, NameServer, Producer, SendStatus


@pytest.mark.faults
def test_producers_outlive_their_name_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault_report: FaultReport
) -> None:
    first, second = NameServer("127.0.0.1:0").start(), NameServer("127.0.0.1:0").start()
    addrs = [first.listen_address, second.listen_address]
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path / "broker"),
        mapped_file_size_commit_log=SEGMENT,
        listen_port=0,
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
        namesrv_addr=";".join(addrs),
        register_name_server_period=200,
    )
    returned = None
    try:
        with Broker(config) as broker, Producer(";".join(addrs), "survivor") as producer:

            def send(topic: str) -> SendStatus:
                return producer.send(Message(topic, b"x")).status

            assert send("Before") is SendStatus.SEND_OK
            wait_for(lambda: routed(addrs[1], "Before"), 60, "the topic on both name servers")
            # Sent through the TBW102 template first; now through the topic's own route.
            assert send("Before") is SendStatus.SEND_OK
            first.shutdown()
            # A topic never looked up needs a name server: the second one answers.
            assert send("AfterFirst") is SendStatus.SEND_OK
            wait_for(lambda: routed(addrs[1], "AfterFirst"), 60, "AfterFirst's own route")
            assert send("AfterFirst") is SendStatus.SEND_OK
            second.shutdown()
            # Every send now looks its route up again, and no name server answers: the
            # cached routes keep working.
            monkeypatch.setattr(rocketha.client, "_ROUTE_TTL", 0.0)
            assert [send("Before") for _ in range(5)] == [SendStatus.SEND_OK] * 5
            assert send("AfterFirst") is SendStatus.SEND_OK
            with pytest.raises(rocketha.MQClientError, match="no name server answered"):
                send("NeverSeen")
            # One comes back on its old address: the broker registers with it again.
            returned = NameServer(addrs[0]).start()
            wait_for(lambda: routed(addrs[0], "AfterFirst"), 60, "the broker's registration")
            assert send("NeverSeenBefore") is SendStatus.SEND_OK
            stored = {m.topic for m in broker.messages()}
    finally:
        for ns in (first, second, returned):
            if ns is not None:
                ns.shutdown()
    fault_report.trial("f. name servers lost", converged=True)
    assert {"Before", "AfterFirst", "NeverSeenBefore"} <= stored
