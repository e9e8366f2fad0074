"""Shared fixtures; test helpers are plain modules beside the tests (``helpers.py``)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


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
