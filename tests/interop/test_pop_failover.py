"""Pop across a master's SIGKILL (issue 49): what RocketMQ 5's consumers received and did not
ack comes back after the master is killed and restarted, none lost.

A rocketha name server and ASYNC_MASTER behind Apache RocketMQ 5.4.0's proxy (cluster mode);
the Java 5.x client (``Grpc5``, rocketmq-client-java) sends :data:`COUNT` messages, and a
``SimpleConsumer`` receives every one of them without acking any (its run ends before their
15 s invisible time). The master is SIGKILLed and started again on the same store and port;
a second consumer of the group then receives and acks every message: each came back from the
checkpoints the killed master had written into its revive topic (the proxy's receive of a
message whose offset the master had not yet written back to disk is a first delivery again,
which RocketMQ's at-least-once allows). Run: ``pytest -m interop
tests/interop/test_pop_failover.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import BrokerProcess, spawn_rocketha_namesrv, start_master

from benches.peers.proxy import ApacheProxy, GrpcClient
from benches.peers.rocketmq import VERSION_5, RocketMQ, Unavailable, free_ports

pytestmark = pytest.mark.interop

COUNT = 200
CLUSTER = "PopFailoverCluster"


def test_popped_messages_not_acked_come_back_after_the_masters_sigkill(tmp_path: Path) -> None:
    try:
        rmq = RocketMQ.resolve(VERSION_5)
        apache = ApacheProxy.resolve(VERSION_5)
        grpc = GrpcClient.resolve()
    except Unavailable as e:
        pytest.fail(str(e))
    # listenPort - 2 is the VIP channel: both stay the broker's across the restart.
    port = free_ports(3) + 2
    with spawn_rocketha_namesrv(tmp_path / "namesrv.log") as ns:
        master = start_master(
            tmp_path,
            "popkill",
            ns.address,
            brokerRole="ASYNC_MASTER",
            brokerClusterName=CLUSTER,
            listenPort=port,
        )
        try:
            out = rmq.mqadmin(
                tmp_path / "admin",
                *("updateTopic", "-n", ns.address, "-b", f"127.0.0.1:{port}", "-t", "PopKill"),
                *("-r", "2", "-w", "2"),
            )
            assert "success" in out, out[-3000:]
            with apache.start(tmp_path / "proxy", ns.address, CLUSTER) as proxy:
                sent = grpc.send(proxy.endpoint, "PopKill", COUNT, home=tmp_path / "send")
                assert [s.error for s in sent if s.error] == []
                ids = {s.message_id for s in sent}
                # Ends at its timeout, before the invisible time: nothing acked.
                with grpc.receiver(
                    *(proxy.endpoint, "PopKill", "popkill-group", COUNT, 10),
                    home=tmp_path / "r1",
                    unacked_first=True,
                ) as first:
                    held = first.finish(60)
                assert {r.message_id for r in held} == ids, "every message popped once"
                assert {r.attempt for r in held} == {1}
                master.kill()
                master = BrokerProcess(master.conf)
                with grpc.receiver(
                    *(proxy.endpoint, "PopKill", "popkill-group", COUNT, 180),
                    home=tmp_path / "r2",
                ) as second:
                    back = second.finish(240)
                assert {r.message_id for r in back} == ids, "none lost"
        finally:
            master.kill()
