"""The CLI as RocketMQ's users drive it, end to end, as processes on the default ports.

Inside a network namespace the test creates (``unshare -n``, loopback up) the default ports are
free whatever the host runs, and the host is untouched: ``rocketha namesrv`` with no argument
(9876, one listener), the shipped ``2m-2s-sync`` master and slave of ``broker-a`` started with
``-c`` and ``-n`` as the README shows, then ``produce``, ``consume``, ``status`` and
``inspect``. SIGTERM and SIGINT of each long-running command exit 0 with no ``FATAL`` and no
traceback, and a restarted master reports that its recovery truncated nothing.

The scenario is ``_DRIVER`` below, run as a script in the namespace; it raises
``AssertionError`` (exit 1) at the first step that does not hold, naming it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import default_ports_namespace, namespace_refusal
from rocketha import _children

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "examples" / "conf" / "2m-2s-sync"

_DRIVER = r'''
import json, os, signal, subprocess, sys, time
from pathlib import Path

data, conf = Path(sys.argv[1]), Path(sys.argv[2])
NAMESRV = "127.0.0.1:9876"
DEADLINE = 120.0  # generous: only turns a hang into a failure


def rocketha(*args, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "rocketha", *args], capture_output=True, text=True,
        timeout=DEADLINE, **kwargs,
    )


class Server:
    """A long-running command; its stdout's first JSON line says it started."""

    def __init__(self, name, *args):
        self.name = name
        self.log = data / f"{name}.log"
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rocketha", "-v", *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True,
            )
        line = self.proc.stdout.readline()
        assert line, f"{name} did not start:\n{self.log.read_text()}"
        self.started = json.loads(line)["started"]
        print(f"{name} started: {self.started}", flush=True)

    def stop(self, signum):
        """``signum`` stops it cleanly: exit 0, and nothing alarming on stderr."""
        size = self.log.stat().st_size
        self.proc.send_signal(signum)
        code = self.proc.wait(timeout=DEADLINE)
        rest = self.proc.stdout.read()
        self.proc.stdout.close()
        err = self.log.read_text()[size:]
        what = f"{self.name} after {signal.Signals(signum).name}"
        assert code == 0, f"{what}: exit {code}:\n{err}"
        for bad in ("FATAL", "Traceback"):
            assert bad not in self.log.read_text(), f"{what}: {bad} in its log:\n{err}"
        assert '{"stopped": true}' in rest, f"{what}: no stopped line: {rest!r}"
        print(f"{what}: exit 0, clean", flush=True)


def listeners(port):
    """LISTEN sockets on ``port`` in this namespace (/proc/net/tcp state 0A)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            count += state == "0A" and int(local.rsplit(":", 1)[1], 16) == port
    return count


def until(what, check):
    end = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < end, f"no {what} within {DEADLINE:g} s"
        time.sleep(0.2)


def consume_until_signal(group, signum):
    """``rocketha consume`` with no --count, stopped by ``signum`` once it printed a message."""
    log = data / f"consume-{group}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rocketha", "consume", "--namesrv", NAMESRV, "--group", group,
             "--topic", "TopicTest", "--from-beginning"],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )
    first = proc.stdout.readline()
    assert first.strip() == "1" or first.strip().isdigit(), (first, log.read_text())
    proc.send_signal(signum)
    code = proc.wait(timeout=DEADLINE)
    proc.stdout.close()
    text = log.read_text()
    name = signal.Signals(signum).name
    assert code == 0, f"consume after {name}: exit {code}:\n{text}"
    assert "FATAL" not in text and "Traceback" not in text, text
    assert "consumed" in text, text
    print(f"consume after {name}: exit 0, clean", flush=True)


namesrv = Server("namesrv", "namesrv")
assert namesrv.started["listen"] == NAMESRV, namesrv.started
assert listeners(9876) == 1, f"{listeners(9876)} listeners on 9876"

master_args = ["broker", "-c", str(conf / "broker-a.properties"), "-n", NAMESRV,
               "--set", f"storePathRootDir={data / 'broker-a'}", "--set", "metricsPort=5557"]
master = Server("broker-a", *master_args)
slave = Server(
    "broker-a-s", "broker", "-c", str(conf / "broker-a-s.properties"), "-n", NAMESRV,
    "--set", "listenPort=10921", "--set", f"storePathRootDir={data / 'broker-a-s'}",
    "--set", "metricsPort=5558",
)
assert master.started["listen_address"] == "127.0.0.1:10911", master.started
until("slave in TRANSFER", lambda: "TRANSFER" in rocketha("status", "127.0.0.1:5558").stdout)

r = rocketha("produce", "--namesrv", NAMESRV, "--topic", "TopicTest",
             input="".join(f"{i}\n" for i in range(1, 21)))
assert r.returncode == 0 and "SEND_OK 20" in r.stdout, (r.stdout, r.stderr)
r = rocketha("consume", "--namesrv", NAMESRV, "--group", "cli", "--topic", "TopicTest",
             "--from-beginning", "--count", "20")
assert r.returncode == 0, r.stderr
assert sorted(int(x) for x in r.stdout.split()) == list(range(1, 21)), r.stdout
assert "consumed 20 messages of TopicTest" in r.stderr, r.stderr
r = rocketha("status", "127.0.0.1:5557")
assert r.returncode == 0 and "TRANSFER" in r.stdout and "slave" in r.stdout, (r.stdout, r.stderr)
print(r.stdout, flush=True)

consume_until_signal("cli-term", signal.SIGTERM)
consume_until_signal("cli-int", signal.SIGINT)

master.stop(signal.SIGTERM)
r = rocketha("inspect", str(data / "broker-a"))
assert r.returncode == 0 and "every CRC verified" in r.stdout, (r.stdout, r.stderr)

size = (data / "broker-a.log").stat().st_size
master = Server("broker-a", *master_args)
restart = (data / "broker-a.log").read_text()[size:]
assert "truncated nothing" in restart, restart
print("the restarted master's recovery truncated nothing", flush=True)
until("slave back in TRANSFER", lambda: "TRANSFER" in rocketha("status", "127.0.0.1:5558").stdout)

master.stop(signal.SIGINT)
slave.stop(signal.SIGTERM)
namesrv.stop(signal.SIGINT)
again = Server("namesrv-2", "namesrv")
again.stop(signal.SIGTERM)
print("OK", flush=True)
'''


def test_the_cli_on_the_default_ports(tmp_path: Path) -> None:
    why = namespace_refusal()
    if why is not None:
        pytest.skip(why)
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    data = tmp_path / "data"
    data.mkdir()
    r = _children.run(
        default_ports_namespace(sys.executable, str(driver), str(data), str(CONF)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(r.stdout)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(data.glob("*.log")))
    assert r.returncode == 0, f"{r.stderr}\n{logs}"
    assert r.stdout.rstrip().endswith("OK")
