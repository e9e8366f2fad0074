"""Transactional messages (issue 28): what a transaction costs a sender, rocketha's broker
(in-process, ASYNC_MASTER) and Apache RocketMQ 5.4.0's (ASYNC_MASTER) in the same run.

* **Java** (``java/TxLoad.java``, the 5.4.0 client): 1 and 8 connections, each a
  ``TransactionMQProducer`` of its own sending 1 KiB messages one after the other for 10 s
  (``--quick``: 2 s) after 1 s of warm-up. A transactional send is
  ``sendMessageInTransaction``: the half message sent synchronously, a local transaction that
  commits at once, END_TRANSACTION (which the client sends oneway). Figures: transactional
  sends/s against plain synchronous sends of the same producers to the same broker, and
  rocketha's against RocketMQ's under the same client. A run counts only if every transaction
  it committed lands in the topic (the sum of its queues' max offsets), which is waited for.
* **rocketha's client**, on rocketha's broker: ``Producer.send_in_transaction`` by 8 threads
  sharing one producer, the local transaction committing at once (its END_TRANSACTION answered
  before the call returns, where Java's is oneway), against ``Producer.send`` by 8 threads.

A broker that refuses transactional sends (``rejectTransactionMessage``, NO_PERMISSION) leaves
its figures out with the broker's answer under ``skipped``; the others still run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from rocketha import (
    Broker,
    BrokerConfig,
    Message,
    NameServer,
    Producer,
    TransactionState,
    _children,
)
from rocketha._core import MQClientAPI

from benches.common import Figure, peer_rocketmq, skip_figure
from benches.peers import rocketmq

SCENARIO = "transaction"
CONNECTIONS = (1, 8)
SIZE = 1024
QUEUES = 4
#: rocketha's client: threads sharing one producer.
THREADS = 8
BODY = b"x" * SIZE
#: What a broker that takes no transactional messages answers (ResponseCode.NO_PERMISSION).
REFUSED = "CODE: 16"


@contextmanager
def _rocketha(root: Path) -> Iterator[tuple[str, str]]:
    """An in-process name server and ASYNC_MASTER: (name server, broker) addresses."""
    with NameServer("127.0.0.1:0") as ns:
        broker = Broker(
            BrokerConfig(
                broker_name="tx-bench",
                namesrv_addr=ns.listen_address,
                listen_port=0,
                ha_listen_address="127.0.0.1",
                ha_listen_port=0,
                store_path_root_dir=str(root / "rocketha"),
            )
        ).start()
        try:
            yield ns.listen_address, broker.listen_address
        finally:
            broker.shutdown()


@contextmanager
def _rocketmq(rmq: rocketmq.RocketMQ, root: Path) -> Iterator[tuple[str, str]]:
    """RocketMQ's name server and ASYNC_MASTER, on the JVM and settings ``bench peers`` gives
    it (a user's G1 JVM, one send thread per core)."""
    from benches.peers_bench import ROCKETMQ_JVM, ROCKETMQ_TUNING

    namesrv = rmq.namesrv(root / "namesrv")
    try:
        broker = rmq.broker(
            root / "broker", namesrv, jvm=ROCKETMQ_JVM, brokerName="tx-bench", **ROCKETMQ_TUNING
        )
        try:
            namesrv.wait_registered(broker.listen_port)
            yield namesrv.address, broker.address
        finally:
            broker.kill()
    finally:
        namesrv.kill()


def _wait(predicate: Callable[[], object], what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {seconds:g} s")
        time.sleep(0.05)


def _landed(broker: str, topic: str, count: int) -> None:
    """Until the ``count`` messages sent to ``topic`` are all in its queues (a commit's
    END_TRANSACTION is oneway: the send's answer does not wait for it)."""
    api = MQClientAPI()

    def held() -> int:
        return sum(api.get_max_offset(broker, topic, q, 10.0) for q in range(QUEUES))

    _wait(lambda: held() >= count, f"{count} messages in {topic} (held {held()})")


def _java(
    rmq: rocketmq.RocketMQ, ns: str, broker: str, home: Path, connections: int, tx: bool, s: float
) -> float:
    """Sends/s of one TxLoad run on a fresh topic, once what it sent landed."""
    topic = f"Tx{'Half' if tx else 'Plain'}{connections}"
    out = rmq.tx_load(
        ns, topic, connections, s, SIZE, home=home, transactional=tx, broker=broker, warmup=1.0
    )
    if out["ok"] != out["sent"]:
        raise RuntimeError(f"TxLoad {topic}: not every send answered SEND_OK: {out['statuses']}")
    _landed(broker, topic, int(out["total_ok"]))
    return float(out["ok"]) / float(out["seconds"])


def _threads(seconds: float, send: Callable[[], object]) -> tuple[int, float]:
    """:data:`THREADS` threads calling ``send`` one call after the other for ``seconds``:
    (calls, seconds they took)."""
    stop = time.monotonic() + seconds
    counts = [0] * THREADS

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            send()
            counts[i] += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(loop, range(THREADS)))
    return sum(counts), time.perf_counter() - started


def _python(ns: str, broker: str, seconds: float) -> tuple[float, float]:
    """``send_in_transaction`` and ``send`` per second by :data:`THREADS` threads of
    rocketha's client."""

    def execute(_: Message) -> TransactionState:
        return TransactionState.COMMIT

    with Producer(ns, "tx-bench-python") as producer:

        def transactional() -> object:
            return producer.send_in_transaction(Message("PyTxHalf", BODY), execute)

        def plain() -> object:
            return producer.send(Message("PyTxPlain", BODY))

        rates = []
        for topic, send in (("PyTxHalf", transactional), ("PyTxPlain", plain)):
            send()  # the route and the connection, before the clock
            calls, took = _threads(seconds, send)
            _landed(broker, topic, calls + 1)
            rates.append(calls / took)
    return rates[0], rates[1]


def run(quick: bool, runs: int) -> list[Figure]:
    rmq = peer_rocketmq("the Java client and the peer RocketMQ")
    seconds = 2.0 if quick else 10.0
    #: (system, transactional, connections) -> sends/s of each run.
    java: dict[tuple[str, bool, int], list[float]] = {}
    python: dict[bool, list[float]] = {True: [], False: []}
    refused: dict[str, str] = {}
    for run_no in range(runs):
        with _children.temp_run_dir("bench-transaction") as d:
            for system in ("rocketha", "rocketmq"):
                root = Path(d) / system
                start = _rocketha if system == "rocketha" else lambda r: _rocketmq(rmq, r)
                with start(root) as (ns, broker):
                    for c in CONNECTIONS:
                        # Transactional first: a broker that refuses them needs no baseline.
                        for tx in (True, False):
                            if system in refused:
                                continue
                            home = root / f"java-{c}-{tx}-{run_no}"
                            try:
                                rate = _java(rmq, ns, broker, home, c, tx, seconds)
                            except RuntimeError as e:
                                if not tx or REFUSED not in str(e):
                                    raise
                                refused[system] = _refusal(str(e))
                                continue
                            java.setdefault((system, tx, c), []).append(rate)
                    if system == "rocketha":
                        tx_rate, plain_rate = _python(ns, broker, seconds)
                        python[True].append(tx_rate)
                        python[False].append(plain_rate)
    for system, answer in refused.items():
        skip_figure(SCENARIO, f"{system} transactional sends", f"the broker refused: {answer}")
    return _figures(rmq.version, java, python)


def _refusal(error: str) -> str:
    """The broker's answer in a failed TxLoad's output: the line naming code 16."""
    line = next(line for line in error.splitlines() if REFUSED in line)
    return line[line.index(REFUSED) :].strip()


def _figures(
    version: str,
    java: dict[tuple[str, bool, int], list[float]],
    python: dict[bool, list[float]],
) -> list[Figure]:
    names = {"rocketha": "rocketha", "rocketmq": f"RocketMQ {version}"}
    figures = []
    for c in CONNECTIONS:
        for system, name in names.items():
            if (system, True, c) in java:
                figures.append(
                    Figure(
                        SCENARIO,
                        f"{name}: Java transactional sends, {c} conn",
                        "msg/s",
                        java[(system, True, c)],
                        "plain sync sends, same client and broker",
                        java[(system, False, c)],
                    )
                )
        if ("rocketha", True, c) in java and ("rocketmq", True, c) in java:
            figures.append(
                Figure(
                    SCENARIO,
                    f"rocketha Java transactional sends, {c} conn",
                    "msg/s",
                    java[("rocketha", True, c)],
                    f"RocketMQ {version}, same client",
                    java[("rocketmq", True, c)],
                )
            )
    if python[True]:
        figures.append(
            Figure(
                SCENARIO,
                f"rocketha Producer.send_in_transaction, {THREADS} threads",
                "msg/s",
                python[True],
                f"Producer.send, {THREADS} threads, same broker",
                python[False],
            )
        )
    return figures
