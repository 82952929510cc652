"""Typed errors. Each carries its evidence and says what to do next.

Every gate of the runbook (RUN_READY, READY, GPU_FREE, ...) fails with a subclass of
:class:`GateError`, so callers can tell *which* gate failed without parsing text.
"""

from __future__ import annotations

from typing import Any

from .statuses import RunOutcome


class OmnibenchError(Exception):
    """Base of every error omnibench raises on purpose.

    ``evidence`` holds the facts (file, field, exit code, log tail...) and ``hint`` the next
    thing a user should do. ``str(err)`` renders all three for a terminal.
    """

    # The runs this error ended and where each is now (the runner attaches them, a caller reads
    # them): a moved-aside folder is a typed field here, never parsed from the evidence's text.
    outcomes: tuple[RunOutcome, ...] = ()

    def __init__(self, message: str, *, hint: str = "", evidence: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.evidence = dict(evidence or {})

    def __str__(self) -> str:
        lines = [self.message]
        for key, value in self.evidence.items():
            text = str(value)
            if "\n" in text:
                lines.append(f"  {key}:")
                lines.extend(f"    | {line}" for line in text.rstrip("\n").splitlines())
            else:
                lines.append(f"  {key}: {text}")
        if self.hint:
            lines.append(f"  what to do: {self.hint}")
        return "\n".join(lines)

    def as_record(self) -> dict[str, Any]:
        """A JSON-ready form for manifests."""
        return {
            "type": type(self).__name__,
            "message": self.message,
            "hint": self.hint,
            "evidence": {k: str(v) for k, v in self.evidence.items()},
        }


def one_line(exc: OmnibenchError) -> str:
    """The error's message for a record of one line (an attempt's error in an A/B or campaign
    file), with who held what it waited for where its evidence says: a GPU_FREE failure names the
    processes on the GPU (``held by``), as the run's own error does."""
    held = str(exc.evidence.get("held by", "")).strip()
    return f"{exc.message}; held by {held}" if held else exc.message


class SettingsError(OmnibenchError):
    """A setting is missing or wrong (a checkout path, a port, a GPU list...)."""


class BadName(SettingsError):
    """A name given by a user or a node (a campaign's, an experiment's, a run's, a folder's) that
    is not one plain folder entry (:func:`.store.names.check_name`)."""


class OutsideRoot(SettingsError):
    """A path built from a given name resolves outside the folder it must stay in
    (:func:`.store.names.under_root`); nothing was written there."""


class PluginError(OmnibenchError):
    """A plugin failed to load, returned something invalid, or clashes with another."""


class GateError(OmnibenchError):
    """A runbook gate did not pass. ``gate`` is the runbook's capital word."""

    gate = "GATE"


class RunNotReady(GateError):
    """RUN_READY: the run directory exists already, or the port is taken."""

    gate = "RUN_READY"


class ServerDied(GateError):
    """READY: the server process exited before it became healthy."""

    gate = "READY"


class ServerNotReady(GateError):
    """READY: the server did not become healthy within the timeout."""

    gate = "READY"


class GpuNotFree(GateError):
    """GPU_FREE: GPU memory stayed above the threshold after the server stopped."""

    gate = "GPU_FREE"


class GpuQueryError(GateError):
    """GPU_FREE: ``nvidia-smi`` could not be run or printed something unreadable."""

    gate = "GPU_FREE"


class GpuQueryTimeout(GpuQueryError):
    """GPU_FREE: ``nvidia-smi`` hung (its call was killed), up to the gate's deadline."""


class WrongRevision(GateError):
    """REV_OK: the server omnibench started, or the client's python, imports the system under
    test from another tree or commit than the revision asked for (a venv reused from another
    revision, an editable install pointing elsewhere)."""

    gate = "REV_OK"


class ForeignListener(GateError):
    """READY: the process listening on the server's port is not one omnibench started.

    Its answers would be measured as the server's; it is reported and left alone.
    """

    gate = "READY"


class StepFailed(OmnibenchError):
    """A step's program exited non-zero, raised, timed out, or left no expected output."""


class RunInterrupted(OmnibenchError):
    """The run was stopped by Ctrl-C (SIGINT) or SIGTERM; servers were stopped."""


class Terminated(BaseException):
    """Raised inside the runner when omnibench receives SIGTERM.

    A BaseException like KeyboardInterrupt, so ``except Exception`` in plugin code does not
    swallow it and every ``finally`` (server stop) still runs.
    """


class RunFileError(OmnibenchError):
    """A file omnibench keeps (a run's manifest or metrics, a campaign file, an A/B record) that
    cannot be trusted: unreadable, of a format this omnibench does not read, or a field of the wrong
    type or value. Names the file (and the field or format)."""


class JsonTooDeep(RunFileError, ValueError):
    """A JSON file nested deeper than omnibench reads (:data:`.jsonio.MAX_DEPTH`), named. A
    ValueError too: a reader that makes an unreadable file its own typed error does so for this,
    quoting ``str()``: one line (the message names the file, the depth and the limit)."""

    def __str__(self) -> str:
        return self.message


class JsonTooBig(RunFileError, ValueError):
    """A JSON file omnibench would read that is over :data:`.jsonio.MAX_BYTES` or not a regular
    file (a FIFO, a device), named; a ValueError for the same reason as :class:`JsonTooDeep`."""

    def __str__(self) -> str:
        return self.message


class CampaignFileError(RunFileError):
    """A campaign file that cannot be trusted (edited by hand, say, or of another format)."""


class RecordError(RunFileError):
    """An A/B record that cannot be read, or that names another experiment."""


class StorageError(OmnibenchError):
    """The results folder could not be written: read-only, full, out of inodes, not permitted.

    Carries the first cause; later failures while cleaning up are added as evidence, never
    raised in its place.
    """


_STORAGE_HINTS = {
    "ENOSPC": "the disk is full: free space (df -h) or point omnibench.results at another disk",
    "EDQUOT": "the disk quota is used up: free space or point omnibench.results elsewhere",
    "EROFS": "the file system is read-only: point omnibench.results at a writable folder",
    "EACCES": "omnibench may not write there: fix the folder's permissions or choose another --results",
    "EPERM": "the folder or a file in it is immutable or protected (lsattr): lift that or choose another --results",
    "ENOTDIR": "a part of the results path is a file, not a folder: move it away or choose another --results",
}


def storage_error(what: str, exc: OSError) -> StorageError:
    """A :class:`StorageError` for an ``OSError`` met while ``what``, naming the errno and file."""
    import errno as _errno

    code = _errno.errorcode.get(exc.errno or 0, "")
    evidence = {"error": f"{code or 'OSError'}: {exc.strerror or exc}"}
    if exc.filename:
        evidence["file"] = str(exc.filename)
    if code == "ENOSPC" and exc.filename is None:
        evidence["note"] = "no space left, or no free inodes (df -i)"
    return StorageError(f"cannot write the results while {what}", evidence=evidence,
                        hint=_STORAGE_HINTS.get(code, "check the results folder (df -h, df -i, ls -ld)"))


class UnsupportedOption(SettingsError):
    """The checkout at this commit lacks something the planned run passes or calls (a client's
    flag, a function's keyword, its CI's model): its era predates it. Raised before any server
    starts; a matrix, bisect or history marks such a commit "not measurable with these options",
    never good or bad. ``option`` names what is missing, ``commit`` the checkout's commit."""

    def __init__(self, message: str, *, option: str, commit: str, hint: str = "",
                 evidence: dict[str, Any] | None = None):
        super().__init__(message, hint=hint, evidence={"option": option, "commit": commit, **(evidence or {})})
        self.option = option
        self.commit = commit


class ProbeFailed(SettingsError):
    """The checkout could not be asked what it supports: a client's ``--help`` or the signature
    probe exited non-zero, ran past its deadline, printed too much or could not start. Not a fact
    of its era (a matrix marks the commit failed, with why, never not-measurable); nothing is
    cached, so the next command asks again."""
