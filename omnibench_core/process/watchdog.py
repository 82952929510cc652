"""The watchdog: one small process per program, so that no program outlives omnibench.

``python -m omnibench_core.process.watchdog --ctl FD --report FD`` is started by
:func:`omnibench_core.process.processes.start_group`. It

* makes itself a child subreaper, so descendants that call ``setsid`` and lose their parent are
  reparented to it and stay findable below it;
* starts the program in a new session with ``PR_SET_PDEATHSIG=SIGKILL``, so a SIGKILLed watchdog
  takes the leader down with it;
* reads the owner's control pipe: ``stop <grace_s>`` stops the whole tree, ``kill`` cuts a
  running grace short, end of file means the owner died (even by SIGKILL) and stops the tree;
* writes to the report pipe: ``started <pid>``, ``error <json>``, ``exit <code>``,
  ``stopped <json StopRecord>`` and, when the program and everything it started ended on its own,
  ``done <json StopRecord>``; then it exits.

The first control line is the program as JSON: argv, env, cwd, cpus, token, orphan_grace_s.
Only the standard library is imported, so it starts fast.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import signal
import sys
from typing import Any

from omnibench_core.process.proctree import Tree, read_stat
from omnibench_core.process.stopping import StopRecord, stop_members

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux: the pipe still works, orphans may escape
        return False


class _Lines:
    """Lines from a pipe without blocking; ``eof`` once the writer is gone."""

    def __init__(self, fd: int):
        self.fd, self.buffer, self.eof = fd, b"", False

    def read(self, timeout: float) -> list[str]:
        if self.eof:
            return []
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            data = os.read(self.fd, 65536)
            if not data:
                self.eof = True
            self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        return [line.decode() for line in lines]


class Watchdog:
    """The watchdog's state: the program's leader, its exit code, and the two pipes."""

    def __init__(self, ctl: int, report: int):
        self.ctl, self.report = _Lines(ctl), report
        self.leader = 0
        self.code: int | None = None
        self.token = ""
        self.orphan_grace_s = 5.0
        self.terminated = 0  # SIGTERMs to the watchdog itself: the first stops the tree, a second hurries
        self.kill_asked = False
        # the program started after this process: nothing older carries its token
        me = read_stat(os.getpid())
        self.born = me.start if me is not None else 0

    def say(self, line: str) -> None:
        try:
            os.write(self.report, (line + "\n").encode())
        except OSError:  # the owner is gone; the stop goes on regardless
            pass

    # -- starting ------------------------------------------------------------------------
    def spawn(self, spec: dict[str, Any]) -> bool:
        """Fork and exec the program; report ``started`` or ``error``."""
        self.token = spec.get("token", "")
        self.orphan_grace_s = float(spec.get("orphan_grace_s", 5.0))
        errors_r, errors_w = os.pipe()  # close-on-exec: silent on a successful exec
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(errors_r)
            self._exec_child(spec, errors_w, me)
        os.close(errors_w)
        failure = b""
        while chunk := os.read(errors_r, 4096):
            failure += chunk
        os.close(errors_r)
        if failure:
            os.waitpid(pid, 0)
            number, _, where = failure.decode().partition(":")
            self.say("error " + json.dumps({"errno": int(number), "where": where}))
            return False
        self.leader = pid
        self.say(f"started {pid}")
        return True

    def _exec_child(self, spec: dict[str, Any], errors_w: int, watchdog_pid: int) -> None:
        stage = "setsid"
        try:
            os.setsid()
            stage = "prctl"
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != watchdog_pid:  # the watchdog died before prctl took effect
                os._exit(137)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)  # ignored signals would survive exec
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            if spec.get("cpus"):
                stage = "cpus"
                os.sched_setaffinity(0, set(spec["cpus"]))
            if spec.get("cwd"):
                stage = spec["cwd"]
                os.chdir(spec["cwd"])
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            stage = spec["argv"][0]
            os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
        except OSError as exc:
            os.write(errors_w, f"{exc.errno or errno.EINVAL}:{stage}".encode())
        except BaseException:
            os.write(errors_w, f"{errno.EINVAL}:{stage}".encode())
        os._exit(127)

    # -- watching ------------------------------------------------------------------------
    def reap(self) -> None:
        """Collect every exited child (orphans reparented to us included); note the leader's code."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.leader and self.code is None:
                self.code = os.waitstatus_to_exitcode(status)
                self.say(f"exit {self.code}")

    def tree(self, token: bool = True) -> Tree:
        return Tree(root=os.getpid(), pgid=self.leader, token=self.token if token else "", born=self.born)

    def hurry(self) -> str | None:
        if not self.kill_asked:
            for line in self.ctl.read(0):
                if line.strip() == "kill":
                    self.kill_asked = True
        if self.kill_asked:
            return "request"
        return "SIGTERM to the watchdog" if self.terminated >= 2 else None

    def stop(self, grace_s: float) -> StopRecord:
        tree, cache = self.tree(), dict[int, bool]()
        return stop_members(lambda: tree.members(cache=cache), grace_s, pgid=self.leader, hurry=self.hurry, reap=self.reap,
                            exit_code=lambda: self.code)

    def run(self) -> int:
        """Watch until told to stop, the owner dies, or nothing of the program is left."""
        checks = 0
        while True:
            self.reap()
            lines = self.ctl.read(POLL_S)
            for i, line in enumerate(lines):
                word, _, arg = line.strip().partition(" ")
                if word == "stop":
                    # A "kill" read in the same chunk would be lost to hurry(): note it now.
                    self.kill_asked = any(later.strip() == "kill" for later in lines[i + 1:])
                    record = self.stop(float(arg or 0))
                    self.say("stopped " + json.dumps(record.as_dict()))
                    return 0
                if word == "kill":  # a late "cut the grace short" after the stop finished: nothing to do
                    continue
            if self.ctl.eof or self.terminated:
                record = self.stop(self.orphan_grace_s)
                self.say("stopped " + json.dumps(record.as_dict()))
                return 0
            # Once the leader is gone, look (every few polls: a /proc scan is not free on a big
            # host) whether anything it started is left. The token is not needed here: while
            # this subreaper lives, every descendant stays below it.
            checks += 1
            if self.code is not None and checks % 5 == 0 and not self.tree(token=False).members():
                record = StopRecord("exited", 0.0, exit_code=self.code)
                self.say("done " + json.dumps(record.as_dict()))
                return 0


USAGE = "usage: python -m omnibench_core.process.watchdog --ctl FD --report FD"


def _fds(argv: list[str]) -> tuple[int, int] | None:
    """``(ctl, report)`` from ``--ctl FD --report FD`` (either order), or None. Read by hand: omnibench
    is its only caller, and argparse with pathlib cost 7 of a start's 60 CPU-ms (issue 40)."""
    if len(argv) != 4:
        return None
    given = dict(zip(argv[::2], argv[1::2], strict=True))
    if set(given) != {"--ctl", "--report"} or not all(v.isdigit() for v in given.values()):
        return None
    return int(given["--ctl"]), int(given["--report"])


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m omnibench_core.process.watchdog --ctl FD --report FD`` (fds of the
    owner's control pipe and of the pipe back to it)."""
    fds = _fds(sys.argv[1:] if argv is None else argv)
    if fds is None:
        print(USAGE, file=sys.stderr)
        return 2
    ctl, report = fds
    for fd in (ctl, report):
        os.set_inheritable(fd, False)  # the program must not hold the owner's pipes
    # Ctrl-C on a terminal is the owner's to handle; only the pipe tells this process what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    dog = Watchdog(ctl, report)

    def on_term(signum: int, frame: object) -> None:
        dog.terminated += 1

    signal.signal(signal.SIGTERM, on_term)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    spec_line = b""
    while not spec_line.endswith(b"\n"):
        chunk = os.read(ctl, 1 << 20)
        if not chunk:
            return 1  # the owner died before it said what to run
        spec_line += chunk
    first, _, rest = spec_line.partition(b"\n")
    dog.ctl.buffer = rest
    spec = json.loads(first)
    if spec.get("cpus"):  # every process of a run is pinned, this one too
        os.sched_setaffinity(0, set(spec["cpus"]))
    if not dog.spawn(spec):
        return 127
    return dog.run()


if __name__ == "__main__":
    sys.exit(main())
