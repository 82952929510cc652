"""Start programs in their own process group under a watchdog, and stop every process they started.

Both servers and client programs run in a new session, so that Ctrl-C on a terminal reaches
omnibench alone, and omnibench stops every process a program spawned (orphaned children that
hold GPU memory are a known failure mode of the servers). Each program runs under a small
watchdog process (:mod:`omnibench_core.process.watchdog`) that stops the whole tree when omnibench asks,
and also when omnibench dies, even by SIGKILL. A stop cannot be interrupted halfway: SIGINT and
SIGTERM during a stop only cut its grace short.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .proctree import Tree, add_token, alive, read_stat
from .stopping import StopRecord, stop_members

# The folder that holds omnibench_core/: on the watchdog's PYTHONPATH, so it imports this very
# package (it named omnibench_core/ itself, which only the installed package's finder made work)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def watchdog_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The watchdog's environment: ``environ`` with the folder holding this omnibench_core first on
    PYTHONPATH, so the watchdog imports this very package, installed or not."""
    env = dict(environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    return env


# coverage.py's subprocess hook is a .pth file that starts measuring where one of these is set
COVERAGE_VARS = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")


def watchdog_argv(python: str, ctl: int, report: int, environ: Mapping[str, str]) -> list[str]:
    """The watchdog's command line. ``-S``: no site (no .pth file, no installed finder to import; the
    package root is on PYTHONPATH, :func:`watchdog_env`): 46 CPU-ms a start against 53 with site
    (benchmarks/bench_watchdog_start.py), and one starts per program. Where coverage.py measures
    subprocesses (:data:`COVERAGE_VARS` set), site runs, so its hook measures the watchdog too."""
    site = [] if any(environ.get(var) for var in COVERAGE_VARS) else ["-S"]
    return [python, *site, "-m", "omnibench_core.process.watchdog", "--ctl", str(ctl), "--report", str(report)]


def build_env(base: Mapping[str, str], set_: Mapping[str, str], unset: Sequence[str]) -> dict[str, str]:
    """``base`` with ``unset`` removed and ``set_`` applied, as the runbook's shell block does."""
    env = {k: v for k, v in base.items() if k not in set(unset)}
    env.update({k: str(v) for k, v in set_.items()})
    return env


def log_tail(path: Path, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log file (reads at most ``max_bytes`` from its end)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(data.splitlines()[-lines:]) or "(log is empty)"


def group_members(pgid: int, proc: Path = Path("/proc")) -> list[int]:
    """Pids of the live (non-zombie) processes in group ``pgid``, read from /proc.

    Zombies are left out: they hold no memory or port, and an orphan's zombie waits for
    whatever reaps orphans on this host, which can take seconds in a container.
    """
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may contain spaces; fields after it are fixed.
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """True while any live process of the group exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    if Path("/proc/self/stat").exists():
        return bool(group_members(pgid))
    return True



class WatchedPopen:
    """The program under a watchdog, seen like a :class:`subprocess.Popen` of its leader.

    ``pid`` is the leader's pid; ``poll()``, ``wait()`` and ``returncode`` give the leader's exit
    code (negative: killed by that signal), as the watchdog, its parent, reports it.
    """

    def __init__(self, args: Sequence[str], watchdog: subprocess.Popen[bytes], ctl: int, report: int):
        self.args = list(args)
        self.watchdog = watchdog
        self.pid = 0
        self.returncode: int | None = None
        self.final: StopRecord | None = None  # the watchdog's last word: "stopped" or "done"
        self.lost = False  # the report pipe closed without a final record
        self.error: dict[str, Any] | None = None  # the watchdog could not start the program: errno, where
        self.taken = False  # a stop has returned ``final`` already
        self._ctl, self._report, self._buffer = ctl, report, b""
        self._closed = False

    # -- the pipes -----------------------------------------------------------------------
    def send(self, line: str) -> bool:
        """Write one control line; False when the watchdog is gone. Safe in a signal handler."""
        if self._ctl < 0:
            return False
        try:
            os.write(self._ctl, (line + "\n").encode())
            return True
        except OSError:
            return False

    def pump(self, timeout: float | None) -> None:
        """Read and apply what the watchdog reported, waiting up to ``timeout`` for something."""
        if self._closed:
            return
        ready, _, _ = select.select([self._report], [], [], timeout)
        if not ready:
            return
        data = os.read(self._report, 65536)
        if not data:
            self._close()
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._apply(line.decode())

    def _apply(self, line: str) -> None:
        word, _, rest = line.partition(" ")
        if word == "started":
            self.pid = int(rest)
        elif word == "exit":
            self.returncode = int(rest)
        elif word in ("stopped", "done"):
            self.final = StopRecord.from_dict(json.loads(rest))
            if self.final.exit_code is not None and self.returncode is None:
                self.returncode = self.final.exit_code
        elif word == "error":
            self.error = json.loads(rest)

    def _close(self) -> None:
        self._closed = True
        os.close(self._report)
        if self.final is None:
            self.lost = True
        if self._ctl >= 0:
            os.close(self._ctl)
            self._ctl = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.watchdog.wait(timeout=5)  # it exits right after its last word

    @property
    def closed(self) -> bool:
        """True once the watchdog closed its report pipe (it exited)."""
        return self._closed

    # -- Popen's interface ---------------------------------------------------------------
    def poll(self) -> int | None:
        """The leader's exit code once it exited, else None."""
        while not self._closed and self.returncode is None:
            before = (self.returncode, self._closed, len(self._buffer))
            self.pump(0)
            if (self.returncode, self._closed, len(self._buffer)) == before:
                break
        if self.returncode is None and self._closed and self.pid and not alive(self.pid):
            # The watchdog died without saying (SIGKILL); its death signal killed the leader.
            self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the leader to exit; :class:`subprocess.TimeoutExpired` after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self.pump(0.1 if left is None else min(0.1, left))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the leader (not its group) while it runs."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM to the leader."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the leader."""
        self.send_signal(signal.SIGKILL)


@contextlib.contextmanager
def _signals_hurry(on_signal: Callable[[str], None]) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM call ``on_signal(name)`` instead of raising.

    Only the main thread can set handlers; elsewhere this does nothing (signals are delivered to
    the main thread anyway).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum: int, frame: object) -> None:
        on_signal(signal.Signals(signum).name)

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)  # None: set outside Python


@dataclass
class GroupProcess:
    """A running program that leads its own process group, under a watchdog.

    ``popen`` is the leader as a Popen-like object (:class:`WatchedPopen`, or a plain
    :class:`subprocess.Popen` for a GroupProcess built without a watchdog). ``token`` is carried
    in the environment of every process the program starts. ``last_stop`` is the record of the
    latest stop.
    """

    argv: tuple[str, ...]
    popen: WatchedPopen | subprocess.Popen[bytes]
    log_path: Path
    started_at: float
    watchdog: subprocess.Popen[bytes] | None = None
    token: str = ""
    last_stop: StopRecord | None = None
    born: int = 0  # the watchdog's start (ProcInfo.start): the program and its token came after it

    @property
    def pid(self) -> int:
        """The leader's pid."""
        return self.popen.pid

    @property
    def pgid(self) -> int:
        """The process group id (equal to the leader's pid: it is a session leader)."""
        return self.popen.pid

    def exited(self) -> int | None:
        """The leader's exit code once it exited, else None."""
        return self.popen.poll()

    def tree(self) -> Tree:
        """How to recognise this program's processes (below the watchdog, group, session, token)."""
        root = self.watchdog.pid if self.watchdog is not None else self.pid
        return Tree(root=root, pgid=self.pgid, token=self.token, born=self.born)

    def members(self, proc: Path = Path("/proc")) -> set[int]:
        """The live pids of this program now (the watchdog itself not included)."""
        return self.tree().members(proc)

    def stop(self, grace_s: float) -> str:
        """SIGTERM every process of the program, wait up to ``grace_s``, then SIGKILL what is left.

        Returns how it ended: ``"exited"`` (nothing left to stop), ``"terminated"`` or
        ``"killed"``. :meth:`stop_tree` returns the full record (also kept in ``last_stop``).
        """
        return self.stop_tree(grace_s).how

    def stop_tree(self, grace_s: float, *, hurry_on_signals: bool = True, extra_wait_s: float = 30.0) -> StopRecord:
        """Stop every process of the program and return what happened.

        The stop always completes: with ``hurry_on_signals`` (the default), SIGINT and SIGTERM to
        omnibench during the stop do not raise; they end the grace at once (SIGKILL) and are
        named in ``shortened_by`` (and ``notes``). Nothing is re-raised: the caller decides from
        the record whether the run goes on. If the watchdog is gone, or does not answer within
        ``grace_s + extra_wait_s``, omnibench stops the program's processes itself.
        """
        received: list[str] = []
        link = self.popen if isinstance(self.popen, WatchedPopen) else None

        def on_signal(name: str) -> None:
            received.append(name)
            if link is not None:
                link.send("kill")

        def hurry() -> str | None:
            return received[0] if received else None

        shield = _signals_hurry(on_signal) if hurry_on_signals else contextlib.nullcontext()
        with shield:
            record = self._ask_watchdog(link, grace_s, grace_s + extra_wait_s) if link is not None else None
            if record is None:  # no watchdog, it is gone, or this is a second stop: do it here
                record = self._stop_here(grace_s, hurry, lost=link is not None and not link.taken)
        if received:
            shortened = received[0] if record.shortened_by is not None else None
            record = dataclasses.replace(
                record, shortened_by=shortened,
                notes=(*record.notes, f"received during the stop: {', '.join(received)}"))
        self.last_stop = record
        return record

    def _ask_watchdog(self, link: WatchedPopen, grace_s: float, limit_s: float) -> StopRecord | None:
        """The watchdog's record of the stop; None when it is gone or was asked before."""
        if link.taken:  # a second stop: the watchdog has exited; look again from here
            return None
        if link.final is None and not link.closed:
            link.send(f"stop {grace_s:g}")
            deadline = time.monotonic() + limit_s
            while link.final is None and not link.closed and time.monotonic() < deadline:
                link.pump(0.1)
        exit_deadline = time.monotonic() + 5
        while not link.closed and time.monotonic() < exit_deadline:  # it exits right after its last word
            link.pump(0.1)
        if link.final is None:
            if link.watchdog.poll() is None:  # hung: it cannot be trusted to finish the stop
                link.watchdog.kill()
                link.watchdog.wait()
            return None
        link.taken = True
        final = link.final
        if final.how == "exited":  # "done" earlier: nothing was left, whatever the grace
            final = dataclasses.replace(final, grace_s=grace_s)
        return final

    def _stop_here(self, grace_s: float, hurry: Callable[[], str | None], *, lost: bool) -> StopRecord:
        tree, cache = self.tree(), dict[int, bool]()
        if self.watchdog is not None:  # it has exited (its pid may be reused): find by group, session, token
            tree = dataclasses.replace(tree, root=None)
        popen = self.popen

        def reap() -> None:
            popen.poll()

        record = stop_members(lambda: tree.members(cache=cache), grace_s, pgid=self.pgid, hurry=hurry, reap=reap,
                              exit_code=popen.poll, by="owner")
        if lost:
            record = dataclasses.replace(record, notes=("the watchdog was gone: omnibench stopped the program itself",))
        return record


def obey_ctrl_c() -> None:
    """Make SIGINT raise KeyboardInterrupt here even when this process started with SIGINT ignored.

    A shell without job control starts a background job (``nohup invoke matrix ... &``, a CI
    script) with SIGINT ignored, and its children inherit that. A campaign or A/B worker is stopped
    by its driver with SIGINT: ignored, the stop was lost and the worker measured on after the
    driver had exited 130. Only omnibench's own workers call this; the command a user starts keeps
    the disposition the user's shell gave it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def start_group(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str],
    cwd: str | None = None,
    cpus: Sequence[int] = (),
    orphan_grace_s: float = 5.0,
    python: str = sys.executable,
    start_timeout_s: float = 60.0,
) -> GroupProcess:
    """Start ``argv`` in a new session under a watchdog, stdout and stderr to ``log_path``, pinned to ``cpus``.

    The watchdog (run with ``python``, omnibench's own interpreter) stops every process of the
    program when :meth:`GroupProcess.stop_tree` asks, or ``orphan_grace_s`` after SIGTERM when
    omnibench dies. Raises :class:`OSError` (e.g. FileNotFoundError) when the program cannot be
    started, as :class:`subprocess.Popen` does.
    """
    if isinstance(argv, str):
        raise TypeError("argv must be a list of arguments, not a shell string")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(8)
    spec = {"argv": list(argv), "env": add_token(dict(env), token), "cwd": cwd, "cpus": sorted(set(cpus)),
            "token": token, "orphan_grace_s": orphan_grace_s}
    ctl_r, ctl_w = os.pipe()
    report_r, report_w = os.pipe()
    try:
        with open(log_path, "ab") as log:
            watchdog = subprocess.Popen(
                watchdog_argv(python, ctl_r, report_w, os.environ),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=watchdog_env(os.environ), cwd="/",
                pass_fds=(ctl_r, report_w),
                start_new_session=True,  # Ctrl-C on the terminal is for omnibench only
            )
    except BaseException:
        for fd in (ctl_r, ctl_w, report_r, report_w):
            os.close(fd)
        raise
    os.close(ctl_r)
    os.close(report_w)
    link = WatchedPopen(argv, watchdog, ctl_w, report_r)
    try:
        link.send(json.dumps(spec))
        deadline = time.monotonic() + start_timeout_s
        while not link.pid and not link.closed and link.error is None:
            if time.monotonic() >= deadline:
                watchdog.kill()
                watchdog.wait()
                raise OSError(f"the watchdog for {argv[0]} did not start within {start_timeout_s:g} s (log {log_path})")
            link.pump(0.1)
    except BaseException:
        _abandon(link, orphan_grace_s)
        raise
    if not link.pid:
        failure = link.error
        watchdog.wait()
        if failure:
            raise OSError(failure["errno"], os.strerror(failure["errno"]), failure["where"])
        raise OSError(f"the watchdog for {argv[0]} exited with {watchdog.returncode} (log {log_path})")
    first = read_stat(watchdog.pid)
    return GroupProcess(tuple(argv), link, log_path, time.time(), watchdog=watchdog, token=token,
                        born=first.start if first is not None else 0)


def _abandon(link: WatchedPopen, grace_s: float) -> None:
    """Stop a program whose start was cut short (Ctrl-C while its watchdog started it): the caller
    never got its handle, so without this it would outlive the caller by the orphan grace, its
    port still open after omnibench said it had stopped everything."""
    link.send(f"stop {grace_s:g}")
    try:
        link.watchdog.wait(timeout=grace_s + 30)  # it stops the whole tree, then exits
    except subprocess.TimeoutExpired:
        link.watchdog.kill()  # its death signal takes the leader down
        link.watchdog.wait()


def run_bounded(argv: Sequence[str], timeout_s: float, *, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group and capture its text output, for at most ``timeout_s``.

    On timeout the whole group is SIGKILLed (a hung tool's helpers too) and
    :class:`subprocess.TimeoutExpired` is raised with what it printed; nothing is left running.
    """
    if isinstance(argv, str):
        raise TypeError("argv must be a list of arguments, not a shell string")
    popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, env=None if env is None else dict(env))
    try:
        out, err = popen.communicate(timeout=max(timeout_s, 0.0))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        try:  # the pipes close once every member is dead
            out, err = popen.communicate(timeout=2)
        except subprocess.TimeoutExpired:  # something outside the group holds them: give up on the output
            out, err = "", ""
            for pipe in (popen.stdout, popen.stderr):
                if pipe is not None:
                    pipe.close()
            popen.wait()
        raise subprocess.TimeoutExpired(list(argv), timeout_s, output=out, stderr=err) from None
    return subprocess.CompletedProcess(list(argv), popen.returncode, out, err)
