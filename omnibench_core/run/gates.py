"""The runbook's gates as functions: each returns evidence or raises a typed GateError.

RUN_READY (run directory new, port free), READY (``/health`` 200 with ``healthy``), GPU_FREE
(used memory below the threshold on the GPUs in use).
READY passes only when the listener on the port is a process of the server omnibench started.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ForeignListener, GpuNotFree, GpuQueryTimeout, RunNotReady, ServerDied, ServerNotReady
from ..process.gpu import CALL_TIMEOUT_S, MIN_CALL_S, describe_holders, query_memory_used
from ..process.ports import describe_pid, foreign_listeners, listener_inodes, port_holder, port_in_use
from ..process.processes import GroupProcess, log_tail
from ..statuses import GateStatus
from . import http_get

GPU_FREE_SAY_EVERY_S = 10.0  # while GPU_FREE waits, who holds the GPU is said at least this often
# While READY's probe is refused, the listener tables are read at most this often (a foreign
# listener on another address of the port is named within it; one where the probe connects, at once)
REFUSED_LOOK_S = 1.0
HEALTH_MAX_BYTES = 64 * 1024  # a health answer is a word or a small object; more is cut, never held

_HEALTHY_WORD = re.compile(r"(?<![A-Za-z])healthy(?![A-Za-z])")  # "unhealthy" is not healthy


@dataclass(frozen=True)
class GateRecord:
    """A gate's outcome for the manifest: passed, or did not apply, with its facts."""

    gate: str
    status: GateStatus  # passed, or not_applicable
    seconds: float = 0.0
    evidence: dict[str, str] = field(default_factory=dict)


def check_run_ready(run_dir: Path, port: int, *, claimed: bool = False) -> GateRecord:
    """RUN_READY: the run directory must not exist (``claimed``: must be the empty directory this
    run just created) and the port must be free.

    A port held by another process is reported with that process; it is never touched.
    """
    if claimed:
        if not run_dir.is_dir() or any(run_dir.iterdir()):
            raise RunNotReady(f"run directory {run_dir} is not the empty directory this run claimed",
                              evidence={"run_dir": str(run_dir)},
                              hint="another process wrote into it; move it away and repeat the run")
    elif run_dir.exists() or run_dir.is_symlink():
        raise RunNotReady(
            f"run directory {run_dir} exists already",
            evidence={"run_dir": str(run_dir)},
            hint="omnibench never overwrites a run: pick another --run-name or move that directory",
        )
    if port_in_use(port):
        holder = port_holder(port)
        raise RunNotReady(
            f"port {port} is already in use",
            evidence={"port": str(port), "held by": holder or "unknown process"},
            hint="stop that server (omnibench leaves it alone) or pass another --port",
        )
    return GateRecord("RUN_READY", GateStatus.PASSED, evidence={"run_dir": str(run_dir), "port": str(port)})


def is_healthy(status_code: int, body: str) -> bool:
    """Readiness as the runbook defines it: HTTP 200 and the word ``healthy`` in the body."""
    if status_code != 200:
        return False
    try:
        data = json.loads(body)
    except ValueError:
        return bool(_HEALTHY_WORD.search(body))
    if isinstance(data, dict) and "status" in data:
        return bool(data["status"] == "healthy")
    return bool(_HEALTHY_WORD.search(body))


class _ListenerCheck:
    """READY's guard: whoever listens on the port must belong to the server's process tree.

    A socket once proven ours is not looked up again, and the environment reads behind
    membership are cached, so polling stays cheap while a model loads. While the probe is
    refused (nothing listens on its address) the port's tables are read at most once every
    ``REFUSED_LOOK_S``: each read of /proc/net/tcp{,6} costs the kernel about 10 ms on a busy
    host, which at every 50 ms poll was a fifth of a core for the whole load (issue 40).
    """

    def __init__(self, server: GroupProcess, port: int, proc: Path, clock: Callable[[], float]):
        self.server, self.port, self.proc, self.clock = server, port, proc, clock
        self.trusted: set[str] = set()
        self.cache: dict[int, bool] = {}
        self.looked: float | None = None

    def foreign(self, refused: bool = False) -> dict[str, set[int]]:
        """The foreign holders of the port's listeners (none found: ``{}``). ``refused``: the
        probe's connection was refused, so none listens where the clients connect; the tables
        are then read only if ``REFUSED_LOOK_S`` passed since the last read (a listener on
        another address of the port is still found, a second later)."""
        now = self.clock()
        if refused and self.looked is not None and now - self.looked < REFUSED_LOOK_S:
            return {}
        self.looked = now
        found = self._look()
        if found:  # look once more: a listener of ours may have been changing hands mid-scan
            found = self._look()
        return found

    def _look(self) -> dict[str, set[int]]:
        inodes = listener_inodes(self.port, self.proc)
        if not inodes or inodes <= self.trusted:
            return {}
        ours = self.server.tree().members(self.proc, cache=self.cache)
        found = foreign_listeners(self.port, ours, self.proc)
        self.trusted |= inodes - set(found)
        return found

    def fail(self, found: dict[str, set[int]]) -> ForeignListener:
        pids = sorted(set().union(*found.values()))
        who = "; ".join(describe_pid(p, self.proc) for p in pids) or "a process not visible from here (another user or container)"
        return ForeignListener(
            f"port {self.port} is held by a process that omnibench did not start",
            evidence={"port": str(self.port), "foreign listener": who,
                      "foreign pids": ",".join(map(str, pids)) or "unknown",
                      "our server": f"pid {self.server.pid} ({' '.join(self.server.argv)[:200]})",
                      "log": str(self.server.log_path)},
            hint="its answers would be measured as the server's: stop that process (omnibench leaves it "
            "alone) or pass another --port, then repeat the run",
        )


def wait_ready(
    server: GroupProcess,
    url: str,
    *,
    timeout_s: float,
    interval_s: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
    check_listener: bool = True,
    port: int | None = None,
    proc: Path = Path("/proc"),
) -> GateRecord:
    """READY: poll ``url`` until healthy; fail at once if the server process exits.

    With ``check_listener`` (the default) the process listening on ``port`` (default: the URL's)
    must belong to ``server`` (its leader, group, session, a descendant or a carrier of its
    token); else :class:`ForeignListener` names it, and it is left alone. Turn the check off for
    a server on another host. Raises :class:`ServerDied` (with exit code and log tail) or
    :class:`ServerNotReady` after ``timeout_s`` (with the last answer and log tail).
    """
    start = clock()
    last = "no answer yet"
    if port is None:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    guard = _ListenerCheck(server, port, proc, clock) if check_listener else None
    while True:
        code = server.exited()
        if code is not None:
            raise ServerDied(
                f"the server exited with code {code} before it became healthy",
                evidence={"command": " ".join(server.argv), "log": str(server.log_path),
                          "log tail": log_tail(server.log_path)},
                hint="read the log tail above; fix the server's arguments or environment",
            )
        healthy, refused = False, False
        # each probe's whole call (redirects and a byte-at-a-time answer included) ends by the gate's
        # own deadline: a server that trickles its answer cannot hold READY past timeout_s
        probe_s = max(min(max(interval_s * 20, 1.0), timeout_s - (clock() - start)), 0.05)
        try:
            answer = http_get.get(url, probe_s, HEALTH_MAX_BYTES)
            text = answer.body.decode("utf-8", "replace")
            healthy = is_healthy(answer.status, text)
            last = f"HTTP {answer.status}: {text[:200]}"
        except http_get.DeadlineExceeded:
            last = f"no whole answer within {probe_s:g} s"
        except (OSError, ValueError, http.client.HTTPException) as exc:
            last = type(exc).__name__  # connection refused while the model loads
            refused = isinstance(exc, ConnectionRefusedError)
        if guard is not None and (found := guard.foreign(refused)):
            raise guard.fail(found)
        if healthy:
            evidence = {"url": url}
            if guard is not None:
                evidence["listener"] = "a process of the server (checked)"
            return GateRecord("READY", GateStatus.PASSED, clock() - start, evidence)
        if clock() - start >= timeout_s:
            raise ServerNotReady(
                f"the server was not healthy after {timeout_s:g} s",
                evidence={"url": url, "last answer": last, "log": str(server.log_path),
                          "log tail": log_tail(server.log_path)},
                hint="raise omnibench.ready_timeout_s if the start is slow (a cold compile "
                "takes over 10 min), else read the log tail",
            )
        time.sleep(interval_s)


def wait_gpu_free(
    gpus: Sequence[str],
    *,
    threshold_mib: int = 1024,
    timeout_s: float = 600.0,
    interval_s: float = 0.1,
    nvidia_smi: str = "nvidia-smi",
    clock: Callable[[], float] = time.monotonic,
    call_timeout_s: float = CALL_TIMEOUT_S,
    progress: Callable[[str], None] | None = None,
    say_every_s: float = GPU_FREE_SAY_EVERY_S,
    holders: Callable[[], str] | None = None,
) -> GateRecord:
    """GPU_FREE: poll nvidia-smi until every GPU in ``gpus`` uses less than ``threshold_mib``.

    While it waits it says, every ``say_every_s`` through ``progress``, the memory used and who
    holds it (``holders``; default: nvidia-smi's compute processes with their command lines), and
    the failure names them too.

    The deadline holds even when nvidia-smi hangs: each call may take at most the time left
    (and ``call_timeout_s``), a hung call is killed with its process group and retried, and at
    the deadline the gate fails with :class:`GpuQueryTimeout` (no call ever answered) or
    :class:`GpuNotFree` (the last answer, with the hangs counted). With no GPUs (a CPU target)
    the gate does not apply and says so.
    """
    if not gpus:
        return GateRecord("GPU_FREE", GateStatus.NOT_APPLICABLE, evidence={"reason": "the target uses no GPU"})
    start = clock()
    hung: GpuQueryTimeout | None = None
    hangs = streak = 0  # all hung calls; those since the last answer
    used: dict[str, int] | None = None
    said = start
    who = holders or (lambda: describe_holders(gpus, nvidia_smi, timeout_s=min(call_timeout_s, 10.0)))
    while True:
        left = timeout_s - (clock() - start)
        try:
            # At least MIN_CALL_S per call, so a deadline already reached still gets one answer.
            used = query_memory_used(gpus, nvidia_smi, timeout_s=min(call_timeout_s, max(left, MIN_CALL_S)))
            hung, streak = None, 0
        except GpuQueryTimeout as exc:
            hung, hangs, streak = exc, hangs + 1, streak + 1
        if hung is None and used is not None and all(v < threshold_mib for v in used.values()):
            evidence = {"memory.used MiB": json.dumps(used), "threshold MiB": str(threshold_mib)}
            if hangs:
                evidence["hung nvidia-smi calls"] = str(hangs)
            return GateRecord("GPU_FREE", GateStatus.PASSED, clock() - start, evidence)
        if clock() - start >= timeout_s:
            # Hung when calls hung since the last answer (or none ever came): only the last one cut
            # short by the deadline leaves the answer before it to decide, with the hangs as evidence.
            if hung is not None and (streak > 1 or used is None):
                raise GpuQueryTimeout(
                    f"{nvidia_smi} hung until the GPU_FREE deadline ({timeout_s:g} s)",
                    evidence={**hung.evidence, "hung calls": str(hangs), "gpus": ",".join(gpus),
                              "last memory.used MiB": json.dumps(used) if used is not None else "never answered"},
                    hint="nvidia-smi hangs when the driver is stuck: check `nvidia-smi` and dmesg by hand "
                    "before the next run",
                )
            assert used is not None
            # who() asks nvidia-smi again: not after it just hung (that would pass the deadline further)
            evidence = {"memory.used MiB": json.dumps(used), "gpus": ",".join(gpus),
                        "held by": "not asked: nvidia-smi's last call hung" if hung else who()}
            if hangs:
                evidence["hung nvidia-smi calls"] = str(hangs) + (" (the last one too)" if hung else "")
            raise GpuNotFree(
                f"GPU memory stayed at or above {threshold_mib} MiB for {timeout_s:g} s after the server stopped",
                evidence=evidence,
                hint="find what holds the GPU (nvidia-smi), stop it, then repeat the run"
                + ("; nvidia-smi also hung: check it by hand and dmesg" if hangs else ""),
            )
        if progress is not None and clock() - said >= say_every_s:
            said = clock()
            memory = json.dumps(used) if used is not None else "not answered"
            progress(f"GPU_FREE: waiting {said - start:.0f} s of {timeout_s:g} s for GPUs {','.join(gpus)} "
                     f"(memory.used MiB {memory}, threshold {threshold_mib}); held by {who()}")
        time.sleep(max(0.0, min(interval_s, timeout_s - (clock() - start))))
