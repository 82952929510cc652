"""The runbook's CPU-group block, word for word, as the oracle for omnibench's setup.cpus.

Run as `python runbook_cpus.py SYSFS_ROOT GPU_A GPU_B`: /sys paths are redirected to SYSFS_ROOT
(the block opens them by absolute path); lscpu and nvidia-smi come from PATH.
"""
import builtins
import sys

_root = sys.argv.pop(1)
_open = builtins.open
builtins.open = lambda p, *a, **k: _open(_root + p[4:] if str(p).startswith("/sys/") else p, *a, **k)

# --- the runbook's block ---
import subprocess, sys
from collections import defaultdict

run = lambda cmd: subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
siblings, core_node, free, groups = defaultdict(list), {}, defaultdict(list), {}
for line in run(["lscpu", "-p=CPU,CORE,NODE"]).splitlines():
    if not line.startswith("#"):
        cpu, core, node = line.split(",")
        siblings[int(core)].append(int(cpu))
        core_node[int(core)] = int(node or 0)
for core in sorted(core_node):
    if core not in (0, 1):
        free[core_node[core]].append(core)
for line in run(["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"]).splitlines():
    index, bus = (x.strip() for x in line.split(","))
    node = max(int(open(f"/sys/bus/pci/devices/{bus[-12:].lower()}/numa_node").read()), 0)
    if len(free[node]) >= 14:
        group, free[node] = free[node][:14], free[node][14:]
        groups[index] = sorted(c for core in group for c in siblings[core])
a, b = groups[sys.argv[1]], groups[sys.argv[2]]
print("BENCH_CPUS=" + ",".join(map(str, a)))
print("CI_CPUS=" + ",".join(map(str, sorted(a + b))))
