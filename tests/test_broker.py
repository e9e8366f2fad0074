"""Brokers by role: SYNC_MASTER acknowledgement, timeouts, producers, the CLI."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import SEGMENT, BrokerProcess, RemotingSocket, start_slave, wait_for, write_conf
from rocketha import (
    Broker,
    BrokerConfig,
    ConfigError,
    Message,
    MessageStore,
    NotMasterError,
    PutStatus,
)
from rocketha import __version__ as rocketha_version


def sync_master(tmp: Path, **kw: object) -> BrokerConfig:
    return BrokerConfig(
        broker_role="SYNC_MASTER",
        store_path_root_dir=str(tmp / "master"),
        mapped_file_size_commit_log=SEGMENT,
        ha_listen_address="127.0.0.1",
        ha_listen_port=0,
        listen_port=0,
        **kw,
    )


def slave_config(tmp: Path, master: Broker, broker_id: int = 1, **kw: object) -> BrokerConfig:
    return BrokerConfig(
        broker_role="SLAVE",
        broker_id=broker_id,
        store_path_root_dir=str(tmp / f"slave{broker_id}"),
        mapped_file_size_commit_log=SEGMENT,
        ha_master_address=master.ha_address,
        listen_port=0,
        **kw,
    )


def connected(master: Broker, n: int) -> None:
    assert master.ha is not None
    wait_for(lambda: len(master.ha.slave_ack_offsets()) >= n, 30, f"{n} slaves")  # type: ignore[union-attr]


def test_put_ok_means_the_slave_already_has_it(tmp_path: Path) -> None:
    with Broker(sync_master(tmp_path)) as master, Broker(slave_config(tmp_path, master)) as slave:
        connected(master, 1)
        for i in range(300):
            r = master.put(Message("T", b"m%d" % i, queue_id=i % 2))
            assert r.status is PutStatus.PUT_OK
            # Acked means stored on the slave: it is readable there right now.
            assert slave.max_offset >= r.next_offset
            [m] = slave.store.get_messages("T", i % 2, r.queue_offset, 1)
            assert m.body == b"m%d" % i
        results = master.put_batch([Message("T", b"b%d" % i) for i in range(50)])
        assert {r.status for r in results} == {PutStatus.PUT_OK}
        assert slave.max_offset >= results[-1].next_offset
        fut = master.put_async(Message("T", b"async"))
        assert fut.result(timeout=30).status is PutStatus.PUT_OK


def test_without_slave_puts_fail_fast_and_stay_stored(tmp_path: Path) -> None:
    with Broker(sync_master(tmp_path, slave_timeout=300)) as master:
        r = master.put(Message("T", b"lonely"))
        assert r.status is PutStatus.SLAVE_NOT_AVAILABLE
        fut = master.put_async(Message("T", b"lonely too"))
        assert fut.result(timeout=5).status is PutStatus.SLAVE_NOT_AVAILABLE
        assert [m.body for m in master.messages()] == [b"lonely", b"lonely too"]
        with Broker(slave_config(tmp_path, master)) as slave:
            connected(master, 1)
            assert master.put(Message("T", b"ok")).status is PutStatus.PUT_OK
            slave_store = slave.store
        # The slave is gone: either refused at once or timed out after slaveTimeout.
        statuses = {master.put(Message("T", b"after-%d" % i)).status for i in range(5)}
        assert statuses <= {PutStatus.SLAVE_NOT_AVAILABLE, PutStatus.FLUSH_SLAVE_TIMEOUT}
        assert slave_store.closed
        assert [m.body for m in master.messages()][-5:] == [b"after-%d" % i for i in range(5)]


def test_stalled_slave_gives_flush_slave_timeout(tmp_path: Path) -> None:
    with Broker(sync_master(tmp_path, slave_timeout=200)) as master:
        slave = start_slave(tmp_path, "s", master.ha_address)
        connected(master, 1)
        slave.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            r = master.put(Message("T", b"x"))
            assert r.status is PutStatus.FLUSH_SLAVE_TIMEOUT
            assert time.monotonic() - started >= 0.2
            assert master.store.max_offset == r.next_offset
            # The GroupTransferService expires asynchronous puts the same way.
            futures = [master.put_async(Message("T", b"a%d" % i)) for i in range(20)]
            statuses = {f.result(timeout=30).status for f in futures}
            assert statuses == {PutStatus.FLUSH_SLAVE_TIMEOUT}
        finally:
            slave.proc.send_signal(signal.SIGCONT)
            slave.stop()


def test_in_sync_replicas_three_needs_both_slaves(tmp_path: Path) -> None:
    config = sync_master(tmp_path, in_sync_replicas=3, slave_timeout=300)
    with Broker(config) as master, Broker(slave_config(tmp_path, master, 1)):
        connected(master, 1)
        assert master.put(Message("T", b"one")).status is PutStatus.SLAVE_NOT_AVAILABLE
        with Broker(slave_config(tmp_path, master, 2)) as second:
            connected(master, 2)
            r = master.put(Message("T", b"two"))
            assert r.status is PutStatus.PUT_OK
            assert second.max_offset >= r.next_offset


def test_many_async_puts_resolve_through_group_transfer(tmp_path: Path) -> None:
    with Broker(sync_master(tmp_path)) as master, Broker(slave_config(tmp_path, master)) as slave:
        connected(master, 1)
        futures = [master.put_async(Message("T", b"f%d" % i)) for i in range(2000)]
        results = [f.result(timeout=60) for f in futures]
        assert {r.status for r in results} == {PutStatus.PUT_OK}
        assert slave.max_offset >= max(r.next_offset for r in results)


def test_eight_producers_all_resolve(tmp_path: Path) -> None:
    with Broker(sync_master(tmp_path)) as master, Broker(slave_config(tmp_path, master)):
        connected(master, 1)
        statuses: list[PutStatus] = []
        lock = threading.Lock()

        def produce(p: int) -> None:
            for _i in range(2000):
                s = master.put(Message(f"P{p}", b"x" * 64)).status
                with lock:
                    statuses.append(s)

        threads = [threading.Thread(target=produce, args=(p,), daemon=True) for p in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(statuses) == 16_000
        assert set(statuses) == {PutStatus.PUT_OK}


def test_sync_flush_sync_master(tmp_path: Path) -> None:
    config = sync_master(tmp_path, flush_disk_type="SYNC_FLUSH")
    with Broker(config) as master, Broker(slave_config(tmp_path, master)):
        connected(master, 1)
        r = master.put(Message("T", b"durable"))
        assert r.status is PutStatus.PUT_OK
        assert master.store.flush_stats()[2] >= r.next_offset


def test_slave_refuses_puts_and_serves_reads(tmp_path: Path) -> None:
    with Broker(sync_master(tmp_path)) as master, Broker(slave_config(tmp_path, master)) as slave:
        connected(master, 1)
        master.put(Message("T", b"x", queue_id=1))
        with pytest.raises(NotMasterError, match="SLAVE"):
            slave.put(Message("T", b"nope"))
        res = slave.get_messages("T", 1, 0, 10)
        assert [m.body for m in res.messages] == [b"x"] and res.next_begin_offset == 1
        assert slave.ha_status()["state"] == "TRANSFER"
        assert master.ha_status()["connections"][0]["lag_bytes"] == 0


def test_insecure_listen_address_is_refused(tmp_path: Path) -> None:
    # The default haListenAddress is loopback: opening it up needs a secret or the opt-in.
    conf = BrokerConfig(
        store_path_root_dir=str(tmp_path),
        ha_listen_port=0,
        listen_port=0,
        ha_listen_address="0.0.0.0",
    )
    with pytest.raises(ConfigError, match="haAllowInsecure"):
        Broker(conf).start()
    Broker(
        BrokerConfig(
            store_path_root_dir=str(tmp_path),
            ha_listen_port=0,
            listen_port=0,
            ha_listen_address="0.0.0.0",
            ha_allow_insecure=True,
        )
    ).start().shutdown()
    public = BrokerConfig(
        store_path_root_dir=str(tmp_path),
        ha_listen_port=0,
        listen_port=0,
        ha_listen_address="127.0.0.1",
        listen_address="0.0.0.0",
    )
    with pytest.raises(ConfigError, match="remotingAllowInsecure"):
        Broker(public).start()


def _status(url: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rocketha", "status", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_metrics_endpoint_and_status_cli(tmp_path: Path) -> None:
    with (
        Broker(sync_master(tmp_path, metrics_port=0)) as master,
        Broker(slave_config(tmp_path, master, metrics_port=0)) as slave,
    ):
        connected(master, 1)
        master.put(Message("T", b"x"))
        master.put_batch([Message("T", b"b%d" % i) for i in range(3)])
        assert master.put_async(Message("T", b"a")).result(timeout=30).status is PutStatus.PUT_OK
        # Loopback unless metricsAddress says otherwise.
        assert master._metrics._server.server_address[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{master._metrics.port}"
        import urllib.request

        def scrape() -> str:
            return urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()

        assert "rocketha_slave_ack_offset" in scrape() and "rocketha_max_offset" in scrape()
        # One observation per put call; put_async's lands when its future completes.
        count = 'rocketha_put_latency_seconds_count{status="PUT_OK"} 3.0'
        wait_for(lambda: count in scrape(), 10, "every put call in the latency histogram")

        state = json.loads(_status(url, "--json"))
        assert state["role"] == "SYNC_MASTER" and state["max_offset"] == master.max_offset
        (conn,) = state["connections"]
        assert conn["slave_ack_offset"] == master.max_offset and conn["lag_bytes"] == 0
        assert conn["last_ack"] is not None and conn["state"] == "TRANSFER"
        summary = _status(url)
        assert f"SYNC_MASTER: offsets 0..{master.max_offset}" in summary
        assert f"acked {master.max_offset} (0 bytes, 0.0 s behind)" in summary

        slave_url = f"http://127.0.0.1:{slave._metrics.port}"
        assert "replicating from" in _status(slave_url)
        master.shutdown()
        wait_for(
            lambda: json.loads(_status(slave_url, "--json"))["last_error"] is not None,
            60,
            "the slave to report its lost master",
        )
        summary = _status(slave_url)
        assert "not replicating from" in summary and "last error" in summary, summary


def test_status_shows_each_consumer_groups_lag(tmp_path: Path) -> None:
    """``rocketha status`` lists, per consumer group and topic, the messages its committed
    offsets leave unread on this broker (``mqadmin consumerProgress``'s Diff Total)."""
    from rocketha import ConsumeFromWhere, NameServer, Producer, PullConsumer

    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            namesrv_addr=ns.listen_address,
            metrics_port=0,
        )
        with Broker(config) as broker, Producer(ns.listen_address, "lag-producer") as producer:
            url = f"http://127.0.0.1:{broker._metrics.port}"
            for i in range(10):
                producer.send(Message("Lagging", b"%d" % i))
            with PullConsumer(
                ns.listen_address,
                "lag-group",
                ["Lagging"],
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ) as consumer:
                got: list[Any] = []
                wait_for(lambda: got.extend(consumer.poll(0.5)) or len(got) >= 10, what="ten")
                consumer.commit_sync()
            for i in range(4):
                producer.send(Message("Lagging", b"late %d" % i))
            state = json.loads(_status(url, "--json"))
            mine = [q for q in state["consumers"] if q["group"] == "lag-group"]
            assert sum(q["lag"] for q in mine) == 4 and {q["topic"] for q in mine} == {"Lagging"}
            assert sum(q["consumer_offset"] for q in mine) == 10
            assert "consumer group lag-group on Lagging: lag 4 message(s) in " in _status(url)


def test_demo_cli_exits_zero_with_summary(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocketha",
            "demo",
            "-n",
            "2000",
            "-q",
            "--json",
            "--store",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    assert summary["send_statuses"] == {"SEND_OK": 2000}
    assert summary["consumed"] == 2000
    assert (summary["duplicates"], summary["missing"]) == (0, 0)
    assert summary["consumed_from_slave"] > 0
    assert summary["consumed_from_slave_after_master_stopped"] > 0
    assert summary["replica_byte_identical"] is True
    assert summary["replica_bytes"] > 2000 * 1024


def test_demo_removes_its_temporary_store_unless_kept(tmp_path: Path) -> None:
    def demo(*extra: str) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, "-m", "rocketha", "demo", "-n", "50", "--json", *extra],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TMPDIR": str(tmp_path)},
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return dict(json.loads(out.stdout))

    assert "removed" in demo()["store"]
    # What stays is the runs' root, empty: a killed run's directory would be removed from it.
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*")] == [Path("rocketha-runs")]
    kept = Path(demo("--keep")["store"])
    assert kept.parent == tmp_path and (kept / "master" / "commitlog").is_dir()


def test_cli_version_and_log_options_after_the_subcommand(tmp_path: Path) -> None:
    def rocketha(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rocketha", *args], capture_output=True, text=True, timeout=120
        )

    assert rocketha("--version").stdout.strip() == f"rocketha {rocketha_version}"
    with MessageStore(tmp_path, mapped_file_size_commit_log=SEGMENT) as store:
        store.put(Message("T", b"x"))
    # A crash's marker: recovery warns when `repair` opens the store (it rewrites nothing here).
    outs = []
    for args in (("repair", str(tmp_path), "-v"), ("-v", "repair", str(tmp_path), "-q")):
        (tmp_path / "abort").touch()
        outs.append(rocketha(*args, "--accept-zero-body-crc"))
    assert [o.returncode for o in outs] == [0, 0], [o.stderr for o in outs]
    assert "unclean shutdown" in outs[0].stderr and outs[1].stderr == ""


def test_broker_cli_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "m.conf",
        brokerRole="ASYNC_MASTER",
        storePathRootDir=tmp_path / "m",
        mappedFileSizeCommitLog=SEGMENT,
        haListenAddress="127.0.0.1",
        haListenPort=0,
        listenPort=0,
    )
    proc = BrokerProcess(conf, "--produce-stdin", "--topic", "Lines")
    assert proc.proc.stdin is not None and proc.proc.stdout is not None
    proc.proc.stdin.write("hello\nworld\n")
    proc.proc.stdin.flush()
    assert json.loads(proc.proc.stdout.readline())["status"] == "PUT_OK"
    assert json.loads(proc.proc.stdout.readline())["status"] == "PUT_OK"
    assert (tmp_path / "m" / "abort").exists()
    assert proc.stop() == 0
    assert not (tmp_path / "m" / "abort").exists(), "a clean stop leaves no abort marker"
    with MessageStore(tmp_path / "m", mapped_file_size_commit_log=SEGMENT) as store:
        assert [m.body for m in store.messages()] == [b"hello", b"world"]


def test_produce_stdin_waits_for_a_slave_and_prints_msg_ids(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "m.conf",
        brokerRole="SYNC_MASTER",
        storePathRootDir=tmp_path / "m",
        mappedFileSizeCommitLog=SEGMENT,
        haListenAddress="127.0.0.1",
        haListenPort=0,
        listenPort=0,
    )
    alone = BrokerProcess(conf, "--produce-stdin", "--wait-for-slave", "0.2")
    assert alone.proc.wait(timeout=60) == 2
    alone._close()
    assert "--wait-for-slave: no slave connected within 0.2 s" in alone.stderr()

    master = BrokerProcess(conf, "--produce-stdin", "--wait-for-slave", "120")
    slave = None
    try:
        assert master.proc.stdin is not None and master.proc.stdout is not None
        # Typed before any slave exists: a SYNC_MASTER would answer SLAVE_NOT_AVAILABLE.
        master.proc.stdin.write("one\ntwo\n")
        master.proc.stdin.flush()
        ha = f"127.0.0.1:{master.started['ha_listen_port']}"
        slave = start_slave(tmp_path, "s", ha)
        puts = [json.loads(master.proc.stdout.readline()) for _ in range(2)]
        assert [p["status"] for p in puts] == ["PUT_OK", "PUT_OK"]
        assert all(len(p["msgId"]) == 32 for p in puts) and puts[0]["msgId"] != puts[1]["msgId"]
    finally:
        master.stop()
        if slave is not None:
            slave.stop()


def test_start_up_os_errors_are_one_line_naming_the_key_and_path(tmp_path: Path) -> None:
    """What a person mistyped is named in one line, with exit status 2, never a traceback."""
    a_file = tmp_path / "afile"
    a_file.touch()
    conf = write_conf(
        tmp_path / "b.conf",
        brokerRole="ASYNC_MASTER",
        storePathRootDir=a_file,
        listenPort=0,
        haListenPort=0,
        haListenAddress="127.0.0.1",
    )

    def rocketha(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rocketha", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
        )

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, never listening
        cases = [
            (("broker", "-c", conf), f"storePathRootDir={a_file}", "a file, not a directory"),
            (("inspect", tmp_path), str(tmp_path / "commitlog"), "not a rocketha store"),
            (("status", dead_url), dead_url, "Connection refused"),
        ]
        for args, path, reason in cases:
            out = rocketha(*args)
            assert out.returncode == 2, (args, out.stderr)
            assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
            assert path in out.stderr and reason in out.stderr, out.stderr


def test_consume_side_keys_reach_the_client_port(tmp_path: Path) -> None:
    """autoCreateSubscriptionGroup=false through the binding: a pull for an unknown group is
    refused with SUBSCRIPTION_GROUP_NOT_EXIST (26), naming it."""
    config = sync_master(tmp_path, auto_create_subscription_group=False)
    with Broker(config) as master:
        sock = RemotingSocket(master.listen_address)
        try:
            pull = {
                "consumerGroup": "unknown-group",
                "topic": "T",
                "queueId": "0",
                "queueOffset": "0",
                "maxMsgNums": "1",
                "sysFlag": "4",
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
            }
            response, _ = sock.invoke(11, pull)
        finally:
            sock.close()
    assert response["code"] == 26, response
    assert "unknown-group" in response["remark"], response
