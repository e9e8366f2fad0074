"""Hostile peers on the HA port: garbage, impossible offsets, connection floods, a slow-loris.
The master keeps serving its healthy slave, logs every bad peer with a reason, and returns to
its baseline connection count and memory."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
from pathlib import Path

import pytest
from common import HA_TIMERS, FaultReport, converges, is_log_prefix
from helpers import SEGMENT, same_log, start_slave, wait_for
from rocketha import Broker, BrokerConfig, Message

#: Memory the attack may leave behind: allocator slack and logging, not per-peer buffers.
RSS_SLACK = 64 << 20


def rss() -> int:
    """Resident memory of this process, which hosts the master."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class Peer:
    """One hostile connection; remembers its address as the master sees it."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        host, local_port = self.sock.getsockname()
        self.address = f"{host}:{local_port}"

    def send(self, payload: bytes) -> None:
        # The master may close first: exactly what it should do.
        with contextlib.suppress(OSError):
            self.sock.sendall(payload)

    def close(self) -> None:
        self.sock.close()


def slow_loris(port: int, stop: threading.Event, out: list[Peer]) -> None:
    """Connects and sends one byte a second until told to stop."""
    peer = Peer(port)
    out.append(peer)
    while not stop.wait(1.0):
        peer.send(b"\x00")
    peer.close()


def test_bad_peers_on_the_ha_port(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, long_run: bool, fault_report: FaultReport
) -> None:
    caplog.set_level(logging.INFO, logger="rocketha.ha")
    config = BrokerConfig(
        broker_role="ASYNC_MASTER",
        store_path_root_dir=str(tmp_path / "master"),
        mapped_file_size_commit_log=SEGMENT,
        ha_listen_address="127.0.0.1",
        ha_listen_port=0,
        listen_port=0,
        ha_send_heartbeat_interval=HA_TIMERS["haSendHeartbeatInterval"],
        ha_housekeeping_interval=HA_TIMERS["haHousekeepingInterval"],
    )
    stop_loris = threading.Event()
    loris: list[Peer] = []
    peers: list[Peer] = []
    with Broker(config) as master:
        assert master.ha is not None
        ha = master.ha
        port = master.ha_listen_port
        slave = start_slave(tmp_path, "s", master.ha_address, **HA_TIMERS)
        loris_thread = threading.Thread(
            target=slow_loris, args=(port, stop_loris, loris), name="loris", daemon=True
        )
        try:
            master.put_batch([Message("T", os.urandom(200)) for _ in range(2000)])
            target = master.max_offset
            wait_for(lambda: target in ha.slave_ack_offsets(), 60, "the healthy slave")
            baseline_conns = len(ha.connections())
            baseline_rss = rss()

            def closes() -> dict[str, str]:
                return {
                    r.args[0]: r.args[2]
                    for r in caplog.records
                    if isinstance(r.args, tuple) and len(r.args) == 3 and r.args[1] == "SHUTDOWN"
                }

            loris_thread.start()
            # The master accepted the loris: it is a live connection, or (on a loaded machine,
            # where a byte a second can miss haHousekeepingInterval) already closed by it.
            wait_for(
                lambda: (
                    loris
                    and (
                        loris[0].address in {c["address"] for c in ha.connections()}
                        or loris[0].address in closes()
                    )
                ),
                60,
                "the master to accept the loris",
            )
            rapid: list[str] = []
            for round_ in range(10 if long_run else 2):
                payloads = [
                    os.urandom(64),
                    os.urandom(1 << 20),
                    struct.pack(">q", -1),
                    struct.pack(">q", -(1 << 63)),
                    struct.pack(">q", (1 << 63) - 1),
                    # A master -> slave header sent the wrong way, with an oversized body size.
                    struct.pack(">qi", 0, 0x7FFFFFFF) + b"\x00" * 4,
                    struct.pack(">qi", 0, -1) + b"\x00" * 4,
                    struct.pack(">q", master.max_offset + 1),
                    struct.pack(">q", master.max_offset + (1 << 40)),
                ]
                for payload in payloads:
                    peer = Peer(port)
                    peer.send(payload)
                    peers.append(peer)
                for _ in range(1000 if round_ == 0 else 100):
                    peer = Peer(port)
                    peer.close()
                    rapid.append(peer.address)
                # The healthy slave keeps receiving while all this goes on.
                master.put_batch([Message("T", os.urandom(200)) for _ in range(500)])
            target = master.max_offset
            wait_for(lambda: target in ha.slave_ack_offsets(), 60, "the slave under attack")

            stop_loris.set()
            loris_thread.join(timeout=30)
            for peer in peers:
                peer.close()
            wait_for(
                lambda: len(ha.connections()) == baseline_conns, 60, "connections back to baseline"
            )
            grown = rss() - baseline_rss
            everyone = [*rapid, *(p.address for p in [*peers, *loris])]
            # Every hostile connection was closed with a logged reason; the event pump logs a
            # close a moment after the connection is gone, so give it that moment.
            converges(lambda: all(closes().get(a) for a in everyone), 30, "every close logged")
            closed = closes()
            unexplained = [a for a in everyone if not closed.get(a)]
            refused = [closed.get(p.address, "") for p in peers]
        finally:
            stop_loris.set()
            for peer in [*peers, *loris]:
                peer.close()
            assert slave.stop() == 0
    converged = same_log(tmp_path / "master", tmp_path / "s")
    fault_report.trial(
        "d. bad peers on the HA port",
        corrupt=not is_log_prefix(tmp_path / "s", tmp_path / "master"),
        converged=converged,
    )
    assert converged
    assert not unexplained, f"bad peers closed without a logged reason: {unexplained[:5]}"
    assert any("negative" in r for r in refused)
    assert any("beyond the master's max offset" in r for r in refused)
    assert grown < RSS_SLACK, f"RSS grew by {grown >> 20} MiB"


@pytest.mark.faults
def test_a_slave_pointed_at_something_else_says_what_it_saw(tmp_path: Path) -> None:
    """haMasterAddress naming an HTTP server, which says nothing until it gets a request line:
    within the housekeeping interval the slave drops it and its status asks whether that is an
    HA port, instead of showing TRANSFER forever."""
    import http.server

    http_server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), http.server.BaseHTTPRequestHandler
    )
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{http_server.server_port}"
    config = BrokerConfig(
        broker_role="SLAVE",
        broker_id=1,
        store_path_root_dir=str(tmp_path / "slave"),
        mapped_file_size_commit_log=SEGMENT,
        ha_master_address=address,
        listen_port=0,
        ha_send_heartbeat_interval=HA_TIMERS["haSendHeartbeatInterval"],
        ha_housekeeping_interval=HA_TIMERS["haHousekeepingInterval"],
    )
    try:
        with Broker(config) as slave:
            error = wait_for(
                lambda: slave.ha_status()["last_error"], 60, "the slave to give up on it"
            )
            assert address in error["reason"] and "HA port" in error["reason"], error
    finally:
        http_server.shutdown()
        http_server.server_close()
