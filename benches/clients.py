"""A producer or a consumer of a rocketha cluster in a process of its own, for the soak and the
consumer fault tests: ``python -m benches.clients produce|consume ...``.

``produce`` sends messages keyed ``NAME-SEQ`` (the key is also the body's start), paced to
``--rate`` per second (0: as fast as answers come), and prints one line per send:
``KEY STATUS LATENCY_US T`` where ``T`` is ``time.monotonic()`` when the answer came (one clock
for every process of the machine) and ``STATUS`` a ``SendStatus`` or ``ERR``. A failed send
(the master is down) is printed as ``ERR`` and the producer goes on with the next key after
``--retry-delay``, as an application would; a message whose answer never came may still be
stored and delivered. Runs until ``stop`` on stdin or SIGTERM, then prints ``{"stopped": N}``.

``consume`` runs a :class:`~rocketha.PullConsumer` member of ``--group`` from the first offset,
prints ``{"ready": true}`` once it is subscribed, then one line per message: its key. On
``stop`` (or SIGTERM) it commits, closes and prints ``{"consumed_from": {broker id: count}}``.

The parent's side: :class:`ProducerClient` and :class:`ConsumerClient` start one and collect
its lines on a thread.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rocketha import ConsumeFromWhere, Message, Producer, PullConsumer, RocketHAError, _children

REPO = Path(__file__).resolve().parents[1]


class _Client:
    """The parent's side: the child runs from this checkout, its stderr goes to ``log`` (a
    file: an undrained pipe would block it) and its stdout is read on a thread."""

    def __init__(self, log: Path, *args: str) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        with log.open("a") as err:
            self.proc = _children.spawn(
                [sys.executable, "-m", "benches.clients", *args],
                cwd=REPO,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.log = log
        self.summary: dict[str, object] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.summary.update(json.loads(line))
            elif line.endswith("\n"):
                self.line(line.split())

    def line(self, fields: list[str]) -> None:
        raise NotImplementedError

    def stop(self, timeout: float = 60) -> dict[str, object]:
        """Asks the client to stop (a consumer commits first); returns its last line."""
        assert self.proc.stdin is not None
        if self.proc.poll() is None:
            # A client a test stalled with SIGSTOP must run to stop.
            self.proc.send_signal(signal.SIGCONT)
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _children.kill(self.proc)
            raise RuntimeError(
                f"{self.proc.args} ignored stop; its log: {self.log.read_text()}"
            ) from None
        finally:
            self._reader.join(timeout=timeout)
        return self.summary


class ProducerClient(_Client):
    """``produce``: every answer as ``(key, status, latency in us, monotonic time)``."""

    def __init__(self, log: Path, namesrv: str, topic: str, name: str, *options: str) -> None:
        self.sends: list[tuple[str, str, float, float]] = []
        super().__init__(
            log, "produce", f"--namesrv={namesrv}", f"--topic={topic}", f"--name={name}", *options
        )

    def line(self, fields: list[str]) -> None:
        key, status, latency, t = fields
        self.sends.append((key, status, float(latency), float(t)))

    def acked(self) -> list[str]:
        return [key for key, status, _, _ in list(self.sends) if status == "SEND_OK"]


class ConsumerClient(_Client):
    """``consume``: the keys delivered, in order, duplicates included."""

    def __init__(self, log: Path, namesrv: str, group: str, topic: str, *options: str) -> None:
        self.keys: list[str] = []
        super().__init__(
            log, "consume", f"--namesrv={namesrv}", f"--group={group}", f"--topic={topic}", *options
        )

    def line(self, fields: list[str]) -> None:
        self.keys.append(fields[0])

    @property
    def ready(self) -> bool:
        return bool(self.summary.get("ready"))

    def consumed_from(self) -> dict[int, int]:
        """After :meth:`stop`: messages delivered by broker id (0 the master)."""
        sources = self.summary.get("consumed_from")
        return {int(k): int(v) for k, v in sources.items()} if isinstance(sources, dict) else {}


def _stop_on_command(stop: threading.Event) -> None:
    """``stop`` on stdin, SIGTERM or stdin's end stop the client."""

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=read, daemon=True).start()


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def produce(args: argparse.Namespace, stop: threading.Event) -> None:
    padding = os.urandom(max(0, args.size)).hex()[: args.size]
    interval = 1.0 / args.rate if args.rate > 0 else 0.0
    due = time.monotonic()
    sent = 0
    with Producer(args.namesrv, f"{args.name}-producer", send_timeout=args.timeout) as producer:
        while not stop.is_set():
            key = f"{args.name}-{sent}"
            sent += 1
            started = time.monotonic()
            try:
                status = producer.send(Message(args.topic, f"{key} {padding}", keys=key)).status
                outcome = status.value
            except RocketHAError:
                outcome = "ERR"
            done = time.monotonic()
            _emit(f"{key} {outcome} {(done - started) * 1e6:.0f} {done:.6f}")
            if outcome == "ERR":
                stop.wait(args.retry_delay)
            elif interval:
                # Paced from a schedule, so a slow answer is made up for; never in a burst
                # of more than a second's worth after a stall.
                due = max(due + interval, done - 1.0)
                stop.wait(max(0.0, due - time.monotonic()))
    _emit(json.dumps({"stopped": sent}))


def consume(args: argparse.Namespace, stop: threading.Event) -> None:
    with PullConsumer(
        args.namesrv,
        args.group,
        args.topic,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit_interval=args.commit_interval,
        master_retry_interval=args.master_retry_interval,
        long_polling_timeout=args.long_polling_timeout,
        rebalance_interval=args.rebalance_interval,
        pull_batch_size=args.pull_batch_size,
        pull_threshold_for_queue=args.pull_threshold_for_queue,
    ) as consumer:
        _emit(json.dumps({"ready": True}))
        while not stop.is_set():
            for msg in consumer.poll(0.2):
                _emit(msg.keys[0] if msg.keys else msg.body.split(b" ", 1)[0].decode())
        sources = consumer.consumed_from()
    _emit(json.dumps({"consumed_from": sources}))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.clients", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--namesrv", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--name", required=True, help="key prefix, unique per producer")
    p.add_argument("--rate", type=float, default=0.0, help="sends/s; 0: unpaced")
    p.add_argument("--size", type=int, default=256, help="body bytes after the key")
    p.add_argument("--timeout", type=float, default=3.0, help="send timeout (s)")
    p.add_argument("--retry-delay", type=float, default=0.05, help="s after a failed send")
    c = sub.add_parser("consume")
    c.add_argument("--namesrv", required=True)
    c.add_argument("--group", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--commit-interval", type=float, default=1.0)
    c.add_argument("--master-retry-interval", type=float, default=0.5)
    c.add_argument("--long-polling-timeout", type=float, default=2.0)
    c.add_argument("--rebalance-interval", type=float, default=20.0)
    c.add_argument("--pull-batch-size", type=int, default=32)
    c.add_argument("--pull-threshold-for-queue", type=int, default=1000)
    args = parser.parse_args()
    stop = threading.Event()
    _stop_on_command(stop)
    run: Callable[[argparse.Namespace, threading.Event], None] = (
        produce if args.command == "produce" else consume
    )
    run(args, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
