"""The broker: a message store, replication and acknowledgement wired together by role.

>>> config = BrokerConfig(broker_role="SYNC_MASTER", store_path_root_dir=path, ha_listen_port=0,
...                       ha_listen_address="127.0.0.1")
>>> with Broker(config) as master:
...     master.put(Message("orders", b"hello")).status
<PutStatus.SLAVE_NOT_AVAILABLE: ...>

* ``ASYNC_MASTER``: a put returns once the record is in the local commit log.
* ``SYNC_MASTER``: a put also waits until ``inSyncReplicas - 1`` distinct slaves acknowledged
  it, up to ``slaveTimeout`` ms (``FLUSH_SLAVE_TIMEOUT`` after that; the message stays stored).
  With no slave connected, or the best one more than ``haMaxGapNotInSync`` behind, it returns
  ``SLAVE_NOT_AVAILABLE`` at once.
* ``SYNC_FLUSH`` adds a wait for the msync, run in parallel with the replication wait.
* ``SLAVE``: replicates from ``haMasterAddress``, or from the master's HA address the name
  servers answer its registration with when only ``namesrvAddr`` is set; puts raise
  :class:`NotMasterError`.

Every wait happens in the store's GroupTransferService (Rust): a put crosses into Rust once,
appends, and parks there with the GIL released until its verdict.

Every role serves RocketMQ's remoting protocol on ``listenAddress:listenPort`` (sends,
topic creation, heartbeats, runtime info) and registers with ``namesrvAddr`` every
``registerNameServerPeriod`` ms: the port is bound before the store opens, so with
``listenPort=0`` the messages' store host still names the real port.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketha import _core
from rocketha._core import BrokerController, ClientTls, Message, MessageExt, PutResult, ServerTls
from rocketha._events import EventPump, cancel_stop_at_exit, stop_at_exit
from rocketha.config import BrokerConfig
from rocketha.exceptions import ConfigError, NotMasterError, OffsetTooSmallError
from rocketha.group_transfer import GroupTransferService
from rocketha.ha import HAService
from rocketha.replicas import ReplicasManager
from rocketha.roles import BrokerRole
from rocketha.store import MessageStore

if TYPE_CHECKING:
    from rocketha.table_tier import TableTier

log = logging.getLogger("rocketha.broker")


@dataclass(frozen=True)
class GetMessageResult:
    """Messages of one queue, and whether the consumer should read from a slave instead."""

    messages: list[MessageExt]
    next_begin_offset: int
    min_offset: int
    max_offset: int
    #: The broker id to read from next (RocketMQ's ``suggestWhichBrokerId``), or None.
    suggest_slave: int | None
    #: The offset asked for is below ``min_offset``: retention deleted it (RocketMQ's
    #: OFFSET_TOO_SMALL, PULL_OFFSET_MOVED to a consumer); ``next_begin_offset`` is the floor.
    offset_moved: bool = False


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


def _first_missing(path: Path) -> Path:
    """The outermost directory of ``path`` that does not exist yet: what opening it creates."""
    path = path.absolute()
    while not path.parent.exists():
        path = path.parent
    return path


class Broker:
    """One RocketMQ broker store with its role. Use as a context manager, or call
    :meth:`start` and :meth:`shutdown`."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.role = config.broker_role
        self._store: MessageStore | None = None
        self.ha: HAService | None = None
        self.group_transfer: GroupTransferService | None = None
        self._metrics: Any = None
        self._controller: BrokerController | None = None
        self._events: EventPump[tuple[str, str, str, bool]] | None = None
        self._started = False
        #: Controller mode: the controller's decisions, applied by :meth:`_change_role`.
        self.replicas: ReplicasManager | None = None
        #: What a role change reopens the client port and the HA side with.
        self._role_parts: tuple[bytes | None, Path | None, tuple[Any, Any]] | None = None
        self._role_lock = threading.Lock()
        self._port = 0
        #: ``tableTierTopics``: the writer of the Delta table (see :mod:`rocketha.table_tier`).
        self.table_tier: TableTier | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def _check_security(self, secret: bytes | None) -> None:
        c = self.config
        insecure_ok = c.remoting_allow_insecure or c.acl_enable
        if not insecure_ok and not ipaddress.ip_address(c.listen_address).is_loopback:
            raise ConfigError(
                f"{c.source}: listenAddress: the client port would listen on {c.listen_address} "
                "without aclEnable: anyone who can reach it could send, pull and create topics. "
                "Set aclEnable=true (with a plain_acl.yml), bind listenAddress=127.0.0.1, or set "
                "remotingAllowInsecure=true to accept the risk."
            )
        if not self.role.is_master or secret is not None or self.config.ha_allow_insecure:
            return
        if not ipaddress.ip_address(self.config.ha_listen_address).is_loopback:
            raise ConfigError(
                f"{self.config.source}: haListenAddress: the HA port would listen on "
                f"{self.config.ha_listen_address} without haAuthSecret: anyone who can reach it "
                "could read the whole commit log and fake acks. Set haAuthSecret (or "
                "haAuthSecretFile / haAuthSecretEnv) on master and slaves, bind "
                "haListenAddress=127.0.0.1, or set haAllowInsecure=true to accept the risk."
            )

    def start(self) -> Broker:
        if self._started:
            return self
        c = self.config
        # The core's config of the fields as they are now: checked, and handed whole to the
        # store, the HA service and the client port.
        native = c.native()
        secret = c.auth_secret()
        acl_file = c.acl_file()
        self._check_security(secret)
        # Certificate files are read before anything opens, so a bad one fails the start clean.
        tls = (c.server_tls(), c.client_tls())
        # Bound first: the store records brokerIP1:listenPort in every message.
        self._controller = BrokerController(f"{c.listen_address}:{c.listen_port}")
        self._port = self._controller.listen_port
        store_host = f"{c.broker_ip1}:{self._port}"
        # A start that fails leaves no empty store behind to be mistaken for a broker's data;
        # a directory that existed before is never touched.
        created = [
            _first_missing(Path(d))
            for d in (c.store_path_root_dir, c.store_path_commit_log)
            if d is not None and not os.path.exists(d)
        ]
        try:
            self._open(native, secret, acl_file, store_host, tls)
        except BaseException:
            self._close_parts()
            for directory in created:
                shutil.rmtree(directory, ignore_errors=True)
            raise
        self._started = True
        stop_at_exit(self.shutdown)
        log.info(
            "broker %s (id %d, %s) started on %s, max offset %d, clients at %s",
            c.broker_name,
            c.broker_id,
            self.role.value,
            c.store_path_root_dir,
            self.store.max_offset,
            self.listen_address,
        )
        return self

    def _open(
        self,
        native: _core.BrokerConfig,
        secret: bytes | None,
        acl_file: Path | None,
        store_host: str,
        tls: tuple[ServerTls | None, ClientTls | None],
    ) -> None:
        c = self.config
        try:
            self._store = self._open_store(native, store_host)
        except OSError as e:
            # The store directory is the one path a broker operator chose: name the key.
            root = c.store_path_root_dir
            why = "it is a file, not a directory" if os.path.isfile(root) else str(e)
            raise ConfigError(f"storePathRootDir={root}: cannot open the store there: {why}") from e
        self._role_parts = (secret, acl_file, tls)
        if c.enable_controller_mode:
            self.replicas = ReplicasManager(self)
            self.replicas.start()
            self.replicas.wait_for_role()
        else:
            self._open_role(native)
        if c.metrics_port is not None:
            self._serve_metrics(c.metrics_port)
        if c.table_tier_topics and c.table_tier_path:
            # Imported only here: it needs pyarrow and deltalake (rocketha[table]).
            from rocketha.table_tier import TableTier

            topics = [t.strip() for t in c.table_tier_topics.split(",") if t.strip()]
            self.table_tier = TableTier(
                self.store,
                c.broker_name,
                topics,
                c.table_tier_path,
                interval=c.table_tier_interval / 1000,
                tail_age=c.table_tier_tail_age / 1000,
            ).start()

    def _serve_metrics(self, port: int) -> None:
        from rocketha.metrics import BrokerMetrics

        c = self.config
        try:
            metrics = BrokerMetrics(self.ha_status)
            self._metrics = metrics.serve(port, c.metrics_address)
        except OSError as e:
            raise ConfigError(
                f"{c.source}: metricsPort: cannot serve metrics on "
                f"{c.metrics_address}:{c.metrics_port}: {e.strerror or e}"
            ) from e

    def _open_role(self, native: _core.BrokerConfig) -> None:
        """The parts that depend on the role: the HA side, the put futures' service, and the
        client port (served, and registered with the name servers)."""
        c = self.config
        is_master = c.broker_role.is_master
        assert self._role_parts is not None
        secret, acl_file, tls = self._role_parts
        # A slave with name servers replicates from its haMasterAddress only once they confirm
        # it is this group's master (the controller checks at each registration).
        check_master = c.ha_master_address if c.namesrv_addr and not is_master else None
        autoswitch = {} if self.replicas is None else {"epochs": self.replicas.epochs}
        self.ha = HAService(
            self.store,
            master=is_master,
            listen=f"{c.ha_listen_address}:{c.ha_listen_port}",
            master_address=None if check_master else c.ha_master_address,
            slave_id=c.broker_id,
            config=native,
            auth_secret=secret,
            **autoswitch,
        ).start()
        if is_master and self.replicas is not None:
            # Before the first put can arrive: each is checked against the SyncStateSet.
            self.replicas.apply_sync_state_set()
        if is_master:
            self.group_transfer = GroupTransferService(self.store).start()
        if self._controller is None:
            self._controller = BrokerController(f"{c.listen_address}:{self._port}")
        assert self.ha is not None
        self._controller.start(
            self.store,
            native,
            ha_master=self.ha.master,
            ha_client=self.ha.client,
            tls=tls[0],
            client_tls=tls[1],
            acl_file=acl_file,
            replicas=None if self.replicas is None else self.replicas.native,
        )
        self._events = EventPump(
            "rocketha-broker-events", self._controller.next_events, self._log_event
        )

    def _open_store(self, native: _core.BrokerConfig, store_host: str) -> MessageStore:
        c = self.config
        return MessageStore.from_config(c.store_path_root_dir, native, store_host=store_host)

    def _log_event(self, event: tuple[str, str, str, bool]) -> None:
        """A connection or registration, logged with its reason."""
        addr, kind, reason, problem = event
        level = logging.WARNING if problem else logging.INFO
        log.log(level, "remoting %s %s: %s", addr, kind, reason)
        if problem and kind == "MASTER_HA_ADDRESS" and self.ha is not None:
            self.ha.report_problem(reason)

    def _close_role(self) -> None:
        """Closes what :meth:`_open_role` opened; the store stays open."""
        controller, self._controller = self._controller, None
        if controller is not None:
            # First: no send arrives while the rest closes; unregisters from the name servers.
            controller.shutdown()
        if self._events is not None:
            self._events.stop()
            self._events = None
        if self.ha is not None:
            self.ha.shutdown()

    def _close_parts(self) -> None:
        if self.table_tier is not None:
            self.table_tier.stop()
        if self.replicas is not None:
            self.replicas.shutdown()
        self._close_role()
        if self._metrics is not None:
            self._metrics.close()
        if self._store is not None:
            # Settles the puts still waiting, so the futures below all get their verdict.
            self._store.close()
        if self.group_transfer is not None:
            self.group_transfer.shutdown()

    def _change_role(self, role: BrokerRole, broker_id: int) -> None:
        """Controller mode: serves as ``role`` (with ``broker_id`` at the name servers: 0 for
        the master) from now on. The client port and the HA side are reopened for it; the
        store stays open. Clients see the port close and reconnect, as to a restart."""
        with self._role_lock:
            # The first decision finds the port bound but not served yet: nothing to close.
            if self._events is not None:
                self._close_role()
                self.ha = None
            if self.group_transfer is not None:
                self.group_transfer.shutdown()
                self.group_transfer = None
            self.config = dataclasses.replace(self.config, broker_role=role, broker_id=broker_id)
            self._open_role(self.config.native())
            # Last: an embedded put is taken once the role says master, the set's policy in place.
            self.role = role
            log.info(
                "broker %s is now %s (id %d at the name servers)",
                self.config.broker_name,
                role.value,
                broker_id,
            )

    def shutdown(self) -> None:
        """Stops replication, flushes and closes the store (no abort marker left)."""
        if not self._started:
            return
        cancel_stop_at_exit(self.shutdown)
        self._started = False
        self._close_parts()
        log.info("broker %s stopped", self.config.broker_name)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- properties ------------------------------------------------------------------------

    @property
    def store(self) -> MessageStore:
        if self._store is None:
            raise RuntimeError("the broker is not started")
        return self._store

    @property
    def max_offset(self) -> int:
        return self.store.max_offset

    @property
    def min_offset(self) -> int:
        return self.store.min_offset

    @property
    def listen_address(self) -> str:
        """``host:port`` of the client port, as clients (and the name servers) see it."""
        if self._controller is None:
            raise RuntimeError("the broker is not started")
        return f"{self.config.broker_ip1}:{self._controller.listen_port}"

    @property
    def ha_listen_port(self) -> int:
        """The HA port actually bound (when ``haListenPort`` is 0)."""
        if self.ha is None or not self.ha.is_master:
            raise RuntimeError("only a started master listens for slaves")
        return self.ha.listen_port

    @property
    def ha_address(self) -> str:
        """``host:port`` a slave should use as ``haMasterAddress``."""
        host = self.config.ha_listen_address
        host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        return f"{host}:{self.ha_listen_port}"

    # -- writes ----------------------------------------------------------------------------

    def _check_master(self) -> None:
        if not self.role.is_master:
            raise NotMasterError(
                f"broker {self.config.broker_name} id {self.config.broker_id} is a SLAVE; "
                "send puts to its master"
            )

    def put(self, msg: Message) -> PutResult:
        """Stores one message and waits as the role and flush type require."""
        self._check_master()
        started = time.perf_counter()
        result = self.store.put(msg)
        if self._metrics is not None:
            self._metrics.observe_put(result.status, started)
        return result

    def put_batch(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Stores messages in one append and waits once, for the last of them."""
        self._check_master()
        started = time.perf_counter()
        results = self.store.put_batch(list(msgs))
        if results and self._metrics is not None:
            self._metrics.observe_put(results[-1].status, started)
        return results

    def put_async(self, msg: Message) -> Future[PutResult]:
        """Stores the message now; the future resolves when its waits are over. The
        GroupTransferService completes it, so no thread blocks per message."""
        self._check_master()
        assert self.group_transfer is not None
        started = time.perf_counter()
        future = self.group_transfer.put(msg)
        if self._metrics is not None:
            metrics = self._metrics

            def observe(f: Future[PutResult]) -> None:
                # A put that raised has no status to count; its future carries the error.
                if not f.cancelled() and f.exception() is None:
                    metrics.observe_put(f.result().status, started)

            future.add_done_callback(observe)
        return future

    # -- reads -----------------------------------------------------------------------------

    def clients(self) -> list[tuple[str, list[str], list[str]]]:
        """``(clientID, producer groups, consumer groups)`` of each connection whose client sent
        HEART_BEAT (RocketMQ's ``ProducerManager`` and ``ConsumerManager``); empty when the
        client port is off."""
        return [] if self._controller is None else self._controller.clients()

    def messages(self, start_offset: int | None = None) -> Iterator[MessageExt]:
        """Every message from ``start_offset`` (a commit log offset) on, from any role."""
        return self.store.messages(start_offset)

    def get_messages(
        self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32
    ) -> GetMessageResult:
        """Reads one queue by queue offset; suggests a slave when this reader is far behind
        (``slaveReadEnable``, ``accessMessageInMemoryMaxRatio``)."""
        try:
            msgs = self.store.get_messages(topic, queue_id, queue_offset, max_count)
        except OffsetTooSmallError:
            (_, _, low, high) = next(q for q in self.store.queues() if q[:2] == (topic, queue_id))
            return GetMessageResult([], low, low, high, None, offset_moved=True)
        queue = next(
            (q for q in self.store.queues() if q[0] == topic and q[1] == queue_id),
            (topic, queue_id, 0, 0),
        )
        suggest = None
        if msgs and self.role.is_master and self.config.slave_read_enable:
            behind = self.store.max_offset - msgs[0].commitlog_offset
            in_memory = _physical_memory() * self.config.access_message_in_memory_max_ratio // 100
            if behind > in_memory:
                suggest = self.config.which_broker_when_consume_slowly
        next_begin = msgs[-1].queue_offset + 1 if msgs else max(queue_offset, queue[2])
        return GetMessageResult(msgs, next_begin, queue[2], queue[3], suggest)

    # -- status ----------------------------------------------------------------------------

    def ha_status(self) -> dict[str, Any]:
        """Replication state, and each consumer group's committed offset against its queues'
        heads (``consumers``), as a dict (what ``rocketha status`` prints)."""
        status: dict[str, Any] = {
            "broker_name": self.config.broker_name,
            "broker_id": self.config.broker_id,
            "role": self.role.value,
            "min_offset": self.store.min_offset,
            "max_offset": self.store.max_offset,
            "time": time.time(),
        }
        if not self.role.is_master:
            status["slave_read_enable"] = self.config.slave_read_enable
        if self.ha is not None:
            status.update(self.ha.status())
        timer = self.store.timer_status()
        if timer is not None:
            dequeuing, pending, read_time_ms, enqueue_behind, delivered, last, worst = timer
            status["timer"] = {
                "delivering": dequeuing,
                "pending": pending,
                "read_time": read_time_ms / 1000,
                "enqueue_behind": enqueue_behind,
                "delivered": delivered,
                "last_lateness_ms": last,
                "max_lateness_ms": worst,
            }
        if self._controller is not None:
            status["consumers"] = [
                {
                    "group": group,
                    "topic": topic,
                    "queue_id": queue_id,
                    "broker_offset": head,
                    "consumer_offset": committed,
                    "lag": max(0, head - committed),
                }
                for group, topic, queue_id, head, committed in self._controller.consumer_lag()
            ]
        return status


__all__ = ["Broker", "GetMessageResult"]
