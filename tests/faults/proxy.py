"""A TCP proxy that injects faults into a stream: between a slave and its master, or a client
and the broker (`to_slave` is then the answers, `to_master` the requests).

Each accepted connection is numbered from 0; a :class:`Fault` sees every chunk read from either
side and decides what the other side receives. The faults here act on connection 0 only, so the
slave's reconnection shows whether replication recovers from them.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections.abc import Callable

#: The master -> slave frame header: ``i64 physicOffset | i32 bodySize`` (SPEC section 2).
HEADER_LEN = 12

Send = Callable[[bytes], None]


class Cut(Exception):
    """Raised by a fault to close both sides of the connection."""


class Fault:
    """Forwards everything unchanged; subclasses override what they disturb."""

    def to_slave(self, conn: int, data: bytes, send: Send) -> None:
        send(data)

    def to_master(self, conn: int, data: bytes, send: Send) -> None:
        send(data)


class CutAfter(Fault):
    """Closes connection 0 after ``after`` bytes towards the slave: mid-frame, almost surely."""

    def __init__(self, after: int) -> None:
        self.left = after

    def to_slave(self, conn: int, data: bytes, send: Send) -> None:
        if conn != 0:
            return send(data)
        if len(data) >= self.left:
            send(data[: self.left])
            raise Cut
        self.left -= len(data)
        send(data)


class StallAfter(Fault):
    """After ``after`` bytes towards the slave, connection 0 goes silent both ways for
    ``seconds`` (past haHousekeepingInterval), then resumes if the peers are still there."""

    def __init__(self, after: int, seconds: float) -> None:
        self.left = after
        self.seconds = seconds
        self.until: float | None = None

    def _hold(self) -> None:
        if self.until is not None:
            time.sleep(max(0.0, self.until - time.monotonic()))

    def to_slave(self, conn: int, data: bytes, send: Send) -> None:
        if conn != 0:
            return send(data)
        if self.until is None and len(data) >= self.left:
            send(data[: self.left])
            data = data[self.left :]
            self.until = time.monotonic() + self.seconds
        elif self.until is None:
            self.left -= len(data)
        self._hold()
        send(data)

    def to_master(self, conn: int, data: bytes, send: Send) -> None:
        if conn == 0:
            self._hold()
        send(data)


class Delay(Fault):
    """Holds every chunk, both ways and on every connection, for ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def to_slave(self, conn: int, data: bytes, send: Send) -> None:
        time.sleep(self.seconds)
        send(data)

    def to_master(self, conn: int, data: bytes, send: Send) -> None:
        time.sleep(self.seconds)
        send(data)


class Rechunk(Fault):
    """Re-cuts the stream towards the slave into pieces of 1..``largest`` bytes, each sent on
    its own (TCP_NODELAY), so frames and headers arrive split at arbitrary boundaries."""

    def __init__(self, rng: random.Random, largest: int = 700) -> None:
        self.rng = rng
        self.largest = largest

    def to_slave(self, conn: int, data: bytes, send: Send) -> None:
        while data:
            n = self.rng.randint(1, self.largest)
            send(data[:n])
            data = data[n:]
            if self.rng.random() < 0.05:
                time.sleep(0.001)


class FlipByte(Fault):
    """XORs one byte of frame ``frame`` on connection 0: header byte ``header_at``, or body
    byte ``body_at`` when ``header_at`` is None. With ``inside``, the flip goes to the first
    body byte from ``body_at`` on (in that frame or a later one) that ends a run of
    :data:`RUN` bytes equal to ``inside``: with message bodies made of that byte, the flip lands
    inside a message body, which the body CRC covers, never in a record header field that no
    check covers (only the per-frame CRC extension catches those)."""

    RUN = 16

    def __init__(
        self,
        frame: int,
        xor: int,
        *,
        header_at: int | None,
        body_at: int = 0,
        inside: int | None = None,
    ) -> None:
        self.target_frame = frame
        self.xor = xor
        self.header_at = header_at
        self.body_at = body_at
        self.inside = inside
        self.flipped = False
        # Where the stream is: frame number, header bytes seen, body bytes left.
        self.frame = 0
        self.header = bytearray()
        self.body_left = 0
        self.body_pos = 0
        #: Body bytes equal to ``inside`` just before this one.
        self.run = 0

    def _body_hit(self, byte: int) -> bool:
        if self.header_at is not None:
            return False
        if self.inside is None:
            return self.body_pos == self.body_at and self.frame == self.target_frame
        hit = (
            (self.frame, self.body_pos) >= (self.target_frame, self.body_at)
            and byte == self.inside
            and self.run >= self.RUN
        )
        self.run = self.run + 1 if byte == self.inside else 0
        return hit

    def _is_target(self, byte: int) -> bool:
        """Consumes one byte of the stream; True if it is the one to flip."""
        if self.body_left:
            hit = self._body_hit(byte)
            self.body_pos += 1
            self.body_left -= 1
            if not self.body_left:
                self.frame += 1
            return hit
        hit = self.header_at == len(self.header) and self.frame == self.target_frame
        self.header.append(byte)
        if len(self.header) == HEADER_LEN:
            self.body_left = max(0, int.from_bytes(self.header[8:], "big", signed=True))
            self.body_pos = 0
            self.header.clear()
            if not self.body_left:
                self.frame += 1
        return hit

    def to_slave(self, conn: int, data: bytes, send: Send) -> None:
        if conn != 0 or self.flipped:
            return send(data)
        out = bytearray(data)
        for i, b in enumerate(data):
            if self._is_target(b):
                out[i] ^= self.xor
                self.flipped = True
                break
        send(bytes(out))


class FaultProxy:
    """Listens on 127.0.0.1 (OS-chosen port) and relays to ``upstream`` through ``fault``."""

    def __init__(self, upstream: str, fault: Fault) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.fault = fault
        self.connections = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                conn = self.connections
                self.connections += 1
                self._sockets += [client, server]
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for src, dst, forward in (
                (server, client, self.fault.to_slave),
                (client, server, self.fault.to_master),
            ):
                threading.Thread(
                    target=self._pump, args=(conn, src, dst, forward), daemon=True
                ).start()

    @staticmethod
    def _pump(
        conn: int,
        src: socket.socket,
        dst: socket.socket,
        forward: Callable[[int, bytes, Send], None],
    ) -> None:
        try:
            while data := src.recv(65536):
                forward(conn, data, dst.sendall)
        except (Cut, OSError):
            pass
        finally:
            # Either direction ending ends the connection, as a cut cable would.
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
