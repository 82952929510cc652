"""What the local speech server's synthesizer costs to load (every speech-server start pays it: about
90 in a suite run), side by side: one hibari-tts voice shared by the server's threads (omnibench's
way) against a voice a thread sharing one G2P (the way before, 2026-12-07); and whether the shared
voice synthesizes as fast from two threads and gives the same samples.

    python benchmarks/bench_synth_start.py [--repeat 6]

Each load runs in a fresh interpreter (hibari imported first, so the figure is the load alone),
the two ways alternating; CPU-seconds of the load, then 16 short replies from two threads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One load and one burst, in a fresh interpreter; prints a JSON line.
PROBE = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import hibari
way, threads = sys.argv[1], 2
start = time.process_time()
if way == "shared":
    voice = hibari.Hibari(threads=1)
    voice("Ready.", speed=1.0, seed=0)
    voices = [voice] * threads
else:
    first = hibari.Hibari(threads=1)
    first("Ready.", speed=1.0, seed=0)
    voices = [first]
    for _ in range(threads - 1):
        more = hibari.Hibari(threads=1, g2p=first.g2p)
        more("Ready.", speed=1.0, seed=0)
        voices.append(more)
load = time.process_time() - start
texts = [f"The video is mostly blue. Answer: {c}" for c in "ABCD" * 4]
alone = [voices[0](t, speed=1.0, seed=0) for t in texts]
wall, cpu = time.perf_counter(), time.process_time()
with ThreadPoolExecutor(threads) as pool:
    together = list(pool.map(lambda it: voices[it[0] % threads](it[1], speed=1.0, seed=0), enumerate(texts)))
print(json.dumps({"load": load, "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "same": all(np.array_equal(a, b) for a, b in zip(alone, together))}))
"""

WAYS = {"shared": "one voice, shared (omnibench's way)", "per-thread": "a voice a thread (before)"}


def probe(way: str) -> dict:
    """One fresh interpreter's load and burst for ``way``."""
    done = subprocess.run([sys.executable, "-c", PROBE, way], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Time both ways, alternating, and print a line for each and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=6, help="loads timed per way")
    args = parser.parse_args(argv)
    rows: dict[str, list[dict]] = {way: [] for way in WAYS}
    for _ in range(args.repeat):
        for way in WAYS:
            rows[way].append(probe(way))
    print(f"{args.repeat} loads a way, two voices' worth of threads; medians")
    print(f"{'way':38s} {'load CPU-s':>10s} {'16 replies, wall s':>18s} {'CPU-s':>6s}  same as serial")
    load = {}
    for way, name in WAYS.items():
        load[way] = statistics.median(r["load"] for r in rows[way])
        print(f"{name:38s} {load[way]:10.3f} {statistics.median(r['wall'] for r in rows[way]):18.3f} "
              f"{statistics.median(r['cpu'] for r in rows[way]):6.3f}  {all(r['same'] for r in rows[way])}")
    print(f"ratio of the loads, before / shared: {load['per-thread'] / load['shared']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
