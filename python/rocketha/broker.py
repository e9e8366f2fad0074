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
* ``SLAVE``: replicates from ``haMasterAddress``; puts raise :class:`NotMasterError`.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rocketha._core import Message, MessageExt, PutResult
from rocketha.config import BrokerConfig
from rocketha.exceptions import ConfigError, NotMasterError
from rocketha.group_transfer import GroupTransferService
from rocketha.ha import HAService
from rocketha.roles import BrokerRole, FlushDiskType, PutStatus
from rocketha.store import MessageStore

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


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class Broker:
    """One RocketMQ broker store with its role. Use as a context manager, or call
    :meth:`start` and :meth:`shutdown`."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.role = config.broker_role
        self._store: MessageStore | None = None
        self.ha: HAService | None = None
        self.group_transfer: GroupTransferService | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._metrics: Any = None
        self._is_slave = not self.role.is_master
        self._acks_required = 0
        self._slave_timeout = 0.0
        self._flush_timeout: float | None = None
        self._blocking = False
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------

    def _check_security(self, secret: bytes | None) -> None:
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
        secret = c.auth_secret()
        self._check_security(secret)
        self._store = MessageStore(
            c.store_path_root_dir,
            mapped_file_size=c.mapped_file_size_commit_log,
            # The broker waits for SYNC_FLUSH itself, in parallel with replication.
            flush_disk_type=FlushDiskType.ASYNC_FLUSH,
            flush_interval_ms=c.flush_interval_commit_log,
            sync_flush_timeout_ms=c.sync_flush_timeout,
            store_host=c.store_host,
            consume_queue_entries=c.mapped_file_size_consume_queue // 20,
        )
        try:
            flow = c.max_ha_transfer_byte_in_second if c.ha_flow_control_enable else None
            self.ha = HAService(
                self._store,
                master=self.role.is_master,
                listen=f"{c.ha_listen_address}:{c.ha_listen_port}",
                master_address=c.ha_master_address,
                slave_id=c.broker_id,
                transfer_batch_size=c.ha_transfer_batch_size,
                heartbeat_interval_ms=c.ha_send_heartbeat_interval,
                housekeeping_interval_ms=c.ha_housekeeping_interval,
                max_transfer_bytes_per_second=flow,
                sync_from_last_file=c.sync_from_last_file,
                auth_secret=secret,
                frame_crc=c.ha_transfer_crc,
            ).start()
            if self.role is BrokerRole.SYNC_MASTER and self.ha.master is not None:
                self.group_transfer = GroupTransferService(self.ha.master).start()
            if c.metrics_port is not None:
                from rocketha.metrics import BrokerMetrics

                self._metrics = BrokerMetrics(self).serve(c.metrics_port)
        except BaseException:
            self._close_parts()
            raise
        # Decided once here so the put path does not re-derive them per message.
        self._is_slave = not self.role.is_master
        self._acks_required = c.slave_acks_required if self.group_transfer is not None else 0
        self._slave_timeout = c.slave_timeout / 1000
        self._flush_timeout = (
            c.sync_flush_timeout / 1000 if c.flush_disk_type is FlushDiskType.SYNC_FLUSH else None
        )
        self._blocking = bool(self._acks_required) or self._flush_timeout is not None
        self._started = True
        log.info(
            "broker %s (id %d, %s) started on %s, max offset %d",
            c.broker_name,
            c.broker_id,
            self.role.value,
            c.store_path_root_dir,
            self._store.max_offset,
        )
        return self

    def _close_parts(self) -> None:
        if self.group_transfer is not None:
            self.group_transfer.shutdown()
        if self.ha is not None:
            self.ha.shutdown()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self._metrics is not None:
            self._metrics.close()
        if self._store is not None:
            self._store.close()

    def shutdown(self) -> None:
        """Stops replication, flushes and closes the store (no abort marker left)."""
        if not self._started:
            return
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
    def ha_listen_port(self) -> int:
        """The HA port actually bound (when ``haListenPort`` is 0)."""
        if self.ha is None or self.ha.master is None:
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

    def _wait(self, next_offset: int, started: float) -> PutStatus:
        """A blocking put's verdict. The flush thread and the HA loop make progress on their
        own, so checking one wait after the other costs the longer of the two, not the sum;
        each has its own deadline from the moment of the put.

        The replication wait (RocketMQ's ``isSlaveOK`` check, then the wait) is one call that
        parks this thread on the Rust ack table itself (GIL released), woken only by the ack that
        covers ``next_offset``; a hop through the GroupTransferService thread would add two GIL
        handoffs to every put."""
        status = PutStatus.PUT_OK
        if self._flush_timeout is not None and not self.store.wait_flushed(
            next_offset, max(0.0, self._flush_timeout - (time.perf_counter() - started))
        ):
            status = PutStatus.FLUSH_DISK_TIMEOUT
        if self._acks_required:
            assert self.ha is not None and self.ha.master is not None
            replicated = self.ha.master.await_replication(
                next_offset,
                self._acks_required,
                max(0.0, self._slave_timeout - (time.perf_counter() - started)),
                self.config.ha_max_gap_not_in_sync,
            )
            if status is PutStatus.PUT_OK:
                status = replicated
        return status

    def put(self, msg: Message) -> PutResult:
        """Stores one message and waits as the role and flush type require."""
        if self._is_slave:
            self._check_master()
        started = time.perf_counter()
        result = self.store.put(msg)
        if self._blocking:
            status = self._wait(result.next_offset, started)
            if status is not PutStatus.PUT_OK:
                result = result.with_status(status)
        if self._metrics is not None:
            self._metrics.observe_put(result.status, started)
        return result

    def put_batch(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Stores messages in one append and waits once, for the last of them."""
        self._check_master()
        started = time.perf_counter()
        results = self.store.put_batch(list(msgs))
        if not results:
            return results
        status = self._wait(results[-1].next_offset, started)
        if self._metrics is not None:
            self._metrics.observe_put(status, started)
        if status is PutStatus.PUT_OK:
            return results
        return [r.with_status(status) for r in results]

    def put_async(self, msg: Message) -> Future[PutResult]:
        """Stores the message now; the future resolves when its waits are over. Replication
        is watched by the GroupTransferService, so no thread blocks per message."""
        self._check_master()
        started = time.perf_counter()
        future = self._put_async(self.store.put(msg), started)
        if self._metrics is not None:
            metrics = self._metrics

            def observe(f: Future[PutResult]) -> None:
                # A put that raised has no status to count; its future carries the error.
                if not f.cancelled() and f.exception() is None:
                    metrics.observe_put(f.result().status, started)

            future.add_done_callback(observe)
        return future

    def _put_async(self, result: PutResult, started: float) -> Future[PutResult]:
        if self._flush_timeout is not None:
            # The msync wait has no callback form: a worker thread blocks on it.
            if self._executor is None:
                self._executor = ThreadPoolExecutor(4, thread_name_prefix="rocketha-put-async")
            return self._executor.submit(
                lambda: result.with_status(self._wait(result.next_offset, started))
            )
        if self.group_transfer is not None:
            assert self.ha is not None and self.ha.master is not None
            if self.ha.master.in_sync(
                result.next_offset, self._acks_required, self.config.ha_max_gap_not_in_sync
            ):
                return self.group_transfer.submit(result, self._acks_required, self._slave_timeout)
            result = result.with_status(PutStatus.SLAVE_NOT_AVAILABLE)
        out: Future[PutResult] = Future()
        out.set_result(result)
        return out

    # -- reads -----------------------------------------------------------------------------

    def messages(self, start_offset: int | None = None) -> Iterator[MessageExt]:
        """Every message from ``start_offset`` (a commit log offset) on, from any role."""
        return self.store.messages(start_offset)

    def get_messages(
        self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32
    ) -> GetMessageResult:
        """Reads one queue by queue offset; suggests a slave when this reader is far behind
        (``slaveReadEnable``, ``accessMessageInMemoryMaxRatio``)."""
        msgs = self.store.get_messages(topic, queue_id, queue_offset, max_count)
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
        """Replication state as a dict (what ``rocketha status`` prints)."""
        status: dict[str, Any] = {
            "broker_name": self.config.broker_name,
            "broker_id": self.config.broker_id,
            "role": self.role.value,
            "min_offset": self.store.min_offset,
            "max_offset": self.store.max_offset,
            "time": time.time(),
        }
        if self.ha is not None and self.ha.master is not None:
            status["ha_listen_port"] = self.ha.listen_port
            status["push2slave_max_offset"] = self.ha.push2slave_max_offset
            status["connections"] = self.ha.connections()
        elif self.ha is not None and self.ha.client is not None:
            received, frames, swaps, connects = self.ha.client.stats()
            status.update(
                master_address=self.ha.master_address,
                state=self.ha.state,
                bytes_received=received,
                frames=frames,
                buffer_swaps=swaps,
                connects=connects,
            )
        return status


__all__ = ["Broker", "GetMessageResult"]
