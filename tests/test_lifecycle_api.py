"""``with X:`` after ``X.start()``, and ``X.start()`` inside ``with X:``, is one start for every
startable class: the same listener, the same threads, not a second server beside the first
(issue 24: ``rocketha namesrv`` started its name server twice and failed on a fixed port).

The classes that start in their constructor (``Producer``, ``PullConsumer``, ``MessageStore``)
have no ``start``; their ``with`` returns the object itself and starts no thread.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocketha import Broker, BrokerConfig, Message, MessageStore, NameServer, Producer
from rocketha.consumer import PullConsumer
from rocketha.group_transfer import GroupTransferService
from rocketha.ha import HAService
from rocketha.metrics import BrokerMetrics

SEGMENT = 1 << 20


def _config(root: Path, namesrv: str | None = None) -> BrokerConfig:
    return BrokerConfig(
        broker_name="lifecycle",
        broker_role="ASYNC_MASTER",
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=SEGMENT,
        listen_port=0,
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
        namesrv_addr=namesrv,
    )


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def test_namesrv_start_then_with_is_one_server() -> None:
    ns = NameServer("127.0.0.1:0").start()
    address = ns.listen_address
    threads = _threads()
    with ns as entered:
        assert entered is ns
        assert ns.listen_address == address
        assert _threads() == threads
        assert ns.start() is ns
        assert ns.listen_address == address
    with pytest.raises(RuntimeError, match="not started"):
        _ = ns.listen_address


def test_broker_start_then_with_is_one_broker(tmp_path: Path) -> None:
    broker = Broker(_config(tmp_path / "store")).start()
    address, ha_port = broker.listen_address, broker.ha_listen_port
    controller, ha = broker._controller, broker.ha
    with broker as entered:
        assert entered is broker
        assert broker.start() is broker
        assert (broker.listen_address, broker.ha_listen_port) == (address, ha_port)
        assert broker._controller is controller and broker.ha is ha


def test_ha_service_and_group_transfer_start_once(tmp_path: Path) -> None:
    with MessageStore(tmp_path / "store", mapped_file_size_commit_log=SEGMENT) as store:
        ha = HAService(store, master=True, listen="127.0.0.1:0").start()
        master = ha.master
        assert master is not None
        port = master.listen_address
        with ha as entered:
            assert entered is ha
            assert ha.start() is ha
            assert ha.master is master and master.listen_address == port
        transfer = GroupTransferService(store).start()
        thread = transfer._thread
        assert transfer.start() is transfer and transfer._thread is thread
        transfer.shutdown()


def test_metrics_serve_twice_is_one_server(tmp_path: Path) -> None:
    with Broker(_config(tmp_path / "store")) as broker:
        metrics = BrokerMetrics(broker.ha_status).serve(0)
        port = metrics.port
        try:
            assert metrics.serve(0) is metrics and metrics.port == port
        finally:
            metrics.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    with NameServer("127.0.0.1:0") as ns, Broker(_config(tmp_path / "b", ns.listen_address)):
        yield ns.listen_address


def test_clients_with_returns_the_started_client(cluster: str) -> None:
    producer = Producer(cluster, "lifecycle-producer")
    with producer as entered:
        assert entered is producer
        entered.send(Message("LifecycleTopic", b"x"))
    consumer = PullConsumer(cluster, "lifecycle-group", "LifecycleTopic")
    threads = _threads()
    with consumer as entered_consumer:
        assert entered_consumer is consumer
        assert _threads() == threads


def test_services_left_running_stop_at_exit(tmp_path: Path) -> None:
    """A script that exits with its services running: they are shut down before the interpreter
    finalizes (a daemon thread back from a native call during finalization aborted the process
    with ``FATAL: exception not rethrown``), and the broker's store closes cleanly."""
    store = tmp_path / "store"
    script = f"""
import os
import sys
from rocketha import Broker, BrokerConfig, NameServer
ns = NameServer("127.0.0.1:0").start()
conf = BrokerConfig(broker_name="exit", store_path_root_dir={str(store)!r}, listen_port=0,
                    ha_listen_port=0, namesrv_addr=ns.listen_address)
broker = Broker(conf).start()
assert os.path.exists(broker.config.store_path_root_dir + "/abort")  # running
sys.exit(3)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "FATAL" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert store.is_dir() and not (store / "abort").exists(), "the broker was shut down cleanly"
