"""Apache RocketMQ 5's Python gRPC client (``rocketmq-python-client``, PyPI) as a peer: installed
once into a venv of its own under ``~/.cache/rocketha/rocketmq-python-client/<version>/`` (its
protobuf and gRPC pins stay out of rocketha's environment) and run there, one command a
process (``python5/grpc5.py``).

>>> client = PythonGrpcClient.resolve()
>>> client.send(proxy.endpoint, "T", delay_ms=3000)
{'message_id': ..., 'delivery_ms': ..., 'recall_handle': ...}
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

from rocketha import _children

from benches.peers.rocketmq import CACHE, Unavailable, _locked

#: The client the tests run (PyPI's latest 5.x on the day it was pinned).
VERSION = "5.1.2"
SCRIPT = Path(__file__).with_name("python5") / "grpc5.py"


class PythonGrpcClient:
    """The client's venv, ready."""

    def __init__(self, python: Path) -> None:
        self.python = python

    @classmethod
    def resolve(cls, version: str = VERSION) -> PythonGrpcClient:
        home = CACHE.with_name("rocketmq-python-client") / version
        python = home / "bin" / "python"
        home.parent.mkdir(parents=True, exist_ok=True)
        with _locked(home.with_suffix(".lock")):
            if not (home / "installed").exists():
                venv.create(home, with_pip=True, clear=True)
                done = subprocess.run(
                    [
                        str(python),
                        "-m",
                        "pip",
                        "install",
                        "-q",
                        f"rocketmq-python-client=={version}",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                if done.returncode != 0:
                    raise Unavailable(
                        f"pip install rocketmq-python-client=={version}: {done.stderr[-2000:]}"
                    )
                (home / "installed").write_text(version)
        return cls(python)

    def _run(self, *args: str, timeout: float = 120) -> dict[str, Any]:
        done = _children.run(
            [str(self.python), str(SCRIPT), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise AssertionError(
                f"grpc5.py {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}"
            )
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def send(self, endpoint: str, topic: str, *, delay_ms: int) -> dict[str, Any]:
        """One message with a delivery timestamp ``delay_ms`` ahead."""
        return self._run("send", endpoint, topic, str(delay_ms))

    def recall(self, endpoint: str, topic: str, handle: str) -> dict[str, Any]:
        """``Producer.recall_message``: the recalled id, or ``{"error": ...}``."""
        return self._run("recall", endpoint, topic, handle)


if __name__ == "__main__":
    print(PythonGrpcClient.resolve().python, file=sys.stderr)
