"""The ``rocketha`` command: ``demo``, ``namesrv``, ``broker``, ``produce``, ``consume``,
``status``, ``inspect``, ``repair``, ``admin``, ``bench``."""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import ipaddress
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rocketha import Message, __version__, _children
from rocketha._cli_admin import add_admin
from rocketha._cli_common import SIGNING_HELP, AddParser, credentials
from rocketha._cli_store import add_inspect, add_repair
from rocketha.broker import Broker
from rocketha.config import BrokerConfig, parse_key_value
from rocketha.controllers import ControllerUnavailable, missing_tools
from rocketha.exceptions import RocketHAError
from rocketha.namesrv import NameServer
from rocketha.tls import server_tls_from_properties

log = logging.getLogger("rocketha.cli")
T = TypeVar("T")


def _add_demo(add: AddParser) -> None:
    """``rocketha demo``'s options: the size of the run and where its stores go."""
    demo = add("demo", help="name server, master, slave, producers and a consumer on loopback")
    demo.add_argument(
        "-n", "--messages", type=int, help="messages to send (default 20000; --failover 2000)"
    )
    demo.add_argument(
        "--failover",
        action="store_true",
        help="controller mode instead: Apache RocketMQ's controller (3 JVMs; needs java and "
        "mvn) elects a new master of 3 rocketha brokers when the master is SIGKILLed",
    )
    demo.add_argument("--size", type=int, default=1024, help="body bytes")
    demo.add_argument("--topic", default="DemoTopic", help="topic (default DemoTopic)")
    demo.add_argument("--store", help="directory for both stores, kept (default: a temp dir)")
    demo.add_argument("--keep", action="store_true", help="keep the temporary store")
    demo.add_argument(
        "--segment-size",
        type=int,
        default=16 << 20,
        help="commit log segment bytes, mappedFileSizeCommitLog (default 16 MiB)",
    )
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """The whole picture on loopback, as processes (see :mod:`rocketha.demo`). A temporary
    store is removed at the end unless ``--keep``; ``--store`` is always kept."""
    from rocketha import demo

    if args.failover and (why := missing_tools()):
        raise ControllerUnavailable(f"demo --failover: {why}")
    # SIGTERM unwinds like Ctrl-C: the brokers are stopped and the temp store removed.
    _children.on_stop_signals()
    args.messages = args.messages or (2000 if args.failover else 20_000)
    keep = bool(args.keep or args.store)
    with contextlib.ExitStack() as stack:
        if args.store:
            root = Path(args.store)
        elif keep:
            root = Path(tempfile.mkdtemp(prefix="rocketha-demo-"))
        else:
            # Under the runs' root: if this process is killed, the next run removes it.
            root = stack.enter_context(_children.temp_run_dir("demo"))
        summary = (demo.run_failover if args.failover else demo.run)(
            root,
            messages=args.messages,
            size=args.size,
            topic=args.topic,
            segment_size=args.segment_size,
            say=None if args.quiet or args.json else sys.stderr,
        )
    summary["store"] = str(root) if keep else "removed (--keep keeps it)"
    if args.failover:
        return demo.print_failover_summary(summary, as_json=args.json)
    ok = (
        summary["send_statuses"] == {"SEND_OK": args.messages}
        and summary["consumed"] == args.messages
        and summary["duplicates"] == 0
        and summary["missing"] == 0
        and summary["consumed_from_slave_after_master_stopped"] > 0
        and summary["replica_byte_identical"]
    )
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print("rocketha demo: name server, SYNC_MASTER and SLAVE on 127.0.0.1, as processes")
        for key, value in summary.items():
            print(f"  {key:42} {value}")
        print(
            "OK: every message sent was consumed exactly once, the master's death included"
            if ok
            else "FAILED: see the figures above"
        )
    return 0 if ok else 1


def _add_consume(add: AddParser) -> None:
    """``rocketha consume``'s options: the group, the topic, where a new group starts and
    what is printed."""
    consume = add("consume", help="print a topic's messages as a consumer group member")
    consume.add_argument("--namesrv", required=True, help="name server host:port (';' for more)")
    consume.add_argument("--group", required=True, help="consumer group")
    consume.add_argument(
        "--topic", required=True, help="topic to read (waited for if it does not exist yet)"
    )
    consume.add_argument("--subscription", default="*", help='tags: "*" or "tagA || tagB"')
    consume.add_argument("--count", type=int, help="stop after N messages")
    out = consume.add_mutually_exclusive_group()
    out.add_argument(
        "--json",
        action="store_true",
        help='one JSON line per message; the body is lossless: "body" when it is UTF-8 '
        'text, else "body_base64" (without --json, a body that is not text is printed '
        'escaped after a "(binary, N bytes)" mark)',
    )
    out.add_argument("--count-only", action="store_true", help="print only the total")
    consume.add_argument(
        "--from-beginning",
        action="store_true",
        help="a group with no committed offset starts at the first message of each queue "
        "(CONSUME_FROM_FIRST_OFFSET). Without it, RocketMQ's CONSUME_FROM_LAST_OFFSET: at the "
        "end of each queue, except a queue whose first message is still in the broker's "
        "memory (a new topic), which is read from its start",
    )
    consume.add_argument("--access-key", metavar="KEY", help=SIGNING_HELP)
    consume.set_defaults(func=cmd_consume)


def cmd_consume(args: argparse.Namespace) -> int:
    """Prints each message (or counts them) until ``--count`` or SIGINT/SIGTERM; the offsets
    of what was printed are committed on the way out."""
    from rocketha.consumer import ConsumeFromWhere, PullConsumer

    stop = _StopSignals().stop
    where = (
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        if args.from_beginning
        else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    )
    count = 0
    with PullConsumer(
        args.namesrv,
        args.group,
        args.topic,
        subscription=args.subscription,
        consume_from_where=where,
        credentials=credentials(args),
    ) as consumer:
        while not stop.is_set() and (args.count is None or count < args.count):
            left = None if args.count is None else args.count - count
            for msg in consumer.poll(0.5, max_messages=left):
                count += 1
                if args.json:
                    line = {
                        "topic": msg.topic,
                        "queue_id": msg.queue_id,
                        "queue_offset": msg.queue_offset,
                        "msg_id": msg.properties.get("UNIQ_KEY", msg.msg_id),
                        "offset_msg_id": msg.msg_id,
                        "tags": msg.tags,
                        "keys": msg.keys,
                        "store_timestamp": msg.store_timestamp,
                        **_json_body(msg.body),
                    }
                    print(json.dumps(line), flush=True)
                elif not args.count_only:
                    print(_printable_body(msg.body), flush=True)
        sources = consumer.consumed_from()
    by = ", ".join(f"broker id {k}: {v}" for k, v in sorted(sources.items())) or "none"
    print(f"consumed {count} messages of {args.topic} ({by})", file=sys.stderr)
    return 0


def _json_body(body: bytes) -> dict[str, str]:
    """Lossless in JSON: ``body`` when it is UTF-8 text, else ``body_base64``."""
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(body).decode("ascii")}


def _printable_body(body: bytes) -> str:
    """Text as text; anything else (not UTF-8, or control characters that would drive the
    terminal) marked and escaped, ``\\xNN`` for each byte that is not text."""
    text = body.decode("utf-8", "backslashreplace")
    if text.encode("utf-8") == body and all(c.isprintable() or c in "\t\n" for c in text):
        return text
    escaped = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return f"(binary, {len(body)} bytes) {escaped}"


class _Stopped(Exception):
    """Raised by the SIGINT/SIGTERM handler to leave a blocking stdin read."""


#: SIGINT and SIGTERM: a long-running command stops on either and exits 0.
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class _StopSignals:
    """SIGINT and SIGTERM end a long-running command cleanly. The handler only sets
    :attr:`stop`, which the main thread waits on; it raises :class:`_Stopped` only in
    :meth:`until_stopped`'s wait for the next item (a blocking stdin read), and only for the
    first signal. So no signal cuts a start or a shutdown short: a native thread left running
    at exit is killed while it unwinds through the binding, which glibc reports as ``FATAL:
    exception not rethrown``."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._interruptible = False
        for signum in _STOP_SIGNALS:
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        first = not self.stop.is_set()
        self.stop.set()
        log.info("signal %d: %s", signum, "stopping" if first else "already stopping")
        if first and self._interruptible:
            self._interruptible = False
            raise _Stopped

    def wait(self) -> None:
        """Until a stop signal, taken with ``sigwait`` while this thread blocks the stop
        signals: every other thread blocks them too (:meth:`starting`), so the kernel keeps one
        pending until ``sigwait`` takes it, whenever it comes. No Python-level handler has to
        run for the wait to end; an ``Event.wait`` and then a signal wakeup fd each left a
        broker asleep now and then in CI after a SIGTERM sent right behind a SIGCONT.
        ``pthread_sigmask`` runs the handler of a signal that came before the block."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            while not self.stop.is_set():
                self._on_signal(signal.sigwait(_STOP_SIGNALS), None)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)

    def until_stopped(self, items: Iterable[T]) -> Iterator[T]:
        """``items`` until a stop signal. One that comes while the next item is awaited (a
        blocking stdin read) ends the iteration at once; one that comes while the caller works
        on an item ends it after that item. The stop signals are unblocked in this thread only
        while it waits, so a caller that blocks them everywhere else (:meth:`starting`) gets
        every one here, at the read, whichever thread the kernel aimed it at."""
        it = iter(items)
        while True:
            # Reading the mask runs the handler of a signal left pending by the last item.
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, ())
            if self.stop.is_set():
                return
            self._interruptible = True
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
                item = next(it)
            except (_Stopped, StopIteration):
                return
            finally:
                self._interruptible = False
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            yield item

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """Threads started in the block inherit a mask with the stop signals blocked, so the
        kernel delivers those to the main thread, the only one that runs Python handlers (a
        signal landing on another thread would leave the main thread asleep)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    """``mqbroker``'s precedence: ``-n`` and ``--set`` over the file, the file over the
    ``NAMESRV_ADDR`` environment variable."""
    properties = dict(parse_key_value(kv) for kv in args.set)
    overrides = {} if args.namesrv_addr is None else {"namesrv_addr": args.namesrv_addr}
    return BrokerConfig.load(args.config, properties, properties_source="--set", **overrides)


def _add_broker(add: AddParser) -> None:
    """``rocketha broker``'s options: ``mqbroker``'s ``-c``, ``-n`` and ``-p``, ``--set``, and
    the stdin producer."""
    broker = add("broker", help="run a broker in the foreground")
    broker.add_argument("-c", "--config", required=True, help="broker.conf")
    broker.add_argument(
        "-n",
        "--namesrv-addr",
        help="name servers, host:port separated by ';' (over the file's namesrvAddr, "
        "which is over the NAMESRV_ADDR environment variable)",
    )
    broker.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf key over the file's value, repeatable: e.g. --set listenPort=10921 "
        "--set storePathRootDir=/data/b for a second broker on the host",
    )
    broker.add_argument(
        "-p",
        "--print-config",
        action="store_true",
        help="print the effective config (file, -n, --set) as broker.conf lines and exit",
    )
    broker.add_argument(
        "--produce-stdin",
        action="store_true",
        help="on a master: put one message per line of stdin, then stop at its end",
    )
    broker.add_argument(
        "--topic", default="StdinTopic", help="with --produce-stdin: the topic (StdinTopic)"
    )
    broker.add_argument(
        "--wait-for-slave",
        type=float,
        metavar="SECONDS",
        help="with --produce-stdin: read nothing until a slave replicates (exit 2 if none)",
    )
    broker.set_defaults(func=cmd_broker)


def cmd_broker(args: argparse.Namespace) -> int:
    config = broker_config(args)
    if args.print_config:
        print(config.to_properties(), end="")
        for key, value in sorted(config.ignored_keys.items()):
            print(f"# not used by rocketha: {key}={value}")
        return 0

    _serve(config, args, _StopSignals())
    print(json.dumps({"stopped": True}), flush=True)
    return 0


def _serve(config: BrokerConfig, args: argparse.Namespace, signals: _StopSignals) -> None:
    """Runs until a stop signal, or with ``--produce-stdin`` until stdin ends; the ``with``
    block flushes and closes on the way out."""
    broker = Broker(config)
    # The stop signals stay blocked but while this thread waits for them (wait, until_stopped):
    # a thread the broker starts later (a put may start one) inherits that too, so a signal can
    # never land on a thread that leaves this one asleep in its stdin read.
    with signals.starting(), broker:
        info: dict[str, str | int] = {
            # In controller mode, the role the controller gave, not the file's.
            "role": broker.role.value,
            "store": config.store_path_root_dir,
            "listen_address": broker.listen_address,
        }
        if broker.role.is_master:
            info["ha_listen_port"] = broker.ha_listen_port
        if broker._metrics is not None:
            info["metrics_port"] = broker._metrics.port
        print(json.dumps({"started": info}), flush=True)
        if args.produce_stdin and broker.role.is_master:
            if args.wait_for_slave and not _wait_for_slave(broker, args.wait_for_slave):
                raise RocketHAError(
                    f"--wait-for-slave: no slave connected within {args.wait_for_slave:g} s; "
                    "nothing was put"
                )
            for line in signals.until_stopped(sys.stdin):
                r = broker.put(Message(args.topic, line.rstrip("\n").encode()))
                put = {"msgId": r.msg_id, "offset": r.offset, "status": r.status.name}
                print(json.dumps(put), flush=True)
            return
        signals.wait()


def _wait_for_slave(broker: Broker, seconds: float) -> bool:
    """Whether a slave is replicating (TRANSFER) within ``seconds``: on a SYNC_MASTER, puts
    before that would only time out waiting for it."""
    assert broker.ha is not None
    log.info("waiting up to %g s for a slave before reading stdin", seconds)
    return broker.ha.wait_for_state(None, "TRANSFER", timeout=seconds)


def _is_loopback(listen: str) -> bool:
    """Whether ``ip:port`` (``[ip]:port`` for IPv6) names a loopback address."""
    host = listen.rpartition(":")[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _add_namesrv(add: AddParser) -> None:
    """``rocketha namesrv``'s options: where it listens, and its TLS."""
    namesrv = add("namesrv", help="run a name server in the foreground")
    namesrv.add_argument(
        "--listen", default="127.0.0.1:9876", help="ip:port (port 0 picks a free one)"
    )
    namesrv.add_argument(
        "--allow-insecure",
        action="store_true",
        help="listen on a non-loopback address although anyone reaching it can rewrite routes",
    )
    namesrv.add_argument(
        "--kv-config",
        metavar="PATH",
        help="keep the KV config (mqadmin updateKvConfig) in this file, RocketMQ's "
        "kvConfigPath (e.g. ~/namesrv/kvConfig.json); without it, in memory only",
    )
    namesrv.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a TLS setting by RocketMQ's key, repeatable: --set tls.server.mode=enforcing "
        "--set tls.server.certPath=server.pem --set tls.server.keyPath=server.key",
    )
    namesrv.set_defaults(func=cmd_namesrv)


def cmd_namesrv(args: argparse.Namespace) -> int:
    if not _is_loopback(args.listen) and not args.allow_insecure:
        print(
            f"rocketha namesrv: refusing to listen on {args.listen}: the name server has no "
            "authentication (RocketMQ's ACL covers the brokers' client ports, not the name "
            "server), so anyone who can reach it can register or unregister brokers and "
            "rewrite the routes every producer and consumer follows. Listen on a loopback "
            "address (127.0.0.1:PORT), or pass --allow-insecure on a trusted network.",
            file=sys.stderr,
        )
        return 2
    tls = server_tls_from_properties(dict(parse_key_value(kv) for kv in args.set), "--set")

    signals = _StopSignals()
    namesrv = NameServer(args.listen, tls=tls, kv_config_path=args.kv_config)
    with signals.starting(), namesrv:
        print(json.dumps({"started": {"listen": namesrv.listen_address}}), flush=True)
        signals.wait()
    print(json.dumps({"stopped": True}), flush=True)
    return 0


def _add_produce(add: AddParser) -> None:
    """``rocketha produce``'s options: the name server, the topic, what to send."""
    produce = add("produce", help="send messages through a name server's routes")
    produce.add_argument("--namesrv", required=True, help="name server host:port (';' for more)")
    produce.add_argument("--topic", required=True, help="topic to send to")
    produce.add_argument("--group", default="rocketha-cli-producer", help="producer group")
    produce.add_argument("--count", type=int, help="send N generated messages, not stdin's lines")
    produce.add_argument("--size", type=int, default=128, help="bytes per generated message")
    produce.add_argument(
        "--json",
        action="store_true",
        help="one JSON line per message: its line number and send result, or its error",
    )
    produce.set_defaults(func=cmd_produce)
    produce.add_argument("--access-key", metavar="KEY", help=SIGNING_HELP)


def cmd_produce(args: argparse.Namespace) -> int:
    """Sends the lines of stdin (or ``--count`` generated messages) through the name server.
    A line that fails is reported (stderr, and a JSON line with ``--json``) and the rest are
    still sent; the exit status is 1 if any failed or was not SEND_OK. SIGINT or SIGTERM stop
    the reading; what was read is reported as usual."""
    from rocketha.client import Producer, SendStatus, check_topic

    # The topic is the same for every line: a bad one fails once, before anything is read.
    check_topic(args.topic)
    if args.count is not None:
        bodies = (os.urandom(args.size) for _ in range(args.count))
    else:
        bodies = (line.rstrip("\n").encode() for line in sys.stdin)
    signals = _StopSignals()
    statuses: dict[str, int] = {}
    failed = 0
    started = time.perf_counter()
    # The stop signals stay blocked but for the stdin reads (until_stopped): every thread the
    # producer starts inherits that, so a signal always reaches the main thread at its read.
    with (
        signals.starting(),
        Producer(args.namesrv, args.group, credentials=credentials(args)) as producer,
    ):
        for number, body in enumerate(signals.until_stopped(bodies), 1):
            try:
                r = producer.send(Message(args.topic, body))
            except RocketHAError as e:
                failed += 1
                why = f"{type(e).__name__}: {e}"
                print(f"rocketha produce: line {number}: {why}", file=sys.stderr, flush=True)
                if args.json:
                    print(json.dumps({"line": number, "error": why}), flush=True)
                continue
            statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
            if args.json:
                line = {
                    "line": number,
                    "status": r.status.value,
                    "msg_id": r.msg_id,
                    "offset_msg_id": r.offset_msg_id,
                    "broker": r.queue.broker_name,
                    "queue_id": r.queue_id,
                    "queue_offset": r.queue_offset,
                }
                print(json.dumps(line), flush=True)
    elapsed = time.perf_counter() - started
    total = sum(statuses.values())
    if not args.json:
        rate = total / elapsed if elapsed > 0 else 0.0
        counts = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "nothing sent"
        if failed:
            counts += f"; {failed} failed (see above)"
        print(f"sent {total} messages to {args.topic} in {elapsed:.2f} s ({rate:.0f}/s): {counts}")
    return 0 if not failed and statuses.get(SendStatus.SEND_OK.value, 0) == total else 1


def _add_status(add: AddParser) -> None:
    """``rocketha status``'s options: the broker's metricsPort and the output."""
    status = add("status", help="a broker's replication state, from its metricsPort")
    status.add_argument("url", help="the broker's metricsPort: host:port or http://host:port")
    status.add_argument("--json", action="store_true", help="the whole state as JSON")
    status.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        metavar="SECONDS",
        help="redraw every SECONDS (default 2) until interrupted",
    )
    status.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    """A broker's replication state from its metrics port: a summary, JSON, or a summary
    redrawn every ``--watch`` seconds."""
    url = _status_url(args.url)
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                status = json.load(resp)
        except urllib.error.URLError as e:
            hint = "is a broker serving metricsPort there?"
            raise OSError(f"cannot read {url}: {e.reason} ({hint})") from e
        text = json.dumps(status, indent=2) if args.json else _status_summary(status)
        if args.watch is None:
            print(text)
            return 0
        # Clear the screen and redraw in place, like `watch`.
        print("\x1b[H\x1b[2J" + text, flush=True)
        time.sleep(args.watch)


def _status_url(where: str) -> str:
    """The ``/status`` URL of ``http://host:port[/metrics]``, or of a bare ``host:port``."""
    if "://" not in where:
        where = f"http://{where}"
    return where.rstrip("/").removesuffix("/metrics").removesuffix("/status") + "/status"


def _ago(now: float, then: float | None) -> str:
    return "never" if then is None else f"{max(0.0, now - then):.1f} s ago"


def _status_summary(s: dict[str, Any]) -> str:
    """What an operator asks first: which role, how far the log goes, and for each slave
    whether it keeps up (bytes and seconds behind, last ack); for a slave, whether it is
    connected to its master and, when not, since when and why."""
    now = s["time"]
    lines = [
        f"{s['broker_name']} (broker id {s['broker_id']}) {s['role']}: "
        f"offsets {s['min_offset']}..{s['max_offset']}"
    ]
    if "connections" in s:
        conns = s["connections"]
        lines.append(
            f"  {len(conns)} slave connection(s), push2SlaveMaxOffset {s['push2slave_max_offset']}"
        )
        for c in conns:
            who = f"slave id {c['slave_id']}" if c.get("slave_id") is not None else "slave"
            lag = c.get("lag_seconds")
            # Right after a reconnect no ack has timed a record yet; nothing to send is no lag.
            if lag is None and c["lag_bytes"] == 0:
                lag = 0.0
            lag_time = "unknown" if lag is None else f"{lag:.1f} s"
            lines.append(
                f"  {who} at {c['address']}: {c['state']} since {_ago(now, c['since'])}, "
                f"acked {c['slave_ack_offset']} ({c['lag_bytes']} bytes, {lag_time} behind), "
                f"last ack {_ago(now, c.get('last_ack'))}"
            )
    elif "state" in s:
        master = s.get("master_address") or "(none yet: waiting for the name server)"
        connected = s["state"] == "TRANSFER"
        verb = "replicating from" if connected else "not replicating from"
        lines.append(
            f"  {verb} {master}: {s['state']} since {_ago(now, s.get('state_since'))}, "
            f"received {s['bytes_received']} bytes over {s['connects']} connection(s)"
        )
        error = s.get("last_error")
        if error is not None:
            lines.append(f"  last error {_ago(now, error['at'])}: {error['reason']}")
        if s.get("slave_read_enable") is False:
            lines.append(
                "  serves no messages to consumers (slaveReadEnable=false, RocketMQ's default): "
                "while the master is down its consumers wait for it"
            )
        stop = s.get("stopped")
        if stop is not None:
            lines.append(
                f"  STOPPED at offset {stop['offset']}: {stop['reason']} (master {stop['master']})"
            )
    if "timer" in s:
        lines.append(_timer_summary(now, s["timer"]))
    lines.extend(_lag_summary(s.get("consumers") or []))
    return "\n".join(lines)


def _timer_summary(now: float, t: dict[str, Any]) -> str:
    """The timer's backlog and lateness: what waits, how far delivery got, how late."""
    if not t["delivering"]:
        return (
            f"  timer: {t['pending']} message(s) placed, delivered by the master "
            f"({t['enqueue_behind']} not placed yet)"
        )
    behind = max(0.0, now - t["read_time"])
    return (
        f"  timer: {t['pending']} message(s) waiting, {t['enqueue_behind']} not placed yet; "
        f"{t['delivered']} delivered, the last {t['last_lateness_ms']} ms late (worst "
        f"{t['max_lateness_ms']} ms); delivery at {behind:.1f} s behind now"
    )


def _lag_summary(queues: list[dict[str, Any]]) -> list[str]:
    """One line per consumer group and topic: messages not yet consumed, in how many queues
    (``mqadmin consumerProgress``'s Diff Total, from this broker's queues)."""
    totals: dict[tuple[str, str], list[int]] = {}
    for q in queues:
        total = totals.setdefault((q["group"], q["topic"]), [0, 0, 0])
        total[0] += q["lag"]
        total[1] += 1 if q["lag"] else 0
        total[2] += 1
    return [
        f"  consumer group {group} on {topic}: lag {lag} message(s) in {behind} of {n} queue(s)"
        for (group, topic), (lag, behind, n) in sorted(totals.items())
    ]


def _benches_root() -> Path | None:
    """The checkout holding ``benches/``: ``$ROCKETHA_BENCHES``, else the current directory or
    the nearest parent with one."""
    configured = os.environ.get("ROCKETHA_BENCHES")
    candidates = [Path(configured)] if configured else [Path.cwd(), *Path.cwd().parents]
    return next((p for p in candidates if (p / "benches" / "__main__.py").is_file()), None)


def cmd_bench(args: argparse.Namespace) -> int:
    """Runs ``python -m benches`` from the checkout: the harness and its native baselines are not
    part of the installed package, which imports nothing from them."""
    root = _benches_root()
    if root is None:
        where = os.environ.get("ROCKETHA_BENCHES") or f"{Path.cwd()} or its parents"
        asked_help = bool({"-h", "--help"} & set(args.bench_args))
        print(
            f"rocketha bench: no benches/ in {where}: run it from a rocketha repository "
            "checkout, or set ROCKETHA_BENCHES to the checkout's root"
            + ("; `rocketha bench --help` there lists the scenarios" if asked_help else ""),
            file=sys.stderr,
        )
        # An error, --help or not: the scenarios cannot be listed from here.
        return 2
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    harness = _children.spawn([sys.executable, "-m", "benches", *args.bench_args], env=env)

    # The harness has a process group of its own: SIGTERM and Ctrl-C reach it through us,
    # and it stops its peers before it exits, which we wait for.
    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            harness.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in _STOP_SIGNALS}
    try:
        code = harness.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _children.stop(harness)
    return 128 - code if code < 0 else code


def _parser() -> argparse.ArgumentParser:
    """Every subcommand with its options; each sets ``func``, the ``cmd_*`` that runs it."""
    parser = argparse.ArgumentParser(
        prog="rocketha",
        description="RocketMQ's replicated commit log: brokers, a name server, producers, and "
        "tools for stores. `rocketha demo` shows a master and a slave at work.",
        epilog="Each command has its own --help. -v / -q work before or after the command.",
    )
    parser.add_argument("--version", action="version", version=f"rocketha {__version__}")
    # -v / -q go before or after the subcommand; after it they only override what was given.
    logs = argparse.ArgumentParser(add_help=False)
    options: list[tuple[argparse.ArgumentParser, dict[str, Any]]] = [
        (parser, {}),
        (logs, {"default": argparse.SUPPRESS}),
    ]
    for p, kw in options:
        p.add_argument("-v", "--verbose", action="store_true", help="log at INFO", **kw)
        p.add_argument("-q", "--quiet", action="store_true", help="errors only, no progress", **kw)
    sub = parser.add_subparsers(dest="command", required=True)
    add = functools.partial(sub.add_parser, parents=[logs])

    _add_demo(add)
    _add_namesrv(add)
    _add_broker(add)
    _add_produce(add)
    _add_consume(add)
    _add_status(add)
    add_inspect(add)
    add_repair(add)
    add_admin(add)

    # Its options belong to the harness (python -m benches), which parses them itself.
    bench = sub.add_parser(
        "bench", help="run the benchmarks (from a repo checkout)", add_help=False
    )
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command != "bench" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.bench_args = rest
    logging.basicConfig(
        level=logging.ERROR if args.quiet else logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except RocketHAError as e:
        print(f"rocketha: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        # One line a person can act on (the path and the reason), not a traceback.
        print(f"rocketha: {e}", file=sys.stderr)
        return 2
    except _children.StopSignal as e:
        print(f"rocketha: {e}", file=sys.stderr)
        return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())
