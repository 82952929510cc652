"""Stage the pinned seed-tts split as a local ``meta.lst`` (run by the sglang-omni checkout's
python, from the checkout root, so that its own loader reads the Hugging Face cache offline).

Used when omnibench's native client runs against the sglang-omni target.

    python stage_hf.py --repo zhaochenyang20/seed-tts-eval-arrow --split en --out DIR
"""

import argparse
import inspect
import os
import shutil
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--split", default="en")
    parser.add_argument("--revision")
    parser.add_argument("--max-samples", type=int)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())  # `benchmarks` is imported from the checkout root
    from benchmarks.dataset.seedtts import load_seedtts_samples

    kwargs = {"split": args.split}
    # Older checkouts' loaders take no revision (they read the cached refs/main); pass it only where accepted.
    if args.revision and "revision" in inspect.signature(load_seedtts_samples).parameters:
        kwargs["revision"] = args.revision
    samples = load_seedtts_samples(args.repo, args.max_samples, **kwargs)
    os.makedirs(os.path.join(args.out, "wavs"), exist_ok=True)
    lines = []
    for s in samples:
        rel = os.path.join("wavs", f"{s.sample_id}.wav")
        shutil.copyfile(s.ref_audio, os.path.join(args.out, rel))
        lines.append("|".join([s.sample_id, s.ref_text, rel, s.target_text]))
    with open(os.path.join(args.out, "meta.lst"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    print(f"staged {len(lines)} samples from {args.repo} split {args.split}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
