"""Client credentials for a broker with ``aclEnable=true`` (RocketMQ's ACL 1.0).

A :class:`Producer` or :class:`PullConsumer` given ``credentials`` signs every request as the
Java client's ``AclClientRPCHook`` does: it adds the ``AccessKey`` and a ``Signature``,
HmacSHA1 under the secret key over the request's fields and body. The broker checks it against
its ``plain_acl.yml`` and answers NO_PERMISSION when the key, the signature or the account's
permission on the topic or group does not hold::

    Producer("127.0.0.1:9876", credentials=SessionCredentials("RocketMQ", "12345678"))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketha._core import ClientTls, MQClientAPI


@dataclass(frozen=True)
class SessionCredentials:
    """RocketMQ's ``SessionCredentials``: an account of the broker's ``plain_acl.yml``. The
    secret key stays out of the repr, so that it never reaches a log."""

    access_key: str
    secret_key: str = field(repr=False)
    #: Sent and signed when set (``SecurityToken``); the plain ACL does not check it.
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("access_key", "secret_key"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"SessionCredentials: {name} must be a non-empty string")


def mq_client_api(
    client_ip: str, credentials: SessionCredentials | None, tls: ClientTls | None = None
) -> MQClientAPI:
    """The wire side of a client, signing its requests when ``credentials`` are given, over
    TLS with ``tls``."""
    if credentials is None:
        return MQClientAPI(client_ip, tls=tls)
    return MQClientAPI(
        client_ip,
        access_key=credentials.access_key,
        secret_key=credentials.secret_key,
        security_token=credentials.security_token,
        tls=tls,
    )
