"""Text-audio consistency WER for Video-AMME: the reference is the model's own text reply, the
hypothesis the ASR transcript of its speech. Writes ``wer_summary.json`` with the WER fields at
top level (and ``wer_per_sample.json``).

    python -m omnibench_plugins.videoamme.score --output-dir out --port 8000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from omnibench_core.jsonio import read_json, write_json
from omnibench_core.scoring import wer
from omnibench_core.scoring.asr_client import transcribe_files


def consistency(output_dir: Path, *, port: int, model: str, lang: str = "en", concurrency: int = 4,
                host: str = "127.0.0.1", asr_label: str = "") -> dict[str, Any]:
    """Transcribe each reply's speech and score it against the reply's text."""
    rows = read_json(output_dir / "videoamme_results.json")["per_sample"]

    def wav(row: dict[str, Any]) -> Path | None:
        if not row.get("is_success"):
            return None
        path = Path(row.get("wav_path") or "")
        return path if path.is_file() else output_dir / "audio" / f"{row['sample_id']}.wav"

    heard = transcribe_files([wav(r) for r in rows], url=f"http://{host}:{port}/v1/audio/transcriptions",
                             model=model, lang=lang, concurrency=concurrency)
    counts, per_sample, skipped = wer.score_transcripts([
        ({"sample_id": row["sample_id"], "reference": row.get("raw_response"), "transcript": text},
         row.get("raw_response") or "", text, error) for row, (text, error) in zip(rows, heard, strict=True)])
    summary = {**wer.summarize(counts, total=len(rows), skipped=skipped, lang=lang), "asr": asr_label or model}
    write_json(output_dir / "wer_summary.json", summary)
    write_json(output_dir / "wer_per_sample.json", per_sample)
    return summary


def main(argv: list[str] | None = None) -> int:
    """Score a client's output directory on the ASR server at ``--port``."""
    p = argparse.ArgumentParser(prog="python -m omnibench_plugins.videoamme.score")
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--asr-model", default="Qwen/Qwen3-ASR-1.7B")
    p.add_argument("--asr-label", default="")
    p.add_argument("--lang", default="en")
    p.add_argument("--asr-concurrency", type=int, default=4)
    a = p.parse_args(argv)
    summary = consistency(a.output_dir, port=a.port, host=a.host, model=a.asr_model, lang=a.lang,
                          concurrency=a.asr_concurrency, asr_label=a.asr_label)
    print({k: v for k, v in summary.items() if not isinstance(v, str)}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
