"""RocketMQ's default ports, held while the suite runs so that no test binds one by accident.

A test that leaves ``listenPort`` or a name server's address at its default would pass on a
clean machine and fail on the one where a user follows the README and then runs ``make test``
(a broker on 10911 already). Holding the ports makes such a test fail everywhere. Tests that
mean the default ports run in a network namespace of their own (``tests/test_docs.py``,
``tests/test_cli_default_ports.py``), where these holds do not reach.

``python tests/default_ports.py`` holds them in a process of its own until it is killed, as
``.ci/run`` does around ``make test`` (cargo's tests included), listening like a real broker.
"""

from __future__ import annotations

import errno
import signal
import socket

#: The name server, the broker's VIP channel (listenPort - 2), client port and HA port.
DEFAULT_PORTS = (9876, 10909, 10911, 10912)


def hold(ports: tuple[int, ...] = DEFAULT_PORTS, *, listen: bool = False) -> list[socket.socket]:
    """Binds each free port on 127.0.0.1 (a later bind of 0.0.0.0 or 127.0.0.1 to it fails);
    a port someone else holds is held already. Without ``listen`` a connect is refused."""
    held = []
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as e:
            sock.close()
            if e.errno != errno.EADDRINUSE:
                raise
            continue
        if listen:
            sock.listen()
        held.append(sock)
    return held


if __name__ == "__main__":
    sockets = hold(listen=True)
    print(f"holding 127.0.0.1 ports {[s.getsockname()[1] for s in sockets]}", flush=True)
    while True:
        signal.pause()  # until SIGTERM or SIGINT ends the process
