"""One RocketMQ remoting request from Python, for the harness's own checks of a peer.

Apache RocketMQ's wire format with JSON headers (``serializeTypeCurrentRPC`` JSON, which
every RocketMQ server answers in kind): a frame is its length (4 bytes, big-endian), the
header's length (4 bytes; the top byte is the serialisation type, 0 for JSON), the header and
the body. A request header carries its custom fields as strings in ``extFields``; so does the
answer. :func:`call` opens a connection per request: the checks are few and slow, and a fresh
connection can never read a late answer to an earlier request. :class:`Connection` keeps one
open, as a client does.
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

#: ResponseCode.SUCCESS.
SUCCESS = 0


@dataclass(frozen=True)
class Response:
    """The answer to one request: its code, remark, header fields (strings) and body."""

    code: int
    remark: str | None = None
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        """The body as JSON (see the request's version in :func:`call`)."""
        return json.loads(self.body)


def _read(sock: socket.socket, count: int, address: str) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"{address} closed the connection mid-answer")
        data += chunk
    return bytes(data)


def _frame(code: int, ext: dict[str, object] | None, body: bytes, opaque: int) -> bytes:
    fields = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (ext or {}).items()}
    header = json.dumps(
        {
            "code": code,
            "extFields": fields,
            "flag": 0,
            "language": "PYTHON",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            # Past MQVersion.Version.V4_9_4's ordinal (292): a name server answers in standard
            # JSON, integer map keys quoted, as it does current clients.
            "version": 479,
        }
    ).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _answer(sock: socket.socket, address: str, opaque: int) -> Response:
    """The answer to request ``opaque``; requests the server sends on its own (a broker's
    NOTIFY_CONSUMER_IDS_CHANGED) and answers to other requests are skipped."""
    while True:
        (length,) = struct.unpack(">i", _read(sock, 4, address))
        data = _read(sock, length, address)
        header_len = struct.unpack(">i", data[:4])[0] & 0xFFFFFF
        head = json.loads(data[4 : 4 + header_len])
        if head.get("flag", 0) & 1 and head.get("opaque") == opaque:
            return Response(
                int(head["code"]),
                head.get("remark"),
                {k: str(v) for k, v in (head.get("extFields") or {}).items()},
                data[4 + header_len :],
            )


def call(
    address: str,
    code: int,
    ext: dict[str, object] | None = None,
    body: bytes = b"",
    timeout: float = 5.0,
) -> Response:
    """Request ``code`` of the server at ``address`` (host:port) with header fields ``ext``
    and ``body``; its answer. Raises ``OSError`` when the server cannot be reached or does not
    answer within ``timeout`` seconds."""
    with Connection(address, timeout) as conn:
        return conn.call(code, ext, body)


class Connection:
    """One connection kept open for many requests, as a client's: what a broker holds per
    client, for a harness that counts what clients cost it."""

    def __init__(self, address: str, timeout: float = 5.0) -> None:
        host, port = address.rsplit(":", 1)
        self.address = address
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._opaque = 0

    def call(self, code: int, ext: dict[str, object] | None = None, body: bytes = b"") -> Response:
        """As :func:`call`, on this connection."""
        self._opaque += 1
        self.sock.sendall(_frame(code, ext, body, self._opaque))
        return _answer(self.sock, self.address, self._opaque)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SUCCESS", "Connection", "Response", "call"]
