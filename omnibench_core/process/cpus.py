"""The CPUs a slot pins its programs to, checked against this host before anything starts: the
watchdog pins each program (``sched_setaffinity``), and a CPU that is not here would end the
run late, in the watchdog's log, instead of in one line up front."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from ..errors import SettingsError
from ..settings import format_cpu_list


def check_cpus_here(cpus: Sequence[int], what: str = "--cpus",
                    allowed: Callable[[], set[int]] = lambda: os.sched_getaffinity(0)) -> tuple[int, ...]:
    """``cpus`` when this process may run on each of them (its affinity: the CPUs of this host it
    is allowed, the cpuset of a container included); else a SettingsError naming the CPUs that are
    not and the set that is. ``allowed`` is injectable for tests."""
    here = allowed()
    missing = sorted(set(cpus) - here)
    if missing:
        raise SettingsError(f"{what} names CPUs this host does not have (or this process may not use): "
                            f"{format_cpu_list(missing)}", evidence={"asked": format_cpu_list(sorted(cpus)),
                            "not here": format_cpu_list(missing), "this process may use": format_cpu_list(sorted(here))},
                            hint="name CPUs of the set this process may use (taskset -pc $$ shows it), or leave "
                                 "--cpus empty")
    return tuple(cpus)
