"""A writer of the history store for the concurrency tests: a process that indexes every
campaign file of a results root again and again, as campaigns completing at once do."""

from __future__ import annotations

WRITER = """
import sys
from pathlib import Path
from omnibench_core.history.inbox import index_campaign
from omnibench_core.history.store import campaign_files
results = Path(sys.argv[1])
files = campaign_files(results)
for _ in range(int(sys.argv[2])):
    for f in files:
        assert index_campaign(results, f)
print("WROTE", len(files))
"""
