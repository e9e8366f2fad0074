"""TLS on the remoting port, with RocketMQ's ``TlsSystemConfig`` keys.

A broker or name server serves TLS with ``tls.server.mode`` (``disabled``, ``permissive``:
TLS and plain clients alike, told apart by their first byte, or ``enforcing``: TLS only), its
certificate ``tls.server.certPath`` and key ``tls.server.keyPath`` (PEM, unencrypted), and
optionally client certificates checked against ``tls.server.trustCertPath``
(``tls.server.need.client.auth`` = ``none``, ``optional`` or ``require``). RocketMQ reads these
as JVM system properties or from ``tls.config.file``; rocketha reads them from ``broker.conf``
(or ``--set``) under the same names.

A client (:class:`~rocketha.Producer`, :class:`~rocketha.PullConsumer`, and a broker's own
connections with ``tls.enable=true``) uses TLS on every connection, to name servers and brokers
alike, as the Java client does with ``useTLS``. It verifies the servers' certificates against a
CA file, or, asked explicitly, trusts any certificate (``tls_verify=False``, RocketMQ's
``tls.test.mode.enable``).
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketha._core import ClientTls, ServerTls
from rocketha.exceptions import ConfigError

#: Why ``tls.server.keyPassword`` and ``tls.client.keyPassword`` are refused.
ENCRYPTED_KEYS_UNSUPPORTED = (
    "encrypted keys are not supported; decrypt the key once (openssl pkcs8 -topk8 -nocrypt) "
    "and keep the file readable only by its server"
)

#: RocketMQ's ``tls.server.*`` keys, by :func:`server_tls` keyword.
SERVER_KEYS = {
    "tls.server.mode": "mode",
    "tls.server.certPath": "cert_path",
    "tls.server.keyPath": "key_path",
    "tls.server.need.client.auth": "need_client_auth",
    "tls.server.trustCertPath": "trust_cert_path",
}


def server_tls(
    mode: str,
    *,
    cert_path: str | None = None,
    key_path: str | None = None,
    need_client_auth: str = "none",
    trust_cert_path: str | None = None,
) -> ServerTls | None:
    """A server's TLS from RocketMQ's ``tls.server.*`` settings, its files read and checked
    now; None when ``mode`` is ``disabled``. Raises :class:`ConfigError` naming the key (and
    the file) at fault."""
    tls = ServerTls(
        mode,
        cert_path=cert_path,
        key_path=key_path,
        need_client_auth=need_client_auth,
        trust_cert_path=trust_cert_path,
    )
    return None if tls.mode == "disabled" else tls


def server_tls_from_properties(props: Mapping[str, str], source: str) -> ServerTls | None:
    """:func:`server_tls` from RocketMQ's keys (``rocketha namesrv --set``)."""
    options: dict[str, str] = {"mode": "disabled"}
    for key, value in props.items():
        if key == "tls.server.keyPassword":
            raise ConfigError(f"{source}: {key}: {ENCRYPTED_KEYS_UNSUPPORTED}")
        if key not in SERVER_KEYS:
            raise ConfigError(f"{source}: unknown key {key!r} (one of {', '.join(SERVER_KEYS)})")
        options[SERVER_KEYS[key]] = value
    try:
        return server_tls(**options)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def client_tls(
    use_tls: bool,
    *,
    trust_cert_path: str | None = None,
    verify: bool = True,
    cert_path: str | None = None,
    key_path: str | None = None,
) -> ClientTls | None:
    """A client's TLS (``useTLS``), or None without it. ``verify=False`` trusts any server
    certificate: encryption without knowing who answers."""
    if not use_tls:
        return None
    return ClientTls(
        trust_cert_path=trust_cert_path,
        insecure=not verify,
        cert_path=cert_path,
        key_path=key_path,
    )


__all__ = ["client_tls", "server_tls", "server_tls_from_properties"]
