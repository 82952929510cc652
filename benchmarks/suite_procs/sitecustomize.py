"""suite_cpu's process recorder: with ``SUITE_PROCS_OUT`` set, every Python process that starts with
this folder on its PYTHONPATH writes, as it exits, its own CPU time and command line to
``$SUITE_PROCS_OUT/<pid>.json`` (``python benchmarks/suite_cpu.py --procs`` sums them by kind), and as it
starts, its command line to ``<pid>.start.json`` (for ``--pacct``).
Without the variable it does nothing. A process killed by a signal it does not handle writes
nothing, and one started with -S, -I or a cleaned environment is not seen: the figures are a floor.
"""

import atexit
import os
import sys


def _record() -> None:
    import json
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    line = {"argv": list(getattr(sys, "orig_argv", sys.argv))[:16], "cpu": round(used.ru_utime + used.ru_stime, 4),
            "system": round(used.ru_stime, 4), "test": os.environ.get("PYTEST_CURRENT_TEST", "")}
    try:
        out = os.environ["SUITE_PROCS_OUT"]
        os.makedirs(out, exist_ok=True)  # the first process to exit makes it: the documented command has no mkdir
        with open(os.path.join(out, f"{os.getpid()}.json"), "w") as f:
            json.dump(line, f)
    except (OSError, KeyError):
        pass


def _started() -> None:
    """At once, for suite_cpu.py --pacct: a process a signal ends writes nothing at exit, and the
    kernel's record of it names only "python"; a pid reused later appends its own line."""
    import json
    import time

    try:
        os.makedirs(os.environ["SUITE_PROCS_OUT"], exist_ok=True)
        with open(os.path.join(os.environ["SUITE_PROCS_OUT"], f"{os.getpid()}.start.json"), "a") as f:
            f.write(json.dumps({"argv": list(getattr(sys, "orig_argv", sys.argv))[:16], "started": time.time()}) + "\n")
    except OSError:
        pass


if os.environ.get("SUITE_PROCS_OUT"):
    # A server or client started in another folder (a run's) must find this module and the output
    # folder too: both made absolute for the children, so a relative PYTHONPATH records them as well.
    os.environ["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else p
                                               for p in os.environ.get("PYTHONPATH", "").split(os.pathsep))
    os.environ["SUITE_PROCS_OUT"] = os.path.abspath(os.environ["SUITE_PROCS_OUT"])
    atexit.register(_record)
    _started()
