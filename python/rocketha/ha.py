"""Replication between a master and its slaves: RocketMQ's ``HAService``.

On a master, :class:`HAService` listens on ``haListenPort`` and pushes the commit log to every
slave that connects; on a slave it runs the ``HAClient`` that connects to ``haMasterAddress``.
Both run on Rust threads (epoll); this class observes them: every state change and every closed
connection is logged through :mod:`logging` with its reason, delivered to callbacks, and can be
waited for (RocketMQ 5's ``HAConnectionStateNotificationService``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rocketha import _core
from rocketha._events import EventPump, cancel_stop_at_exit, stop_at_exit
from rocketha.exceptions import RocketHAError
from rocketha.store import MessageStore

log = logging.getLogger("rocketha.ha")

#: ``callback(address, state, reason)``
StateCallback = Callable[[str, str, str], None]

READY, HANDSHAKE, TRANSFER, SHUTDOWN = "READY", "HANDSHAKE", "TRANSFER", "SHUTDOWN"
#: rocketha, slave: the master keeps sending a record that fails validation at one offset, so
#: the client stopped replicating and waits for an operator (a restart, or
#: :meth:`HAService.update_master_address`) instead of reconnecting forever.
STOPPED = "STOPPED"


class HAService:
    """The master side (``master=True``) or the slave client of one store."""

    def __init__(
        self,
        store: MessageStore,
        *,
        master: bool,
        listen: str = "127.0.0.1:0",
        master_address: str | None = None,
        slave_id: int = 1,
        **options: Any,
    ) -> None:
        """``options`` are the native loop's keywords: ``config`` (a broker's
        ``BrokerConfig.native()``, whose HA keys it takes), ``transfer_batch_size``,
        ``heartbeat_interval_ms``, ``housekeeping_interval_ms``, ``auth_secret``; on a master
        ``max_transfer_bytes_per_second`` and ``sync_from_last_file``, on a slave
        ``frame_crc`` and ``accept_zero_body_crc``. Left out, they take ``config``'s values,
        or RocketMQ's defaults from the core."""
        self.store = store
        self.is_master = master
        self._listen = listen
        self._master_address = master_address
        self._slave_id = slave_id
        self._options = options
        self.master: _core.HAMaster | None = None
        self.client: _core.HAClient | None = None
        self._callbacks: list[StateCallback] = []
        self._states: dict[str, str] = {}
        #: The slave's view of its master, for status: when the client entered its state, and
        #: the last problem it reported (a refused connect, a bad frame) with its time.
        self._state_since = time.time()
        self._last_problem: tuple[str, float] | None = None
        self._changed = threading.Condition()
        self._pump: EventPump[tuple[str, str, str, bool]] | None = None
        self._running = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> HAService:
        """Listens (master) or connects (slave); a second call (``with`` after ``start()``)
        is the same service."""
        if self._running:
            return self
        if self.is_master:
            self.master = _core.HAMaster(self.store, self._listen, **self._options)
            log.info("HA master listening on %s", self.master.listen_address)
        else:
            self.client = _core.HAClient(
                self.store, self._master_address, slave_id=self._slave_id, **self._options
            )
            log.info(
                "HA client replicating from %s",
                self._master_address or "the master the name servers name",
            )
        self._running = True
        handle = self.master or self.client
        assert handle is not None
        self._pump = EventPump("rocketha-ha-events", handle.next_events, self._on_event)
        stop_at_exit(self.shutdown)
        return self

    def shutdown(self) -> None:
        if not self._running:
            return
        cancel_stop_at_exit(self.shutdown)
        self._running = False
        handle = self.master or self.client
        if handle is not None:
            handle.shutdown()
        if self._pump is not None:
            self._pump.stop()

    def __enter__(self) -> HAService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- events ----------------------------------------------------------------------------

    def add_state_listener(self, callback: StateCallback) -> None:
        """Calls ``callback(address, state, reason)`` on every state change (event thread)."""
        self._callbacks.append(callback)

    def _on_event(self, event: tuple[str, str, str, bool]) -> None:
        address, state, reason, problem = event
        level = logging.WARNING if problem else logging.INFO
        log.log(level, "HA %s %s: %s", address, state, reason)
        with self._changed:
            if self.client is not None:
                if self._states.get(address) != state:
                    self._state_since = time.time()
                if problem:
                    self._last_problem = (reason, time.time())
            self._states[address] = state
            self._changed.notify_all()
        for callback in list(self._callbacks):
            try:
                callback(address, state, reason)
            except Exception:
                log.exception("HA state callback %r failed", callback)

    def report_problem(self, reason: str) -> None:
        """A problem found outside the HA client that keeps the slave from replicating (its
        haMasterAddress refused by the name servers): shown by ``status`` as the last error."""
        with self._changed:
            self._last_problem = (reason, time.time())

    def wait_for_state(self, address: str | None, state: str, timeout: float) -> bool:
        """Waits until the connection with ``address`` (any connection if None; the master's
        address on a slave) reaches ``state``. False on timeout."""
        deadline = time.monotonic() + timeout

        def reached() -> bool:
            if self.client is not None and (address is None or address == self.master_address):
                return self.client.state == state
            if address is None:
                return state in self._states.values()
            return self._states.get(address) == state

        with self._changed:
            while not reached():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                # Every state change of the client is set before its event is queued, and the
                # event's handler notifies here: waking on events sees every change, no poll.
                self._changed.wait(left)
        return True

    # -- master side -----------------------------------------------------------------------

    def _require_master(self) -> _core.HAMaster:
        if self.master is None:
            raise RuntimeError("this HAService is a slave client; the call needs the master side")
        return self.master

    @property
    def listen_port(self) -> int:
        """The real HA port (useful when configured as 0)."""
        return self._require_master().listen_port

    @property
    def push2slave_max_offset(self) -> int:
        return self._require_master().push2slave_max_offset

    def connections(self) -> list[dict[str, Any]]:
        """One dict per slave connection: address, slave_id (proved by the auth handshake; None
        without haAuthSecret), state, slave_ack_offset, lag_bytes, lag_seconds (how old the
        oldest message the slave lacks is), bytes_sent, since and last_ack (epoch seconds;
        last_ack None before the first report), authenticated."""
        if self.master is None:
            return []
        max_offset = self.store.max_offset
        now = time.time()
        out = []
        for c in self.master.connections():
            acked = c["slave_ack_offset"]
            c["lag_bytes"] = max(0, max_offset - acked)
            c["lag_seconds"] = self._age_of_message_at(acked, now) if c["lag_bytes"] else 0.0
            c["since"] = c.pop("since_ms") / 1000
            last_ack = c.pop("last_ack_ms")
            c["last_ack"] = None if last_ack is None else last_ack / 1000
            out.append(c)
        return out

    def _age_of_message_at(self, offset: int, now: float) -> float | None:
        """Seconds since the message at ``offset`` was stored; None when no message starts
        there (a slave that reported an offset inside a record, or below the min offset)."""
        try:
            batch, _next = self.store.read_messages(offset, 1)
        except (OSError, ValueError, RocketHAError):
            return None
        return max(0.0, now - batch[0].store_timestamp / 1000) if batch else None

    def wait_for_ack(self, offset: int, count: int, timeout: float) -> bool:
        """Waits until ``count`` distinct slaves acknowledged ``offset`` (False on timeout),
        in the same GroupTransferService that SYNC_MASTER puts wait in."""
        return self._require_master().wait_for_ack(offset, count, timeout)

    def slave_ack_offsets(self) -> list[int]:
        """Each live slave's acknowledged offset (one per distinct slave), highest first."""
        return self._require_master().slave_ack_offsets()

    def status(self) -> dict[str, Any]:
        """This side's replication state: the master's listen port and connections, or the
        slave client's master, state and counters."""
        if self.master is not None:
            return {
                "ha_listen_port": self.listen_port,
                "push2slave_max_offset": self.push2slave_max_offset,
                "connections": self.connections(),
            }
        if self.client is not None:
            received, frames, swaps, connects = self.client.stats()
            status: dict[str, Any] = {
                "master_address": self.master_address,
                "state": self.state,
                "state_since": self._state_since,
                "last_error": None
                if self._last_problem is None
                else {"reason": self._last_problem[0], "at": self._last_problem[1]},
                "bytes_received": received,
                "frames": frames,
                "buffer_swaps": swaps,
                "connects": connects,
            }
            stop = self.stop_reason
            if stop is not None:
                status["stopped"] = stop
            return status
        return {}

    # -- slave side ------------------------------------------------------------------------

    @property
    def master_address(self) -> str | None:
        return self.client.master_address if self.client is not None else None

    @property
    def stop_reason(self) -> dict[str, Any] | None:
        """While the slave is STOPPED: the ``offset`` of the record its master keeps sending
        that fails validation, the ``reason`` and the ``master`` address; None otherwise."""
        stop = self.client.stop_reason if self.client is not None else None
        if stop is None:
            return None
        offset, reason, master = stop
        return {"offset": offset, "reason": reason, "master": master}

    @property
    def state(self) -> str:
        """The slave client's state (READY, HANDSHAKE, TRANSFER, SHUTDOWN, STOPPED)."""
        if self.client is None:
            return TRANSFER if self._running else SHUTDOWN
        return self.client.state

    def update_master_address(self, address: str | None) -> None:
        """Points the slave at ``address``; a STOPPED slave replicates again (a config
        change is the operator's action it waits for)."""
        if self.client is None:
            raise RuntimeError("update_master_address is for slaves")
        self.client.update_master_address(address)


__all__ = [
    "HANDSHAKE",
    "READY",
    "SHUTDOWN",
    "STOPPED",
    "TRANSFER",
    "HAService",
    "StateCallback",
]
