"""Which settings make two runs the same measurement, and the one name a measurement gets.

A campaign (``invoke measure``, each campaign of ``invoke matrix`` and ``invoke bisect``) is
found, resumed and compared by its :class:`Identity`: the workloads, their options, the client,
and the settings that change the numbers (the target, its venv, a planted delay, a server
profile other than the runbook's). Where it ran (the checkout's path, which for a matrix is a
worktree of the same commit, and the slot's GPUs and CPUs) is recorded beside it but is not identity: the revision folder already names the
commit, and a matrix may resume a campaign on another slot of the same kind.

:func:`file_name` is the one naming function: a name that fits is readable; a longer one is cut
and gets a hash of the whole, so two long option sets that differ only at the end never share a
name. Names written by an older omnibench are kept findable (:meth:`Identity.names`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .defaults import SERVER_PROFILE
from .settings import Settings

# What a campaign file records of the settings (its ``asked.settings``): identity plus where.
RECORDED_SETTINGS = ("target", "checkout", "venv", "gpus", "cpus", "local_delay_ms", "local_stream_delay",
                     "server_profile", "local_quality_flip")
# The recorded settings that change a run's numbers: a campaign is resumed only with equal values.
IDENTITY_SETTINGS = ("target", "venv", "local_delay_ms", "local_stream_delay", "server_profile", "local_quality_flip")
# Identity settings left out while empty, so campaigns recorded before they existed still resume.
LATER_SETTINGS = ("local_stream_delay", "server_profile", "local_quality_flip")
# Later settings left out at this value too: what every record made before them measured (the
# runbook's server), so those records keep their identity and their names.
LATER_DEFAULTS = {"server_profile": SERVER_PROFILE, "local_quality_flip": "0.0"}
# Where it ran (recorded, not compared): the slot's GPUs and CPUs, the checkout's path.
WHERE_SETTINGS = tuple(k for k in RECORDED_SETTINGS if k not in IDENTITY_SETTINGS)
SLOT_SETTINGS = ("gpus", "cpus")  # the slot's part of WHERE_SETTINGS
# An A/B experiment's shared settings: the recorded ones but the slot's. Its name hashes them, so
# they keep the checkout's path (names of experiments already on disk stay as they were).
AB_SHARED_SETTINGS = tuple(k for k in RECORDED_SETTINGS if k not in SLOT_SETTINGS)
RUN_SETTINGS = ("target", "local_delay_ms", "local_stream_delay", "server_profile", "local_quality_flip", "gpus",
                "cpus")  # what a run's manifest says of RECORDED_SETTINGS
NAME_LIMIT = 100  # a campaign name's characters before it is cut and hashed
HASH_CHARS = 10
_LEGACY_MATRIX_LIMIT = 120  # main's matrix names (no target), cut at 120


def file_name(parts: Sequence[str], limit: int = NAME_LIMIT) -> str:
    """A name from ``parts`` (joined by ``_``, odd characters made ``_``); one longer than
    ``limit`` keeps its first ``limit - 20`` characters and gets a hash of the whole, so two long
    names that share their start stay distinct."""
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", "_".join(p for p in parts if p))
    if len(name) > limit:
        name = f"{name[:limit - 20]}-{hashlib.sha256(name.encode()).hexdigest()[:HASH_CHARS]}"
    return name


def recorded_settings(settings: Settings) -> dict[str, str]:
    """The settings a campaign records (:data:`RECORDED_SETTINGS`), as strings."""
    flat = settings.flat()
    return {k: str(flat[k]) for k in RECORDED_SETTINGS}


def differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key: A != B`` for each key whose values differ; where both are mappings (the workload
    options), each differing key inside: ``options.seedtts.max_samples: 4 != 3``, not two dicts."""
    out: list[str] = []
    for k in sorted(set(a) | set(b), key=str):
        va, vb = a.get(k), b.get(k)
        if va == vb:
            continue
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out += differences(va, vb, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}: {va!r} != {vb!r}")
    return out


def _no_delay(value: str) -> bool:
    return value in ("0", "0.0", "")


def counted_settings(settings: Mapping[str, Any], keys: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``keys`` of ``settings`` that are present, as (key, string value), less those that do not
    change the measurement: a later setting left empty (records made before it existed have
    none), and where the stream delay goes when no delay is planted."""
    def counts(k: str) -> bool:
        value = str(settings[k])
        if k in LATER_SETTINGS and (value in ("", LATER_DEFAULTS.get(k, "")) or k == "local_quality_flip" and _no_delay(value)):
            return False
        return not (k == "local_stream_delay" and _no_delay(str(settings.get("local_delay_ms", ""))))

    return tuple((k, str(settings[k])) for k in keys if k in settings and counts(k))


# The identity settings a history series keeps apart (a planted delay, CI's server profile: another
# measurement); the target is the series' own field, and the venv's path differs per worktree of a matrix.
PLANTED_SETTINGS = ("local_delay_ms", "local_stream_delay", "server_profile", "local_quality_flip")


def planted(settings: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The planted delays (none when 0) and a server profile other than the runbook's of
    ``settings``: what makes it another measurement of the same target."""
    return tuple((k, v) for k, v in counted_settings(settings, PLANTED_SETTINGS)
                 if not (k == "local_delay_ms" and _no_delay(v)))


@dataclass(frozen=True)
class Identity:
    """What must match for two runs or campaigns to be the same measurement."""

    workloads: tuple[str, ...]
    options: tuple[str, ...]  # WORKLOAD.KEY=VALUE, sorted (flag order does not matter)
    client: str | None
    settings: tuple[tuple[str, str], ...]  # IDENTITY_SETTINGS present, as (key, string value)

    @classmethod
    def of(cls, workloads: Sequence[str], options: Sequence[str], client: str | None,
           settings: Mapping[str, Any]) -> Identity:
        """The identity of a request whose settings are ``settings`` (a flat or recorded mapping;
        only :data:`IDENTITY_SETTINGS` are read)."""
        return cls(tuple(workloads), tuple(sorted(options)), client, counted_settings(settings, IDENTITY_SETTINGS))

    @classmethod
    def from_settings(cls, settings: Settings, workloads: Sequence[str], options: Sequence[str],
                      client: str | None) -> Identity:
        """The identity of measuring ``workloads`` with ``options`` under ``settings``."""
        return cls.of(workloads, options, client, recorded_settings(settings))

    def setting(self, key: str) -> str:
        """One identity setting's value ("" when not recorded)."""
        return dict(self.settings).get(key, "")

    def as_record(self) -> dict[str, Any]:
        """The keys and values compared, as a difference names them."""
        return {"workloads": list(self.workloads), "options": list(self.options), "client": self.client,
                **{f"setting {k}": v for k, v in self.settings}}

    def differences(self, other: Identity) -> list[str]:
        """``key: A != B`` for each part that differs."""
        return differences(self.as_record(), other.as_record())

    def _base_parts(self) -> list[str]:
        parts = ["+".join(self.workloads), *(o.replace("=", "-") for o in self.options)]
        if self.client:
            parts.append(f"client-{self.client}")
        return parts

    def name(self) -> str:
        """The campaign's name: workloads, options, client, the target and a non-zero planted
        delay, hashed past :data:`NAME_LIMIT`. The same measurement, the same name."""
        parts = [*self._base_parts(), self.setting("target")]
        if self.setting("server_profile"):  # only a profile other than the runbook's is counted
            parts.append(f"profile-{self.setting('server_profile')}")
        if not _no_delay(self.setting("local_delay_ms")):
            parts.append(f"delay{self.setting('local_delay_ms')}ms")
            if self.setting("local_stream_delay"):
                parts.append(f"on-{self.setting('local_stream_delay')}-chunk")
        if self.setting("local_quality_flip"):  # only a non-zero flip is counted
            parts.append(f"flip{self.setting('local_quality_flip')}")
        return file_name(parts)

    def names(self) -> tuple[str, ...]:
        """:meth:`name`, then names an older omnibench gave this measurement (a matrix's had no
        target and were cut at 120 characters), so a campaign already on disk is still found."""
        legacy = file_name(self._base_parts(), _LEGACY_MATRIX_LIMIT)
        return tuple(dict.fromkeys((self.name(), legacy)))
