"""What the ``rocketha`` subcommands share: how they are added, and how a command signs its
requests for a broker with ``aclEnable=true``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from rocketha.acl import SessionCredentials
from rocketha.exceptions import ConfigError

#: What each ``add_*`` is given: the subcommands' ``add_parser``, with ``-v`` / ``-q``.
AddParser = Callable[..., argparse.ArgumentParser]

#: Where ``--access-key``'s secret comes from: never the command line, which ``ps`` shows.
SECRET_KEY_ENV = "ROCKETHA_SECRET_KEY"
SIGNING_HELP = f"sign requests for a broker with aclEnable=true (secret key: ${SECRET_KEY_ENV})"


def credentials(args: argparse.Namespace) -> SessionCredentials | None:
    """``--access-key`` with the secret key from ``$ROCKETHA_SECRET_KEY``, for a broker with
    ``aclEnable=true``."""
    if args.access_key is None:
        return None
    secret = os.environ.get(SECRET_KEY_ENV, "")
    if not secret:
        raise ConfigError(
            f"--access-key {args.access_key}: set the account's secret key in ${SECRET_KEY_ENV}"
        )
    return SessionCredentials(args.access_key, secret)


__all__ = ["SECRET_KEY_ENV", "SIGNING_HELP", "AddParser", "credentials"]
