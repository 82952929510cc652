"""The Ray engine: each campaign a Ray task on an existing cluster that asks for one GPU (two
with ``--slot-per pair``, the second kept idle); Ray sets ``CUDA_VISIBLE_DEVICES``.

The driver makes the slots from the cluster's live nodes (slot k serves on port + k, so two
nodes on one host never collide) and pins each task to its slot's node; a task whose worker or
node died comes back as ``lost`` and the scheduler starts it again on another slot, where the
campaign resumes. Ray is an optional extra (``pip install -e '.[ray]'``).

Results (``--results-transport``): ``shared`` writes straight into the results root, which
every node must see at the same path (checked by a token file the driver writes, so a node that
cannot see it fails with a clear message instead of writing results nobody collects); ``ray``
writes under a node-local folder and ships each run home to a :class:`.transport.Receiver`
actor on the driver's node (:mod:`.remote`); ``auto`` (the default) ships only from nodes that
fail the token check.

Ctrl-C: SIGINT to the driver would skip the tasks' ``finally`` blocks, so :meth:`cancel_all`
first tells the receiver to stop; every task watches it and interrupts its own main thread (a
KeyboardInterrupt: the run layer stops its servers, the campaign says interrupted, its runs go
home). Ray's own cancel comes only after a grace: Ray workers ignore the real SIGINT, and a
non-forced cancel (an interrupt of the task's main thread) was seen to leave a campaign running,
so the watch repeats its interrupt while the campaign runs on. Only then does the driver exit. A SIGKILLed worker's servers die with their
watchdogs.
"""

from __future__ import annotations

import _thread
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from ..errors import OmnibenchError, SettingsError, Terminated
from ..identity import Identity
from ..records import Slot
from ..statuses import JobStatus
from .jobs import CampaignOutcome, received_outcome
from .remote import run_shipped
from .slots import HostSlot, own_cpus
from .transport import DEFAULT_TRANSPORT, TRANSPORTS, Receiver, Seed, Shipped, ShippedRun
from .worker import WorkerSpec, execute

SHARED_TOKEN = ".omnibench-ray-{}"
CONNECT_TIMEOUT_S = 5.0  # an --address that does not answer within this is refused, not waited on


def import_ray() -> Any:
    """The ``ray`` module, or a SettingsError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise SettingsError("--engine ray needs Ray", hint="pip install -e '.[ray]' (Ray 2.60)") from exc
    return ray


def task_slot(planned: Mapping[str, Any], gpu_ids: Sequence[str], cpu_mode: str, topology_cpus: Callable[[str], tuple[int, ...]]
              ) -> HostSlot:
    """The slot a task holds: the driver's index, port and node, the GPUs Ray gave it, their CPU group."""
    gpus = tuple(str(g) for g in gpu_ids)
    cpus = own_cpus() if cpu_mode == "shared" or not gpus else topology_cpus(gpus[0])
    return HostSlot(int(planned["index"]), Slot(int(planned["port"]), gpus[:1], cpus), gpus[1:],
                    cpu_mode == "shared" or not gpus, str(planned.get("node", "")))


def _rule_cpus(settings: Mapping[str, Any]) -> Callable[[str], tuple[int, ...]]:
    def cpus(gpu: str) -> tuple[int, ...]:
        from ..setup.cpus import assign_groups, read_topology
        topo = read_topology(lscpu=str(settings.get("lscpu", "lscpu")), nvidia_smi=str(settings.get("nvidia_smi", "nvidia-smi")),
                             sysfs=str(settings.get("sysfs", "/sys")))
        groups = assign_groups(topo, int(settings.get("cores_per_gpu", 14)))
        if gpu not in groups:
            raise SettingsError(f"GPU {gpu} of this node gets no CPU group", hint="pass --slot-cpus shared")
        return tuple(groups[gpu])
    return cpus


class _ActorHome:
    """The Receiver actor as a :class:`.remote.Home`: each call waits until the driver wrote it;
    a driver gone away is a typed error, so the task ends with a message, not a traceback."""

    def __init__(self, handle: Any):
        self.handle = handle

    def _call(self, method: Any, *args: Any) -> Any:
        import ray
        try:
            return ray.get(method.remote(*args), timeout=300)
        except ray.exceptions.RayTaskError as exc:  # the receiver raised: the driver's disk refused, say
            if isinstance(exc.cause, OmnibenchError):  # typed already (a file it cannot trust names the field)
                raise exc.cause from None
            raise OmnibenchError("the driver could not write what this node sent", evidence={
                "error": str(exc)[-1000:]}, hint="fix what the error names, then repeat the command with --resume") from exc
        except ray.exceptions.RayError as exc:
            raise OmnibenchError("the driver's receiver of results is gone", evidence={"error": str(exc)[:500]},
                                 hint="repeat the command with --resume: runs already home are kept") from exc

    def ship(self, task: str, folder: str, runs: list[ShippedRun], rel: str, campaign: bytes | None,
             checkout: str | None) -> Shipped:
        """Write runs, then the campaign file, at the driver: one actor call, so a node lost
        between two flushes cannot leave a run home that the driver's campaign file does not name."""
        return cast(Shipped, self._call(self.handle.ship, task, folder, runs, rel, campaign, checkout))

    def seed(self, folder: str, identity: Identity, name: str | None = None) -> Seed:
        """The driver's copy of a campaign (under the job's own ``name`` when it has one)."""
        return cast(Seed, self._call(self.handle.seed, folder, identity, name))


def make_history(results: Path, checkouts: Sequence[str], progress: Callable[[str], None]) -> None:
    """Tell the plugins that many nodes are about to send campaigns home into ``results``: the
    history makes its store from the files when it is missing, so the receiver only adds to it (a
    whole rebuild there would hold every node's next call). A plugin that fails is said, and the
    matrix goes on."""
    from ..registry import manager as plugin_manager

    plugin_manager.load()[0].results_opening(results, checkouts, progress)


@contextmanager
def stop_watch(stopping: Callable[[], bool], interval_s: float = 0.5, repeat_s: float = 10.0) -> Iterator[None]:
    """While inside, interrupt the main thread once ``stopping()`` says so, and again every
    ``repeat_s`` while the body still runs (a missed interrupt must not leave a campaign running;
    a second one only cuts a server's stop grace short, as a second Ctrl-C does)."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(interval_s):
            try:
                if not stopping():
                    continue
            except Exception:  # noqa: BLE001 - the driver is gone: Ray's own cancel or the node's end follows
                continue
            _thread.interrupt_main()
            if done.wait(repeat_s):
                return

    thread = threading.Thread(target=watch, daemon=True, name="omnibench-stop-watch")
    thread.start()
    try:
        yield
    finally:
        done.set()


def run_task(spec_data: Mapping[str, Any], cpu_mode: str, token_file: str, transport: str = "shared",
             receiver: Any = None, source: str = "") -> dict[str, Any]:
    """The body of a campaign's Ray task (also callable without Ray, for tests): ``shared`` or a
    node that sees the token file writes into the results root; ``ray`` (or ``auto`` on a node
    that does not see it) runs under the node's folder and ships its runs to ``receiver``."""
    spec = WorkerSpec.from_dict(spec_data)
    sees = Path(token_file).exists()
    if transport == "shared" and not sees:
        return CampaignOutcome(spec.job.key, JobStatus.FAILED, slot=spec.slot.as_dict(),
                               error=f"this node does not see the results root ({token_file} is missing): mount it "
                                     "at the same path on every node, or pass --results-transport ray").as_dict()
    import ray
    try:
        gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # not inside a Ray task
        gpu_ids = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    try:
        slot = task_slot(spec_data["slot"], gpu_ids, cpu_mode, _rule_cpus(spec.settings))
    except SettingsError as exc:
        return CampaignOutcome(spec.job.key, JobStatus.FAILED, slot=spec.slot.as_dict(), error=str(exc)).as_dict()
    spec = WorkerSpec(spec.job, slot, spec.settings, spec.worktrees, spec.slot_timeout_s)

    def progress(line: str) -> None:
        print(f"[slot {slot.index} {spec.job.key}] {line}", flush=True)

    outcome = None
    try:
        with stop_watch(lambda: bool(ray.get(receiver.stopping.remote(), timeout=30))):
            if transport == "shared" or (transport == "auto" and sees):
                outcome = execute(spec, progress=progress)
            else:
                outcome = run_shipped(spec, _ActorHome(receiver), source, node=slot.node, progress=progress)
    except KeyboardInterrupt:  # a repeated interrupt that came after the campaign had ended
        pass
    return (outcome or CampaignOutcome(spec.job.key, JobStatus.INTERRUPTED, slot=slot.as_dict(), error="cancelled")).as_dict()


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A ``HOST:PORT`` address must accept a connection within ``timeout_s``, or SettingsError
    (``ray.init`` would otherwise retry for a long while); ``auto`` and ``ray://`` pass."""
    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise SettingsError(f"cannot reach the Ray cluster at {address}", evidence={"error": str(exc)},
                            hint="check --address (the head's HOST:6379, as `ray start --head` prints it) and "
                                 "that the head is up") from exc


class RayEngine:
    """Campaigns as Ray tasks on the cluster at ``address`` (``auto``: the local ``ray start``).
    ``checkout`` is the driver's checkout: the nodes clone ``checkout_url`` (default the checkout
    each job names) and the receiver looks a shipped campaign's commit up there for the history."""

    name = "ray"

    def __init__(self, address: str, base_port: int, results_root: Path, *, per: str = "pair", cpu_mode: str = "rule",
                 progress: Callable[[str], None] = print, ray_module: Any = None, init: bool = True,
                 transport: str = DEFAULT_TRANSPORT, checkout_url: str = "", checkout: str = ""):
        if transport not in TRANSPORTS:
            raise SettingsError(f"unknown --results-transport {transport!r}", hint=f"use {' or '.join(TRANSPORTS)}")
        self.ray = ray_module or import_ray()
        if init and not self.ray.is_initialized():
            check_reachable(address)
            on_sigterm = signal.getsignal(signal.SIGTERM)
            try:
                self.ray.init(address=address, log_to_driver=True)
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
                raise SettingsError(f"cannot connect to the Ray cluster at {address}",
                                    evidence={"error": f"{type(exc).__name__}: {str(exc)[:500]}"},
                                    hint="start it (ray start --head) or pass --address HEAD:6379") from exc
            if callable(on_sigterm) and threading.current_thread() is threading.main_thread():
                # Ray's core puts its own SIGTERM handler in place (it dies at once); the task's
                # must stay, so that SIGTERM stops every campaign as Ctrl-C does.
                signal.signal(signal.SIGTERM, on_sigterm)
        self.per, self.cpu_mode, self.progress = per, cpu_mode, progress
        self.transport, self.checkout_url = transport, checkout_url
        results_root.mkdir(parents=True, exist_ok=True)
        self.token_file = results_root / SHARED_TOKEN.format(secrets.token_hex(4))
        self.token_file.write_text("omnibench ray driver: every node must see this file at this path\n")
        self.gpus_per_task = 2 if per == "pair" else 1
        self._slots: list[HostSlot] = []
        for node in sorted(self.ray.nodes(), key=lambda n: n["NodeID"]):
            gpus = int(node.get("Resources", {}).get("GPU", 0)) if node.get("Alive") else 0
            for _ in range(gpus // self.gpus_per_task):
                k = len(self._slots)
                self._slots.append(HostSlot(k, Slot(base_port + k), node=node["NodeID"]))
        if not self._slots:
            raise SettingsError("the Ray cluster has no free GPU slot",
                                evidence={"nodes": str([(n["NodeID"][:8], n.get("Resources", {})) for n in self.ray.nodes()])},
                                hint=f"start nodes with GPUs (ray start --num-gpus N); --slot-per {per} takes "
                                     f"{self.gpus_per_task} a slot")
        self._remote = self.ray.remote(run_task)
        self.running: dict[Any, WorkerSpec] = {}
        self._ended: list[tuple[object, CampaignOutcome]] = []
        checkouts = [checkout] if checkout else []
        make_history(results_root, checkouts, progress)
        # An actor on the driver's node: it writes what the tasks ship home, and tells them to stop.
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        here = self.ray.get_runtime_context().get_node_id()
        self.receiver: Any = self.ray.remote(Receiver).options(
            num_cpus=0, max_restarts=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
        ).remote(str(results_root), checkouts=checkouts)

    def _alive_nodes(self) -> set[str]:
        return {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}

    def slots(self) -> Sequence[HostSlot]:
        """The slots on nodes still alive."""
        alive = self._alive_nodes()
        return [s for s in self._slots if s.node in alive]

    def start(self, spec: WorkerSpec) -> object:
        """A task pinned to the slot's node, with its GPUs; Ray does not retry it (the scheduler does)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        ref = self._remote.options(
            num_gpus=self.gpus_per_task, num_cpus=0, max_retries=0, retry_exceptions=False,
            scheduling_strategy=NodeAffinitySchedulingStrategy(spec.slot.node, soft=False),
        ).remote(spec.as_dict(), self.cpu_mode, str(self.token_file), self.transport, self.receiver,
                 self.checkout_url or str(spec.settings.get("checkout", "")))
        self.running[ref] = spec
        return ref

    def wait(self, timeout_s: float) -> list[tuple[object, CampaignOutcome]]:
        """Tasks that ended; a dead worker or node gives ``lost``."""
        if self._ended:  # those cancel_all saw end, first
            ended, self._ended = self._ended, []
            return ended
        return self._collect(timeout_s)

    def _collect(self, timeout_s: float) -> list[tuple[object, CampaignOutcome]]:
        """Tasks that end within ``timeout_s``, with their outcomes."""
        if not self.running:
            return []
        try:
            ready, _ = self.ray.wait(list(self.running), num_returns=len(self.running), timeout=timeout_s)
        except SystemError as exc:  # Ray's wait passes on only KeyboardInterrupt from a signal handler
            if isinstance(exc.__cause__, Terminated):
                raise exc.__cause__ from None  # SIGTERM: stop every campaign, as Ctrl-C does
            raise
        done = []
        for ref in ready:
            spec = self.running.pop(ref)
            try:
                outcome = received_outcome(self.ray.get(ref), spec.job.key, spec.slot.as_dict())
            except self.ray.exceptions.TaskCancelledError:
                outcome = CampaignOutcome(spec.job.key, JobStatus.INTERRUPTED, slot=spec.slot.as_dict(), error="cancelled")
            except self.ray.exceptions.RayTaskError as exc:  # the task raised: a bug, not a lost node
                outcome = CampaignOutcome(spec.job.key, JobStatus.FAILED, slot=spec.slot.as_dict(), error=str(exc)[-2000:])
            except self.ray.exceptions.RayError as exc:  # worker crashed, node died, object lost
                outcome = CampaignOutcome(spec.job.key, JobStatus.LOST, slot=spec.slot.as_dict(),
                                          error=f"{type(exc).__name__}: {str(exc)[:300]}")
            done.append((ref, outcome))
        return done

    def cancel_all(self, grace_s: float) -> None:
        """Tell every task to stop (each interrupts itself: servers stop, runs go home), wait;
        then Ray's cancel, and after another grace force."""
        try:
            self.ray.get(self.receiver.stop.remote(), timeout=30)
        except self.ray.exceptions.RayError:
            pass  # the receiver is gone: Ray's cancel below is all there is
        self._drain(grace_s)
        for ref in self.running:  # recursive=False: a task's calls to the receiver must still land
            self.ray.cancel(ref, force=False, recursive=False)
        self._drain(grace_s / 2)
        for ref in self.running:
            self.ray.cancel(ref, force=True)
        self._drain(0.0)

    def _drain(self, grace_s: float) -> None:
        """Collect the tasks that end within ``grace_s`` for the next :meth:`wait`."""
        deadline = time.monotonic() + grace_s
        while self.running:
            self._ended += self._collect(0.5)
            if time.monotonic() >= deadline:
                break

    def close(self) -> None:
        """Remove the token file and the receiver (the cluster stays up: it is not ours)."""
        self.token_file.unlink(missing_ok=True)
        if self.receiver is not None:
            self.ray.kill(self.receiver)
            self.receiver = None
