"""Stage the runbook's Video-AMME questions as a local ``samples.json`` (run by the sglang-omni
checkout's python, from the checkout root, so that its own loader reads the Hugging Face cache
offline and resolves the video and question files).

Used when omnibench's native client runs against the sglang-omni target. The files stay where the
loader found them; ``samples.json`` holds their absolute paths.

    python stage_hf.py --repo-id zhaochenyang20/Video_AMME_ci --max-samples 10 --out DIR
"""

import argparse
import json
import os
import sys


def _row(sample) -> dict:
    """A sample in omnibench's set format (``plugins/videoamme/data.py``)."""
    def text(name: str) -> str:
        return str(getattr(sample, name, "") or "")

    return {"sample_id": text("sample_id"), "video": os.path.abspath(text("video_path")),
            "audio": os.path.abspath(text("audio_path")), "question": text("question"),
            "options": [str(o) for o in getattr(sample, "options", None) or []], "answer": text("answer"),
            "duration": text("duration") or "unknown", "domain": text("domain") or "unknown",
            "task_type": text("task_type") or "unknown"}


def main() -> int:
    """Stage; exit 1 when the loader gives no samples."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo-id", required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-samples", type=int)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())  # `benchmarks` is imported from the checkout root
    from benchmarks.dataset.videomme import load_videoamme_samples

    samples = load_videoamme_samples(repo_id=args.repo_id, split=args.split, max_samples=args.max_samples)
    if not samples:
        print(f"no Video-AMME samples from {args.repo_id} split {args.split}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "samples.json"), "w", encoding="utf-8") as handle:
        json.dump([_row(s) for s in samples], handle, indent=2)
    print(f"staged {len(samples)} questions from {args.repo_id} split {args.split}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
