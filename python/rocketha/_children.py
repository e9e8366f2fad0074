"""Child processes that die with their parent, and the temp directories of runs.

Every process the package, the bench harness (``benches/``) and the tests start goes through
:func:`spawn` (or :func:`run`): the child gets a process group of its own (a Ctrl-C at the
terminal reaches the parent only, which stops its children in order) and the kernel's
parent-death signal, so a parent killed with SIGKILL, whose ``finally`` blocks never run, still
takes its children down. A parent program (``python -m benches``, ``rocketha demo``) calls
:func:`on_stop_signals` so that SIGTERM unwinds it like Ctrl-C; whatever is still running at
exit is stopped by an ``atexit`` hook. Linux only (``prctl``), like the rest of the project.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import FrameType
from typing import Any

from rocketha._service import ServiceThread

#: prctl(2) option: the signal a process gets when the thread that forked it exits.
_PR_SET_PDEATHSIG = 1

#: The signals a parent turns into a clean unwind, and a child must not inherit blocked.
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}

_lock = threading.Lock()
#: Children started and not yet stopped, by pid (guarded by ``_lock``).
_live: dict[int, subprocess.Popen[Any]] = {}
_atexit_registered = False


@functools.cache
def _prctl() -> Callable[..., int]:
    """libc's ``prctl``, resolved in the parent: the child between fork and exec must not load
    libraries or take locks another thread may have held at fork."""
    prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    return prctl


def _die_with_parent(parent: int, prctl: Callable[..., int]) -> Callable[[], None]:
    """The ``preexec_fn``: runs in the child after fork, before exec."""

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal will ever come.
        if os.getppid() != parent:
            os._exit(1)
        # A thread that had SIGTERM blocked (``rocketha broker`` blocks it in its server
        # threads) would hand that mask on: the child would ignore our SIGTERM.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)

    return preexec


class _Spawner:
    """One long-lived thread that forks for every other thread. The parent-death signal fires
    when the *thread* that forked exits, not the process: a child forked by a short-lived worker
    thread (a ``ThreadPoolExecutor`` task, a fixture's helper thread) would be killed as soon as
    that thread ends. The main thread forks itself; it lives as long as the process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.requests: queue.SimpleQueue[
            tuple[Callable[[], subprocess.Popen[Any]], Future[subprocess.Popen[Any]]]
        ] = queue.SimpleQueue()
        # Daemon: it must not keep the process alive, and it dies only with the process.
        ServiceThread("rocketha-spawner", self._serve).start()

    def _serve(self, _service: ServiceThread) -> None:
        while True:
            start, done = self.requests.get()
            try:
                done.set_result(start())
            except BaseException as e:  # handed to the caller's thread, which re-raises it
                done.set_exception(e)

    def call(self, start: Callable[[], subprocess.Popen[Any]]) -> subprocess.Popen[Any]:
        done: Future[subprocess.Popen[Any]] = Future()
        self.requests.put((start, done))
        return done.result()


_spawner: _Spawner | None = None


def _spawner_thread() -> _Spawner:
    global _spawner
    with _lock:
        # A forked child (PySpark's workers) has no copy of the parent's thread.
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        return _spawner


def spawn(args: Sequence[str | os.PathLike[str]], **popen_kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **popen_kwargs)`` in a process group of its own, killed by the
    kernel if this process dies, and registered for :func:`stop` at exit."""
    global _atexit_registered
    start = functools.partial(
        subprocess.Popen,
        args,
        start_new_session=True,
        preexec_fn=_die_with_parent(os.getpid(), _prctl()),
        **popen_kwargs,
    )
    if threading.current_thread() is threading.main_thread():
        proc = start()
    else:
        proc = _spawner_thread().call(start)
    with _lock:
        for pid in [pid for pid, p in _live.items() if p.poll() is not None]:
            del _live[pid]
        _live[proc.pid] = proc
        if not _atexit_registered:
            atexit.register(stop_all)
            _atexit_registered = True
    return proc


def _signal_group(proc: subprocess.Popen[Any], signum: int) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)


def stop(proc: subprocess.Popen[Any], timeout: float = 10.0) -> int:
    """SIGTERM to the child's process group, up to ``timeout`` seconds for it to exit, then
    SIGKILL to the group; its exit status."""
    try:
        _signal_group(proc, signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return kill(proc)
    finally:
        with _lock:
            _live.pop(proc.pid, None)


def kill(proc: subprocess.Popen[Any]) -> int:
    """SIGKILL to the child's process group (no graceful shutdown); its exit status."""
    _signal_group(proc, signal.SIGKILL)
    code = proc.wait()
    with _lock:
        _live.pop(proc.pid, None)
    return code


def stop_all(timeout: float = 10.0) -> None:
    """Stops every child still registered, all at once (the ``atexit`` hook)."""
    with _lock:
        procs = list(_live.values())
    for proc in procs:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, deadline - time.monotonic()))
        kill(proc)


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    input: str | bytes | None = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **popen_kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` through :func:`spawn`: a tool (Maven, a load-generating JVM) that
    outlives neither this process nor its ``timeout``."""
    if capture_output:
        popen_kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    with spawn(args, **popen_kwargs) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        finally:
            stop(proc, timeout=0)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGINT, raised in the main thread by :func:`on_stop_signals`'s handler. A
    ``KeyboardInterrupt``, so pytest tears its fixtures down and ``except Exception`` blocks
    let it through."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    # Python prints and ignores an exception raised in an at-fork callback, and logging's lock
    # release after a fork is one: a stop landing there would be lost and the program would
    # run on. It is delivered again a moment later instead, outside logging.
    if frame is not None and frame.f_globals.get("__name__") == "logging":
        threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
        return
    raise StopSignal(signum)


def on_stop_signals() -> None:
    """For a parent program: SIGTERM and SIGINT raise :class:`StopSignal` in the main thread,
    so ``with`` and ``finally`` blocks stop the children (Python's default for SIGTERM is to
    die on the spot, leaving them to the parent-death signal and its temp dirs behind)."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _raise_stop)


# -- temp directories ------------------------------------------------------------------------

#: Where runs (the bench harness, ``rocketha demo``, the interop tests) keep their files.
RUNS_ROOT = Path(tempfile.gettempdir()) / "rocketha-runs"


def _start_time(pid: int) -> str | None:
    """The live process's start time in clock ticks since boot (``/proc/PID/stat`` field 22):
    with the pid it names one process, whatever pid reuse happened since. None once it died,
    zombie included (a killed run's parent may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _owner(pid: int) -> str:
    return f"{pid}.{_start_time(pid)}"


def _remove_dead_runs() -> None:
    """Removes the directories of runs whose owning process is gone (killed before its
    ``finally`` ran)."""
    for path in RUNS_ROOT.iterdir():
        # NAME is PREFIX-PID.START-RANDOM: the prefix may hold dashes, the rest does not.
        parts = path.name.rsplit("-", 2)
        if len(parts) != 3 or "." not in parts[1]:
            continue
        pid, _, start = parts[1].partition(".")
        if pid.isdigit() and _start_time(int(pid)) != start:
            shutil.rmtree(path, ignore_errors=True)


def run_dir(prefix: str) -> Path:
    """A new directory for this process's run, ``RUNS_ROOT/PREFIX-PID.START-RANDOM``; the
    directories of dead runs go first. The caller removes it when done (:func:`temp_run_dir`)."""
    RUNS_ROOT.mkdir(parents=True, exist_ok=True)
    _remove_dead_runs()
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-{_owner(os.getpid())}-", dir=RUNS_ROOT))


@contextlib.contextmanager
def temp_run_dir(prefix: str) -> Iterator[Path]:
    """:func:`run_dir`, removed when the block ends (``tempfile.TemporaryDirectory`` whose
    leftovers the next run removes if this one is killed)."""
    path = run_dir(prefix)
    with _lock:
        before = set(_live)
    try:
        yield path
    finally:
        # A child started in the block that its owner never got back (a stop signal landing
        # while it started up) would be stopped only at exit, after the removal, and its
        # shutdown would write its store into the path again: stop it first.
        with _lock:
            started = [proc for pid, proc in _live.items() if pid not in before]
        for proc in started:
            stop(proc)
        shutil.rmtree(path, ignore_errors=True)
