"""Write ``dataset.json`` for sglang-omni's own seed-tts client: the sample count its own loader
gives for ``--meta`` (run by the checkout's python from the checkout root, offline), so coverage
holds the run to what the client really reads rather than to an assumed 1088.

    python dataset_hf.py --repo zhaochenyang20/seed-tts-eval-arrow --split en --out DIR/dataset.json
"""

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--split", default="en")
    parser.add_argument("--revision", help="the pinned revision, recorded (the client loads refs/main)")
    parser.add_argument("--runbook-samples", type=int, help="the runbook's count, recorded for comparison")
    parser.add_argument("--max-samples", type=int)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())  # `benchmarks` is imported from the checkout root
    from benchmarks.dataset.seedtts import load_seedtts_samples

    count = len(load_seedtts_samples(args.repo, args.max_samples, split=args.split))
    doc = {"source": args.repo, "split": args.split, "revision": args.revision, "samples": count,
           "counted_by": "the checkout's load_seedtts_samples", "runbook_samples": args.runbook_samples}
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2)
    note = "" if args.max_samples or count == args.runbook_samples else f" (the runbook's set has {args.runbook_samples})"
    print(f"{args.repo} split {args.split}: {count} samples{note}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
