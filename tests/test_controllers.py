"""``rocketha.controllers`` and ``rocketha demo --failover`` where Apache RocketMQ's controller
cannot run: Java or Maven missing, Maven failing, a controller that never becomes ready. Fake
``java`` and ``mvn`` scripts on PATH stand in for the real ones, so no JVM starts here (the
real controller runs in ``tests/interop/test_demo_failover.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rocketha import RocketHAError
from rocketha.controllers import (
    Controllers,
    ControllerUnavailable,
    classpath,
    free_ports,
    missing_tools,
)


def _bin(tmp_path: Path, **scripts: str) -> Path:
    """A directory of executable shell scripts, one per keyword (name = body)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return bin_dir


def _rocketha(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": str(path)},
    )


@pytest.mark.parametrize(
    ("tools", "missing"), [((), "java and mvn"), (("java",), "mvn"), (("mvn",), "java")]
)
def test_demo_failover_without_java_or_maven_says_what_to_install(
    tmp_path: Path, tools: tuple[str, ...], missing: str
) -> None:
    bin_dir = _bin(tmp_path, **dict.fromkeys(tools, "exit 0"))
    out = _rocketha(bin_dir, "rocketha", "demo", "--failover")
    assert out.returncode == 2, out.stderr
    assert f"needs {missing} on PATH" in out.stderr and "apt-get install" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    # Nothing was started, so nothing is left: no run directory was even made.
    printed = _rocketha(bin_dir, "rocketha.controllers")
    assert printed.returncode == 2 and f"needs {missing} on PATH" in printed.stderr


def test_missing_tools_is_none_with_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path, java="exit 0", mvn="exit 0")))
    assert missing_tools() is None


def test_a_maven_failure_is_reported_with_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _bin(tmp_path, java="exit 0", mvn="echo 'Could not transfer artifact' >&2; exit 1")
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(ControllerUnavailable, match="Could not transfer artifact") as e:
        classpath(cache=tmp_path / "cache")
    assert "rocketmq-controller:5.4.0" in str(e.value)


def test_a_cached_classpath_is_used_while_its_jars_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jar = tmp_path / "controller.jar"
    jar.touch()
    log = tmp_path / "mvn.log"
    # A fake Maven writes the classpath file it is asked for (-Dmdep.outputFile=...).
    mvn = f'echo run >> {log}; for a; do case "$a" in -Dmdep.outputFile=*) '
    mvn += f'echo {jar} > "${{a#-Dmdep.outputFile=}}";; esac; done'
    monkeypatch.setenv("PATH", str(_bin(tmp_path, java="exit 0", mvn=mvn)))
    assert classpath(cache=tmp_path / "cache") == str(jar)
    assert classpath(cache=tmp_path / "cache") == str(jar)
    assert log.read_text().count("run") == 1, "resolved once, then cached"
    jar.unlink()
    classpath(cache=tmp_path / "cache")
    assert log.read_text().count("run") == 2, "a jar gone: resolved again"


@pytest.mark.parametrize(
    ("java", "error"),
    [
        ("echo 'Error: Could not find or load main class'; exit 1", "exited with 1 before"),
        (f"echo $$ > pid; echo starting; exec {shutil.which('sleep')} 600", "not ready in 0.5 s"),
    ],
    ids=["exits", "hangs"],
)
def test_a_controller_that_never_becomes_ready_fails_and_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, java: str, error: str
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path, java=java)))
    with pytest.raises(RocketHAError, match=error) as e:
        Controllers("unused.jar", tmp_path / "ctl", size=3, timeout=0.5)
    assert "Could not find" in str(e.value) or "starting" in str(e.value), "with its output"
    # The nodes it started (each in its home, the fake java's cwd) were stopped again.
    pids = [int(p.read_text()) for p in (tmp_path / "ctl").glob("n*/pid")]
    assert len(pids) == (3 if "sleep" in java else 0)
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def test_group_state_without_a_controller_says_so(tmp_path: Path) -> None:
    closed = free_ports(1)[0]  # nothing listens there
    args = ["--group", "broker-a", "--controller-addr", f"127.0.0.1:{closed}"]
    out = _rocketha(Path(os.environ["PATH"]), "rocketha.controllers", *args)
    assert out.returncode == 2
    assert f"no controller of 127.0.0.1:{closed} answers as the leader" in out.stderr
    half = _rocketha(Path(os.environ["PATH"]), "rocketha.controllers", "--group", "broker-a")
    assert half.returncode == 2 and "go together" in half.stderr
