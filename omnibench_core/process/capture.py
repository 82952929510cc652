"""Run a short-lived question to another program (a client's ``--help``, a signature probe, a
package lookup) and capture its answer with every bound a hostile or broken program can break:

- one overall deadline for the whole call, not a timeout per read;
- the output capped (:data:`MAX_OUTPUT_BYTES`): a program that prints more is stopped, and only
  the first bytes are kept;
- bytes decoded with replacement: output that is not UTF-8 is an answer, not a
  ``UnicodeDecodeError``;
- every process it started ended and waited for: its process group, and any descendant that left
  the group (``setsid``) found by a token in its environment, as the watchdog finds them. A child
  left holding the output once the program exited does not hold the call up to the deadline.

Only the standard library is imported.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from .proctree import Tree, add_token, read_stat
from .stopping import stop_members

MAX_OUTPUT_BYTES = 1 << 20  # 1 MiB: a --help or a JSON answer is kilobytes
LINGER_S = 1.0  # after the program exited, how long its leftover children may keep the pipes
STOP_GRACE_S = 0.5  # a probe holds nothing worth a long SIGTERM grace


class Ending(Enum):
    """How a captured call ended."""

    EXITED = "exited"  # the program exited by itself (any exit code)
    DEADLINE = "deadline"  # still running at the deadline: stopped
    TOO_MUCH = "too-much-output"  # printed more than the cap: stopped
    NOT_STARTED = "not-started"  # the program could not be started (no such file, not executable)


@dataclass(frozen=True)
class Captured:
    """A captured call: how it ended, its exit code (None unless it exited), its output decoded
    with replacement (cut at the cap), and the pids of leftover processes that had to be stopped."""

    ending: Ending
    returncode: int | None
    stdout: str
    stderr: str
    leftovers: tuple[int, ...] = ()
    error: str = ""  # why it could not start

    @property
    def ok(self) -> bool:
        """It exited 0 by itself."""
        return self.ending is Ending.EXITED and self.returncode == 0

    def why(self, deadline_s: float, cap: int = MAX_OUTPUT_BYTES) -> str:
        """One line saying how it ended, for an error message."""
        if self.ending is Ending.DEADLINE:
            return f"no answer within {deadline_s:g} s (stopped)"
        if self.ending is Ending.TOO_MUCH:
            return f"printed more than {cap:,} bytes (stopped)"
        if self.ending is Ending.NOT_STARTED:
            return f"could not start: {self.error}"
        return f"exited {self.returncode}"


def capture(argv: Sequence[str], deadline_s: float, *, env: Mapping[str, str] | None = None,
            cwd: str | None = None, max_bytes: int = MAX_OUTPUT_BYTES) -> Captured:
    """Run ``argv`` (stdin closed, in its own session) and capture stdout and stderr within
    ``deadline_s`` seconds and ``max_bytes`` bytes in all; see the module's bounds. Nothing it
    started is left running when this returns."""
    if isinstance(argv, str):
        raise TypeError("argv must be a list of arguments, not a shell string")
    token = f"capture-{uuid.uuid4().hex}"
    child_env = add_token(dict(os.environ if env is None else env), token)
    start = time.monotonic()
    try:
        popen = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=child_env, cwd=cwd, start_new_session=True)
    except OSError as exc:
        return Captured(Ending.NOT_STARTED, None, "", "", error=str(exc))
    # everything carrying the token started with or after the child (no environment older is read)
    first = read_stat(popen.pid)
    tree = Tree(pgid=popen.pid, token=token, born=first.start if first is not None else 0)
    assert popen.stdout is not None and popen.stderr is not None
    fds = (popen.stdout.fileno(), popen.stderr.fileno())
    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds}
    total = 0
    ending: Ending | None = None
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        for pipe in (popen.stdout, popen.stderr):
            sel.register(pipe, selectors.EVENT_READ)
        while sel.get_map() and ending is None:
            now = time.monotonic()
            if exited_at is None and popen.poll() is not None:
                exited_at = now
            if now - start >= deadline_s:
                ending = Ending.DEADLINE if exited_at is None else Ending.EXITED
                break
            if exited_at is not None and now - exited_at >= LINGER_S:
                break  # the program is done; whatever still holds its pipes is a leftover
            for key, _ in sel.select(timeout=min(0.1, max(deadline_s - (now - start), 0.0))):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                chunks[key.fd].append(data[:max(max_bytes - total, 0)])
                total += len(data)
                if total > max_bytes:
                    ending = Ending.TOO_MUCH
                    break
    # the program and everything it started: SIGTERM, a short grace, SIGKILL, until none is left
    def reap() -> None:
        popen.poll()

    # one cache for the whole stop: a member found once stays one while it exits (the watchdog's way)
    known: dict[int, bool] = {}
    record = stop_members(lambda: tree.members(cache=known), STOP_GRACE_S, pgid=popen.pid, reap=reap, by="capture")
    popen.wait()
    popen.stdout.close()
    popen.stderr.close()
    stopped = tuple(sorted({p for s in record.signals for p in s.pids} - {popen.pid}))
    ending = ending or Ending.EXITED
    out, err = (b"".join(chunks[fd]).decode("utf-8", "replace") for fd in fds)
    return Captured(ending, popen.returncode if ending is Ending.EXITED else None, out, err, stopped)
