"""Shared fixtures; test helpers are plain modules beside the tests (``helpers.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The helpers beside the tests, and the repository root for the benchmarks' harnesses
# (``benches.peers``), which tests share.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from default_ports import hold  # noqa: E402
from helpers import broker_pair  # noqa: E402
from rocketha import Broker, NameServer, _children  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``-n 2 --dist loadgroup`` (``make test``) the Spark tests run one after another on
    one worker (the Spark session is a per-worker cost paid once this way), and the tests
    against real JVMs one module after another: a module's tests share their JVMs' warm-up and
    run on one worker, while both workers take modules, since the JVM tests are most of the
    suite's time. (Maven's first resolve is serialised between workers by a file lock.)"""
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif item.get_closest_marker("interop") is not None:
            item.add_marker(pytest.mark.xdist_group(f"interop-{item.path.stem}"))


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (`timeout`, a CI runner cancelling a job) stops the session like Ctrl-C: pytest
    tears the fixtures down, which stops their brokers and JVMs, instead of dying on the spot."""
    _children.on_stop_signals()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for every spark test: starting the JVM costs seconds."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("rocketha-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def default_ports_held() -> Iterator[None]:
    """RocketMQ's default ports are taken for the whole session (see ``default_ports.py``): a
    test that binds one by accident fails here as it would beside a user's running broker."""
    held = hold()
    yield
    for sock in held:
        sock.close()


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fails a test that leaves a non-daemon thread running: at the end of the session such a
    thread keeps pytest from exiting, so one failed assertion would hang the whole run."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    for t in leaked:
        t.join(timeout=10)
    still = [t.name for t in leaked if t.is_alive()]
    assert not still, f"the test left non-daemon threads running: {still}"


@pytest.fixture
def namesrv_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``rocketha namesrv`` on an OS-chosen port; its log goes to a file (an undrained pipe
    would block it)."""
    log = tmp_path / "namesrv.log"
    with log.open("w") as stderr:
        proc = _children.spawn(
            [sys.executable, "-m", "rocketha", "-v", "namesrv", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        raise AssertionError(f"namesrv failed to start: {log.read_text()}")
    listen = json.loads(line)["started"]["listen"]
    print(f"rocketha namesrv listening on {listen}")
    try:
        yield proc, listen
    finally:
        _children.kill(proc)
        proc.stdout.close()


@pytest.fixture
def spark_cluster(tmp_path: Path, spark: Any) -> Iterator[tuple[str, Broker, Broker]]:
    """A name server and broker group ``broker-a`` (:func:`broker_pair`), in this process;
    Spark's Python workers reach them over loopback like remote executors would."""
    import rocketha.spark

    rocketha.spark.register(spark)
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as (
            master,
            slave,
        ),
    ):
        yield ns.listen_address, master, slave
