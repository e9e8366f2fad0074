"""What a user gets wrong, or meets, on the command line (issue 24, item 7): each gets an error
that names the problem and where it came from, and nothing is left behind."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rocketha import Broker, BrokerConfig, ConfigError, Message, MQClientError, Producer
from rocketha.cli import _status_summary, _status_url
from rocketha.client import check_messages


def _conf(tmp_path: Path, text: str = "brokerName=x\n") -> Path:
    path = tmp_path / "broker.conf"
    path.write_text(text)
    return path


def rocketha(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketha", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_set_typo_names_set_not_the_file(tmp_path: Path) -> None:
    conf = _conf(tmp_path)
    r = rocketha("broker", "-c", str(conf), "--set", "listenPrt=1", "-p")
    assert r.returncode == 2
    assert "--set: unknown key 'listenPrt'; did you mean 'listenPort'?" in r.stderr
    r = rocketha("broker", "-c", str(conf), "--set", "listenPort=abc", "-p")
    assert r.returncode == 2
    assert "--set listenPort=abc: " in r.stderr and str(conf) not in r.stderr


def test_ignored_keys_are_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = _conf(tmp_path, "brokerName=x\nstorePathIndex=/x\n")
    with caplog.at_level(logging.WARNING, logger="rocketha.config"):
        BrokerConfig.load(conf)
    assert any("storePathIndex=/x" in r.getMessage() for r in caplog.records)


def test_a_minimal_conf_starts(tmp_path: Path) -> None:
    """``haListenAddress`` defaults to loopback like ``listenAddress``: no secret needed."""
    conf = BrokerConfig.load(
        _conf(tmp_path),
        {"listenPort": "0", "haListenPort": "0", "storePathRootDir": str(tmp_path / "s")},
    )
    assert conf.ha_listen_address == "127.0.0.1"
    with Broker(conf) as broker:
        assert broker.ha_listen_port > 0


def test_a_metrics_port_in_use_names_the_key_and_leaves_no_store(tmp_path: Path) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    store = tmp_path / "new" / "store"
    existing = tmp_path / "existing"
    existing.mkdir()
    try:
        for root in (store, existing):
            conf = BrokerConfig(
                listen_port=0, ha_listen_port=0, store_path_root_dir=str(root), metrics_port=port
            )
            with pytest.raises(ConfigError, match=f"metricsPort: .* 127.0.0.1:{port}: Address"):
                Broker(conf).start()
    finally:
        held.close()
    assert not (tmp_path / "new").exists(), "the failed start's own directory is removed"
    assert existing.is_dir(), "a directory that was there before is kept"


def test_the_client_refuses_bad_topics_and_bodies_before_sending() -> None:
    # No name server at that address: a message that got past the checks would fail there.
    producer = Producer("127.0.0.1:1")
    try:
        for msg, problem in [
            (Message("bad topic!", b"x"), "contains characters other than"),
            (Message("t" * 128, b"x"), "128 characters, longer than the most, 127"),
            (Message("TBW102", b"x"), "system topic"),
            (Message("T", b""), "body is empty"),
            (Message("T", b"x" * (5 << 20)), "5242880 bytes, over the most, 4194304"),
        ]:
            with pytest.raises(MQClientError, match=problem):
                producer.send(msg)
    finally:
        producer.shutdown()
    check_messages([Message("%RETRY%g|a-b_c", b"x")])


def test_produce_goes_on_after_a_failed_line(tmp_path: Path) -> None:
    """Each line's failure is reported and the rest of stdin still read; exit 1."""
    r = rocketha("produce", "--namesrv", "127.0.0.1:1", "--topic", "T", "--json", stdin="a\n\nb\n")
    assert r.returncode == 1, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [line["line"] for line in lines] == [1, 2, 3]
    assert all("error" in line for line in lines)
    assert "line 2: MQClientError: topic T: the message body is empty" in r.stderr
    r = rocketha("produce", "--namesrv", "127.0.0.1:1", "--topic", "bad topic!", stdin="a\n")
    assert r.returncode == 2 and "contains characters other than" in r.stderr


def test_status_takes_host_port_and_a_caught_up_slave_is_0_s_behind() -> None:
    assert _status_url("127.0.0.1:18911") == "http://127.0.0.1:18911/status"
    assert _status_url("http://h:1/metrics") == "http://h:1/status"
    status = {
        "time": 10.0,
        "broker_name": "b",
        "broker_id": 0,
        "role": "SYNC_MASTER",
        "min_offset": 0,
        "max_offset": 100,
        "push2slave_max_offset": 100,
        "connections": [
            {
                "slave_id": 1,
                "address": "127.0.0.1:5",
                "state": "TRANSFER",
                "since": 9.0,
                "slave_ack_offset": 100,
                "lag_bytes": 0,
                "lag_seconds": None,
                "last_ack": 9.5,
            }
        ],
    }
    assert "(0 bytes, 0.0 s behind)" in _status_summary(status)


def test_bench_help_outside_a_checkout_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ROCKETHA_BENCHES"}
    r = subprocess.run(
        [sys.executable, "-m", "rocketha", "bench", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "no benches/" in r.stderr


def test_every_option_has_help() -> None:
    from rocketha.cli import _parser

    parser = _parser()
    subparsers = next(a for a in parser._actions if a.choices and a.dest == "command")
    missing = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, sub in subparsers.choices.items()
        for action in sub._actions
        if action.help is None
    ]
    assert not missing, missing


def test_put_and_send_status_print_bare_names() -> None:
    from rocketha import PutStatus, SendStatus

    assert (str(SendStatus.SEND_OK), str(PutStatus.PUT_OK)) == ("SEND_OK", "PUT_OK")
    assert f"{SendStatus.FLUSH_SLAVE_TIMEOUT}" == "FLUSH_SLAVE_TIMEOUT"


def test_broker_produce_stdin_stops_at_the_end_of_stdin(tmp_path: Path) -> None:
    conf = _conf(tmp_path)
    store = tmp_path / "s"
    r = rocketha(
        "broker",
        "-c",
        str(conf),
        *("--set", "listenPort=0", "--set", "haListenPort=0", "--set", f"storePathRootDir={store}"),
        "--produce-stdin",
        stdin="one\ntwo\n",
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [line.get("status") for line in lines[1:3]] == ["PUT_OK", "PUT_OK"]
    assert lines[-1] == {"stopped": True}
    assert not (store / "abort").exists(), "stopped cleanly"


def test_consume_prints_text_as_text_and_marks_binary() -> None:
    from rocketha.cli import _json_body, _printable_body

    assert _printable_body("héllo\tworld".encode()) == "héllo\tworld"
    assert _printable_body(b"\xff\x00ab") == "(binary, 4 bytes) \\xff\\x00ab"
    assert _printable_body(b"\x1b[2Jx") == "(binary, 5 bytes) \\x1b[2Jx"
    assert _json_body("é".encode()) == {"body": "é"}
    assert _json_body(b"\xff\x00") == {"body_base64": "/wA="}


def test_a_sigterm_right_after_a_sigcont_stops_a_broker(tmp_path: Path) -> None:
    """A SIGTERM sent right after a SIGCONT (a stopped broker resumed and stopped, as a
    supervisor or a test does) can reach a thread other than the main one, while the main
    thread still has the SIGCONT pending: the broker used to sleep on, ignoring it."""
    import signal

    from helpers import BrokerProcess, write_conf

    for trial in range(10):
        store = tmp_path / f"store{trial}"
        conf = write_conf(
            tmp_path / f"b{trial}.properties",
            brokerName="b",
            storePathRootDir=store,
            listenPort=0,
            haListenPort=0,
        )
        broker = BrokerProcess(conf)
        broker.proc.send_signal(signal.SIGSTOP)
        broker.proc.send_signal(signal.SIGCONT)
        broker.proc.send_signal(signal.SIGTERM)
        assert broker.wait_exit() == 0, broker.stderr()


def test_a_stop_signal_ends_a_produce_waiting_on_stdin(
    tmp_path: Path, namesrv_process: tuple[subprocess.Popen[str], str]
) -> None:
    """``rocketha produce`` reading a terminal or a pipe: SIGTERM (behind a SIGSTOP and a
    SIGCONT, the awkward case) ends the read at once, after its sends have started the
    producer's threads, and it exits 0: what it sent was sent."""
    import signal

    from helpers import start_master

    _, namesrv = namesrv_process
    broker = start_master(tmp_path, "b", namesrv, brokerRole="ASYNC_MASTER")
    try:
        for trial in range(5):
            command = ["produce", "--namesrv", namesrv, "--topic", "StopWhileReading", "--json"]
            produce = subprocess.Popen(
                [sys.executable, "-m", "rocketha", *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert produce.stdin is not None and produce.stdout is not None
            produce.stdin.write(f"line {trial}\n")
            produce.stdin.flush()
            assert json.loads(produce.stdout.readline())["status"] == "SEND_OK"
            for signum in (signal.SIGSTOP, signal.SIGCONT, signal.SIGTERM):
                produce.send_signal(signum)
            try:
                # Not communicate(): it would close stdin, and the end of stdin stops it too.
                produce.wait(timeout=30)
            except subprocess.TimeoutExpired:
                produce.kill()
                raise AssertionError(f"produce ignored SIGTERM: {produce.communicate()}") from None
            _, err = produce.communicate()
            assert produce.returncode == 0 and "Traceback" not in err, err
    finally:
        assert broker.stop() == 0
