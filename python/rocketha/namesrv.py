"""RocketMQ's name server: where brokers register their topics and clients look up routes.

:class:`NameServer` runs the Rust name server (one epoll thread for every connection, a
housekeeping thread that drops brokers silent past their heartbeat timeout) and logs what it
reports through :mod:`logging`: connections, registrations, expiries, and peers closed for
sending garbage.

Anyone who can reach its port can register or unregister brokers, that is rewrite the routes
every producer and consumer follows; keep it on loopback or a trusted network.
"""

from __future__ import annotations

import logging
import threading

from rocketha import _core

log = logging.getLogger("rocketha.namesrv")

#: RocketMQ's default name server address.
DEFAULT_LISTEN = "127.0.0.1:9876"


class NameServer:
    """A name server listening on ``listen`` (``ip:port``; port 0 picks a free one)."""

    def __init__(
        self, listen: str = DEFAULT_LISTEN, *, broker_channel_expired_time_ms: int | None = None
    ) -> None:
        """``broker_channel_expired_time_ms``: how long a broker that names no heartbeat
        timeout stays routed without registering again (RocketMQ's 120 s when left out)."""
        self._listen = listen
        self._expired_time_ms = broker_channel_expired_time_ms
        self._handle: _core.NameServer | None = None
        self._pump: threading.Thread | None = None
        self._running = False

    def start(self) -> NameServer:
        self._handle = _core.NameServer(
            self._listen, broker_channel_expired_time_ms=self._expired_time_ms
        )
        log.info("name server listening on %s", self._handle.listen_address)
        self._running = True
        self._pump = threading.Thread(
            target=self._pump_events, name="rocketha-namesrv-events", daemon=True
        )
        self._pump.start()
        return self

    def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        if self._handle is not None:
            self._handle.shutdown()
        if self._pump is not None:
            self._pump.join(timeout=5)
        self._drain(0)

    def __enter__(self) -> NameServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def listen_address(self) -> str:
        """The real ``ip:port`` (useful when configured with port 0)."""
        if self._handle is None:
            raise RuntimeError("the name server is not started")
        return self._handle.listen_address

    def _pump_events(self) -> None:
        # Blocks until events arrive; shutdown closes the queue, which returns it at once.
        while self._running:
            self._drain(3600)

    def _drain(self, timeout: float) -> None:
        if self._handle is None:
            return
        for address, event, reason, problem in self._handle.next_events(timeout):
            level = logging.WARNING if problem else logging.INFO
            log.log(level, "%s %s: %s", address, event, reason)


__all__ = ["DEFAULT_LISTEN", "NameServer"]
