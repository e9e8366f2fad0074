"""Nothing outlives its parent: the bench harness (through ``rocketha bench``), a pytest session
with an interop JVM fixture, ``rocketha demo`` and ``rocketha demo --failover``, each stopped
with SIGTERM or killed with SIGKILL as soon as a child broker or JVM is up, leave no process
and no listening port behind, and the next run removes a killed run's temp directory.

"Their processes" are found by a token in the environment, which every descendant inherits (JVMs
included), so a child that escaped its process group is found too. No speed is asserted: the
waits are generous and only turn a leak into a failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rocketha import _children

from benches.peers.rocketmq import missing_tools

REPO = Path(__file__).resolve().parents[1]
TOKEN = "ROCKETHA_RUN_TOKEN"
#: How long a stopped run may take to be gone: a hang, not a slow machine, fails.
GONE_WITHIN = 30.0


def _ours(token: str) -> dict[int, list[str]]:
    """The command line of every live process whose environment carries ``token``."""
    needle = f"{TOKEN}={token}".encode()
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
            argv = Path(entry.path, "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or a zombie
            continue
        if needle in environ.split(b"\0"):
            found[int(entry.name)] = [a.decode(errors="replace") for a in argv.split(b"\0") if a]
    return found


def _socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def _listening(pids: set[int] | None = None) -> set[int]:
    """TCP ports in LISTEN: of the sockets ``pids`` hold, or of anyone's."""
    inodes = None if pids is None else _socket_inodes(pids)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and (inodes is None or f[9] in inodes):
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def _run_dirs(owners: set[int]) -> set[Path]:
    """The directories under the runs' root that processes ``owners`` made (``run_dir``)."""
    if not _children.RUNS_ROOT.is_dir():
        return set()
    out = set()
    for path in _children.RUNS_ROOT.iterdir():
        parts = path.name.rsplit("-", 2)
        if len(parts) == 3 and parts[1].partition(".")[0] in {str(p) for p in owners}:
            out.add(path)
    return out


def _wait(what: str, predicate: Callable[[], bool], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} not within {timeout:g} s; the run's output:\n{log.read_text()[-4000:]}"
            )
        time.sleep(0.1)


@dataclass
class Run:
    """A parent program and what tells that its children are up."""

    command: Callable[[Path], list[str]]
    child_up: Callable[[list[str]], bool]
    #: Its exit status after SIGTERM, once it stopped its children.
    on_sigterm: int
    #: To start: a JVM's first run resolves jars with Maven.
    up_within: float = 120.0
    marks: list[pytest.MarkDecorator] = field(default_factory=list)


def _rocketha_broker(argv: list[str]) -> bool:
    return "rocketha" in argv and "broker" in argv


def _java(argv: list[str]) -> bool:
    return bool(argv) and Path(argv[0]).name == "java"


def _java_peer(argv: list[str]) -> bool:
    """A JVM of RocketMQ's (a broker, a name server or its client), not Maven resolving jars."""
    return _java(argv) and not any("plexus" in a for a in argv)


#: Only where Java and Maven are: the JVM runs need them.
_NEEDS_JAVA = [
    pytest.mark.interop,
    pytest.mark.skipif(bool(missing_tools()), reason=f"interop: {missing_tools()}"),
]


RUNS = {
    # The CLI forwards the signal to the harness, which stops the soak's brokers and clients.
    "bench": Run(
        lambda out: [
            *(sys.executable, "-m", "rocketha", "bench", "soak", "--quick"),
            *("--duration", "30", "--out", str(out / "results")),
        ],
        _rocketha_broker,
        on_sigterm=128 + signal.SIGTERM,
    ),
    # The harness with JVMs: `failover` starts three of Apache RocketMQ's controllers first,
    # then its name servers and brokers beside rocketha's (Maven's resolve first, hence the
    # long limit).
    "bench-jvm": Run(
        lambda out: [
            *(sys.executable, "-m", "rocketha", "bench", "failover", "--quick", "--runs", "1"),
            *("--out", str(out / "results")),
        ],
        _java_peer,
        on_sigterm=128 + signal.SIGTERM,
        up_within=900.0,
        marks=_NEEDS_JAVA,
    ),
    # RocketMQ's name server (a session fixture, a JVM), a rocketha broker and a Java client.
    "pytest-interop": Run(
        lambda out: [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            "tests/interop/test_rocketmq_client.py::test_rocketha_broker_through_the_java_namesrv",
        ],
        _java,
        on_sigterm=int(pytest.ExitCode.INTERRUPTED),
        up_within=900.0,
        marks=_NEEDS_JAVA,
    ),
    "demo": Run(
        lambda out: [sys.executable, "-m", "rocketha", "demo", "--messages", "200000"],
        _rocketha_broker,
        on_sigterm=128 + signal.SIGTERM,
    ),
    # Three RocketMQ controller JVMs, a name server and rocketha brokers in controller mode.
    "demo-failover": Run(
        lambda out: [sys.executable, "-m", "rocketha", "demo", "--failover", "-n", "1000000"],
        _rocketha_broker,
        on_sigterm=128 + signal.SIGTERM,
        up_within=900.0,
        marks=_NEEDS_JAVA,
    ),
}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize(
    "run", [pytest.param(r, id=name, marks=r.marks) for name, r in RUNS.items()]
)
def test_nothing_outlives_a_stopped_run(run: Run, signum: int, tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    log = tmp_path / "run.log"
    env = {**os.environ, TOKEN: token, "ROCKETHA_BENCHES": str(REPO)}
    with log.open("w") as out:
        parent = _children.spawn(
            run.command(tmp_path),
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        ports: set[int] = set()
        dirs: set[Path] = set()

        def up() -> bool:
            if parent.poll() is not None:
                raise AssertionError(f"exited {parent.returncode}: {log.read_text()[-4000:]}")
            procs = _ours(token)
            ports.update(_listening(set(procs)))
            dirs.update(_run_dirs(set(procs)))
            return any(map(run.child_up, procs.values())) and bool(ports) and bool(dirs)

        _wait("a child, a listening port and a run dir", up, run.up_within, log)
        parent.send_signal(signum)
        code = parent.wait(timeout=120)
        _wait("every process of the run gone", lambda: not _ours(token), GONE_WITHIN, log)
        # A process's memory (its environ) goes before its sockets on the way out.
        _wait(f"ports {ports} closed", lambda: not ports & _listening(), GONE_WITHIN, log)
        if signum == signal.SIGTERM:
            assert code == run.on_sigterm, log.read_text()[-4000:]
            # A stopped run cleans up after itself.
            assert not [d for d in dirs if d.exists()]
        else:
            assert code == -signal.SIGKILL
        with _children.temp_run_dir("next-run"):
            assert not [d for d in dirs if d.exists()], "the next run removes a killed run's dir"
    finally:
        for pid in _ours(token):  # a failed test must not leak what it looks for
            os.kill(pid, signal.SIGKILL)
        _children.kill(parent)
