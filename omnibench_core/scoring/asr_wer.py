"""ASR WER scoring, one pipeline for every workload: read the rows a client wrote, transcribe
each successful row's WAV on an ASR server, normalise, score with jiwer, summarise, write.

Workloads differ only in where the rows are, which field is the reference and how the result
files are laid out (sglang-omni's own names and fields, so its scripts read them); those are the
parameters of a :class:`WerJob`. The ``asr-wer`` scorer (``omnibench_core.builtin.scorers``) plans it.

    python -m omnibench_core.scoring.asr_wer --output-dir out --port 8000 --rows generated.json \
        --reference-field target_text --output wer_results.json
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from ..jsonio import read_json, write_json
from ..records import Endpoint
from . import tts_wer_files
from .tts_wer_files import Heard

ASR_SPEED_FILE = "asr_speed_results.json"  # sglang-omni's seed-tts transcription writes it beside the WER files


@dataclass(frozen=True)
class WerJob:
    """Where a workload's rows are and how its WER files are laid out.

    ``rows``: the client's file, relative to the output folder; ``rows_key``: the list inside
    it ("" when the file is the list). ``layout``: ``nested`` writes ``{summary, config,
    per_sample}`` to ``output``; ``flat`` writes the summary's fields at top level and the
    per-sample records to ``per_sample_output``. ``record_fields`` names the id, reference and
    transcript fields of each per-sample record. The ``nested`` layout is sglang-omni's seed-tts
    transcription, file for file (:mod:`.tts_wer_files`): its per-sample rows, ``wer_results.csv``
    beside ``output`` and ``asr_speed_results.json``; ``generation_config`` names the client's file
    whose ``config`` gives the model, speaker, voice clone, meta and sample cap it records.
    """

    rows: str
    reference_field: str
    output: str
    rows_key: str = ""
    id_field: str = "sample_id"
    layout: Literal["nested", "flat"] = "nested"
    per_sample_output: str = ""
    record_id: str = "id"
    record_reference: str = "target_text"
    record_transcript: str = "whisper_text"
    generation_config: str = ""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> WerJob:
        """A job from a workload's scorer parameters (unknown keys are an error)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known - {"step", "lang"})
        if unknown:
            raise ValueError(f"unknown asr-wer parameter(s): {', '.join(unknown)}")
        return cls(**{k: v for k, v in params.items() if k in known})

    def argv(self) -> list[str]:
        """The job as command-line flags of this module."""
        out: list[str] = []
        for f in fields(self):
            out += [f"--{f.name.replace('_', '-')}", str(getattr(self, f.name))]
        return out


def _wav(output_dir: Path, row: Mapping[str, Any], id_field: str) -> Path | None:
    """A successful row's WAV: ``wav_path`` if it exists, else ``audio/<id>.wav`` (a run moved aside)."""
    if not row.get("is_success"):
        return None
    path = Path(row.get("wav_path") or "")
    return path if row.get("wav_path") and path.is_file() else output_dir / "audio" / f"{row[id_field]}.wav"


def score(job: WerJob, output_dir: Path, *, endpoint: Endpoint, model: str, lang: str = "en",
          concurrency: int = 4, asr_label: str = "") -> dict[str, Any]:
    """Transcribe and score every row; write the job's files; return the summary."""
    # Imported here, not at the top: every process that loads the plugins imports this module for
    # WerJob (the asr-wer scorer's plan), and aiohttp and jiwer cost it about 0.13 CPU-s a start.
    from . import wer
    from .asr_client import transcribe_files_timed

    doc = read_json(output_dir / job.rows)
    rows = doc[job.rows_key] if job.rows_key else doc
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{output_dir / job.rows}: the rows are not a list of objects")
    answers, wall_s = transcribe_files_timed([_wav(output_dir, r, job.id_field) for r in rows],
                                             url=endpoint.url("/v1/audio/transcriptions"), model=model, lang=lang,
                                             concurrency=concurrency)
    heard = [Heard(text, error, seconds) for text, error, seconds in answers]
    scored = wer.score_transcripts([
        ({job.record_id: row.get(job.id_field), job.record_reference: row.get(job.reference_field),
          job.record_transcript: h.transcript}, row.get(job.reference_field) or "", h.transcript, h.error,
         wer.Timing.of(row))
        for row, h in zip(rows, heard, strict=True)])
    summary = scored.summary(lang)
    config = {"asr_model": model, "asr": asr_label or model, "lang": lang, "asr_concurrency": concurrency,
              "normalizer": "whisper English", "aligner": "jiwer"}
    if job.layout == "flat":  # the summary alone, as sglang-omni's; what scored it goes beside the samples
        write_json(output_dir / job.output, summary)
        if job.per_sample_output:
            write_json(output_dir / job.per_sample_output, {"config": config, "per_sample": scored.records})
        return summary
    _write_tts_files(job, output_dir, rows, heard, scored.records, summary, config, wall_s)
    return summary


def _write_tts_files(job: WerJob, output_dir: Path, rows: list[dict[str, Any]], heard: list[Heard],
                     records: list[dict[str, Any]], summary: dict[str, Any], config: dict[str, Any],
                     wall_s: float) -> None:
    """sglang-omni's seed-tts transcription files: ``output`` (``summary``, ``config``,
    ``per_sample``), ``wer_results.csv`` beside it and ``asr_speed_results.json``."""
    generation: dict[str, Any] = {}
    if job.generation_config and (output_dir / job.generation_config).is_file():
        found = read_json(output_dir / job.generation_config).get("config")
        generation = found if isinstance(found, dict) else {}
    per_sample = [tts_wer_files.per_sample_row(row, row.get(job.reference_field) or "", h, record,
                                               id_field=job.id_field)
                  for row, h, record in zip(rows, heard, records, strict=True)]
    full_config = tts_wer_files.transcription_config(generation, config, asr_model=config["asr_model"],
                                                     asr_concurrency=config["asr_concurrency"])
    write_json(output_dir / job.output, {"summary": summary, "config": full_config, "per_sample": per_sample})
    with open(output_dir / Path(job.output).with_suffix(".csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(tts_wer_files.CSV_COLUMNS)
        writer.writerows(tts_wer_files.csv_row(s) for s in per_sample)
    write_json(output_dir / ASR_SPEED_FILE, tts_wer_files.asr_speed(
        per_sample, heard, wall_s, asr_model=config["asr_model"], asr_concurrency=config["asr_concurrency"]))


def main(argv: list[str] | None = None) -> int:
    """Score one output folder on the ASR server at ``--port``."""
    p = argparse.ArgumentParser(prog="python -m omnibench_core.scoring.asr_wer")
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--asr-model", required=True, help="the ASR server's --model-name")
    p.add_argument("--asr-label", default="", help="what the ASR server really is, for the report")
    p.add_argument("--lang", default="en")
    p.add_argument("--asr-concurrency", type=int, default=4)
    defaults = {f.name: f.default for f in fields(WerJob)}
    for f in fields(WerJob):
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(defaults[f.name], str):
            p.add_argument(flag, default=defaults[f.name])
        else:  # no default: required
            p.add_argument(flag, required=True)
    a = p.parse_args(argv)
    job = WerJob(**{f.name: getattr(a, f.name) for f in fields(WerJob)})
    summary = score(job, a.output_dir, endpoint=Endpoint(a.port, a.host), model=a.asr_model, lang=a.lang,
                    concurrency=a.asr_concurrency, asr_label=a.asr_label)
    print({k: v for k, v in summary.items() if not isinstance(v, str)}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
