"""Each seed-tts A/B experiment's rounds from its results root: per round each side's geometric mean
latency over the requests matched by id (each run's request_values.json), the round's log-ratio,
and the paired t over rounds; with --shift-ms, the same with that many ms added to every request of
both sides (a replay of a sleep on both sides, arithmetic, not a measurement).

    python rounds.py ROOT [ROOT ...] [--shift-ms 0,50,100,250] > rounds.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

METRIC = "seedtts.latency_mean_s"


def rounds_of(root: Path) -> dict[int, dict[str, dict[str, float]]]:
    """round -> side -> request id -> latency (s), for the complete measured runs of the record."""
    (record,) = (root / "ab").glob("*.json")
    out: dict[int, dict[str, dict[str, float]]] = {}
    for a in json.loads(record.read_text())["attempts"]:
        if a["status"] == "complete" and a["round"] > 0:
            values = json.loads((root / a["revision"] / a["run"] / "request_values.json").read_text())
            out.setdefault(a["round"], {})[a["side"]] = values[METRIC]
    return out


def summary(root: Path, shifts: list[float]) -> dict:
    """The experiment's rounds and, per shift, the rounds' log-ratios with their paired t."""
    rounds = rounds_of(root)
    rows, by_shift = [], {}
    for r, sides in sorted(rounds.items()):
        ids = sorted(set(sides["A"]) & set(sides["B"]))
        gm = {s: math.exp(statistics.mean(math.log(sides[s][i]) for i in ids)) for s in ("A", "B")}
        rows.append({"round": r, "matched": len(ids), "a_gm_s": round(gm["A"], 4), "b_gm_s": round(gm["B"], 4),
                     "log_ratio": round(math.log(gm["B"] / gm["A"]), 4)})
    for shift in shifts:
        lrs = [statistics.mean(math.log((s["B"][i] + shift) / (s["A"][i] + shift)) for i in sorted(set(s["A"]) & set(s["B"])))
               for _, s in sorted(rounds.items())]
        sd = statistics.stdev(lrs)
        by_shift[f"{shift * 1000:g}ms"] = {"mean": round(statistics.mean(lrs), 4), "sd": round(sd, 4),
                                          "t": round(statistics.mean(lrs) / (sd / math.sqrt(len(lrs))), 2)}
    return {"root": root.name, "rounds": rows, "both_sides_shifted": by_shift}


def main(argv: list[str]) -> int:
    """Print one JSON list, an entry per results root."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("--shift-ms", default="0,50,100,250")
    args = ap.parse_args(argv)
    shifts = [float(x) / 1000 for x in args.shift_ms.split(",")]
    json.dump([summary(root, shifts) for root in args.roots], sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
