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
import os

from rocketha import _core
from rocketha._events import EventPump, cancel_stop_at_exit, stop_at_exit

log = logging.getLogger("rocketha.namesrv")

#: RocketMQ's default name server address.
DEFAULT_LISTEN = "127.0.0.1:9876"


class NameServer:
    """A name server listening on ``listen`` (``ip:port``; port 0 picks a free one)."""

    def __init__(
        self,
        listen: str = DEFAULT_LISTEN,
        *,
        broker_channel_expired_time_ms: int | None = None,
        tls: _core.ServerTls | None = None,
        kv_config_path: str | os.PathLike[str] | None = None,
    ) -> None:
        """``broker_channel_expired_time_ms``: how long a broker that names no heartbeat
        timeout stays routed without registering again (RocketMQ's 120 s when left out).
        ``tls``: TLS on the port (:func:`rocketha.tls.server_tls`). ``kv_config_path``: the
        file its KV config (``mqadmin updateKvConfig``) is kept in (RocketMQ's
        ``kvConfigPath``); without it, in memory until the name server stops."""
        self._listen = listen
        self._expired_time_ms = broker_channel_expired_time_ms
        self._tls = tls
        self._kv_config_path = kv_config_path
        self._handle: _core.NameServer | None = None
        self._pump: EventPump[tuple[str, str, str, bool]] | None = None

    def start(self) -> NameServer:
        """Listens and serves; a second call (``with`` after ``start()``) is the same server."""
        if self._handle is not None:
            return self
        self._handle = _core.NameServer(
            self._listen,
            broker_channel_expired_time_ms=self._expired_time_ms,
            tls=self._tls,
            kv_config_path=self._kv_config_path,
        )
        log.info("name server listening on %s", self._handle.listen_address)
        self._pump = EventPump("rocketha-namesrv-events", self._handle.next_events, _log_event)
        stop_at_exit(self.shutdown)
        return self

    def shutdown(self) -> None:
        if self._pump is None or self._handle is None:
            return
        cancel_stop_at_exit(self.shutdown)
        self._handle.shutdown()
        self._pump.stop()
        self._pump = None
        self._handle = None

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


def _log_event(event: tuple[str, str, str, bool]) -> None:
    address, kind, reason, problem = event
    log.log(logging.WARNING if problem else logging.INFO, "%s %s: %s", address, kind, reason)


__all__ = ["DEFAULT_LISTEN", "NameServer"]
