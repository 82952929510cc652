"""The A/B result files, ``<results>/ab/<name>/ab.md``, ``summary.md`` and ``ab.json``: written complete under a
temporary name and linked to the final one, so a reader never sees half a file and an earlier
result is never overwritten (the next is ``ab-2.md``)."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from ..campaign import pr_summary
from ..campaign.pr_summary import Group, Row, Summary, group, split
from ..errors import storage_error
from ..jsonio import strict
from ..quality.paired import HEADERS as QUALITY_HEADERS
from ..quality.paired import lines as quality_lines
from ..quality.paired import rows as quality_rows
from ..stats.verdict import Verdict, change_text, interval_text
from ..tables import md_table, md_text
from ..units import display
from . import sequential
from .analysis import HEADERS, Analysis, explanations, rows
from .record import Experiment


def _publish(folder: Path, stem: str, suffix: str, text: str) -> Path:
    """``text`` at ``folder/stem-N.suffix`` for the first free N (``stem.suffix`` first), whole."""
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        n = 1
        while True:
            target = folder / (f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}")
            try:
                os.link(tmp, target)  # fails if the name exists: nothing is overwritten
                return target
            except FileExistsError:
                n += 1
    finally:
        Path(tmp).unlink(missing_ok=True)


def family_text(analysis: Analysis, shared: str = "") -> str:
    """How the rows shared alpha, in words: one Holm family, or the decisive metrics first;
    ``shared``: what the level is (a sequential experiment's stopping look), said after it."""
    first = analysis.primary
    if not first:
        return f"the family held to alpha {analysis.alpha:.3g}{shared} with Holm's correction"
    rows = {v.metric for v in analysis.verdicts}
    shut = [m for m in first if m not in rows]
    return (f"the decisive metrics ({', '.join(first)}) held to alpha {analysis.alpha:.3g}{shared} with Holm's "
            f"correction, then the other rows likewise, called better or worse only once every decisive metric is "
            f"(serial gatekeeping: docs/verdicts.md)"
            + (f"; {', '.join(shut)} has no row here, so no other row can be called" if shut else ""))


def markdown(experiment: Experiment, analysis: Analysis, record_path: Path) -> str:
    """ab.md: the design, the sides, where each side's runs are, the table, why, the noise."""
    ident = experiment.identity
    t = md_text  # every name, option, setting and path a user gave: inert text (tables.md_text)
    rounds = f"at most {ident.max_rounds} rounds a side (--max-rounds)" if ident.max_rounds else \
        f"{ident.rounds} rounds a side"
    state = experiment.sequential
    shared = (f" at the stopping look (--alpha {state.alpha:g} over the looks: {sequential.rule_text(state, ident.max_rounds)})"
              if state is not None else "")
    md = [f"# A/B: {t(experiment.name)}", "",
          f"- design: {ident.design.value}, {rounds} (seed {ident.seed}); "
          f"rounds compared: {', '.join(map(str, analysis.rounds))}",
          f"- workloads: {t(', '.join(ident.workloads))}; client: {t(ident.client or 'the target default')}",
          f"- A (base): {t(ident.a.describe())}; runs {t(', '.join(analysis.runs['A']))}",
          f"- B: {t(ident.b.describe())}; runs {t(', '.join(analysis.runs['B']))}",
          f"- statistics: per round B/A (of the requests matched by id across the sides where a metric is a mean "
          f"over requests: each side's geometric mean over them; ab.json's `method` says so), a paired t interval "
          f"of the rounds' log-ratios (of B - A for a metric with a value of 0 or less); "
          f"{family_text(analysis, shared)} (each row's level is in `held to`); minimum effect "
          f"{analysis.min_effect:.0%}",
          f"- verdicts: {', '.join(f'{k} {v}' for k, v in analysis.counts().items())}",
          f"- {t(analysis.scored_text())}",
          f"- record: {t(record_path)}", ""]
    md += md_table(HEADERS, rows(analysis))
    if analysis.looks:  # --max-rounds: the rounds run, why it stopped, the rule, each look
        md += ["", "## Rounds until the answer is known", ""] + [f"- {t(line)}" for line in analysis.looks]
    if analysis.quality is not None and (analysis.quality.changed or analysis.quality.verdicts):
        md += ["", "## Outputs and quality, sample by sample", "",
               "Samples matched by id across the sides; a side's runs combined per sample (its most common "
               "answer, right by majority, mean WER and SIM); accuracy by McNemar's exact test, WER and SIM by a "
               "paired bootstrap over samples, the quality family held to alpha with Holm's correction "
               "(docs/verdicts.md).", ""]
        md += [f"- {t(line)}" for line in quality_lines(analysis.quality)]
        if analysis.quality.verdicts:
            md += [""] + md_table(QUALITY_HEADERS, quality_rows(analysis.quality))
    md += ["", "## Why", ""] + [f"- {t(line)}" for line in explanations(analysis)]
    if analysis.not_compared:
        md += ["", "## Not compared", ""] + [f"- {t(n.describe())}" for n in analysis.not_compared]
    if analysis.alone:
        md += ["", "## Rounds not run as a duet", ""] + [f"- {t(line)}" for line in analysis.alone] + [
            "", "These rounds' pairs did not share their timed windows: host drift between them is not cancelled."]
    md += ["", "## Host noise", ""]
    again = f"`--noisy-retries {experiment.noisy_retries}`" if experiment.noisy_retries else "`--noisy-retries N`"
    md += ([f"- {t(line)}" for line in analysis.noisy] + ["", "A verdict that rests on a noisy run may be the host's, "
                                                          "not the code's: repeat the experiment on a quieter host, "
                                                          f"or with {again} to measure a noisy round again."]
           if analysis.noisy else ["No timed window of a judged run was noisy (the noise guard's threshold: "
                                   "`noise_max_foreign`)."])
    if analysis.redone:
        md += ["", f"Set aside as noisy and measured again ({again}; kept on disk, not judged):", ""]
        md += [f"- {t(line)}" for line in analysis.redone]
    if analysis.present:
        md += ["", "GPU processes present, not noise (they held memory on a slot's GPUs and computed nothing in "
                   "these windows; the verdicts keep these runs):", ""] + [f"- {t(line)}" for line in analysis.present]
    return "\n".join(md) + "\n"


def write_result(experiment: Experiment, analysis: Analysis, record_path: Path) -> tuple[Path, Path, Path]:
    """ab.md, its pull-request summary (summary.md) and ab.json in ``<results>/ab/<name>/``; the
    summary is appended to ``$GITHUB_STEP_SUMMARY`` when that is set."""
    folder = record_path.parent / experiment.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        md = _publish(folder, "ab", ".md", markdown(experiment, analysis, record_path))
        summary = pr_summary.markdown(summary_of(analysis, md))
        summary_md = _publish(folder, pr_summary.stem_beside(md.stem), ".md", summary)
        doc: dict[str, Any] = {
            "experiment": experiment.as_record(), "record": str(record_path),
            "analysis": json.loads(json.dumps(dataclasses.asdict(analysis), default=str)),
        }
        js = _publish(folder, md.stem, ".json", json.dumps(strict(doc), indent=2, allow_nan=False) + "\n")
    except OSError as exc:
        raise storage_error(f"writing the A/B result in {folder}", exc) from exc
    pr_summary.append_step_summary(summary)  # once the result is complete
    return md, summary_md, js


def summary_of(a: Analysis, source: Path) -> Summary:
    """``invoke ab``'s summary: per metric the paired change of B against A and its verdict."""
    values = {v.metric: v for v in a.values}
    rows: list[tuple[Row, Group]] = []
    for v in a.verdicts:
        vals = values.get(v.metric)
        detail = (f"A mean {display(v.metric, statistics.fmean(vals.a))}, B mean "
                  f"{display(v.metric, statistics.fmean(vals.b))} over "
                  f"{len(vals.rounds)} rounds") if vals is not None else ""
        if v.verdict is Verdict.INCONCLUSIVE and v.needed:
            detail += f"; about {v.needed} rounds would resolve it"
        rows.append((Row(v.metric, v.direction, change_text(v.change, v.relative),
                         interval_text(v.low, v.high, v.relative, v.method), v.verdict.value, detail),
                     group(v.verdict.value)))
    for q in a.quality.verdicts if a.quality else ():
        rows.append((Row(f"{q.metric} (paired samples)", q.direction, f"{q.change:+.4g}", f"{q.low:+.4g} .. {q.high:+.4g}",
                         q.verdict.value, q.counts or q.why), group(q.verdict.value)))
    # a quality metric --score left unscored on purpose is not a gap to look at: folded with the rest
    rows += [(Row(n.metric, n.direction, "-", "-", "not scored" if n.unscored else "not compared", n.why),
              "other" if n.unscored else "undecided") for n in a.not_compared]
    changed, undecided, other = split(rows)
    facts = [f"design {a.design}; rounds {', '.join(map(str, a.rounds))}; paired, family held to alpha "
             f"{a.alpha:g} (Holm); minimum effect {a.min_effect:.0%}",
             "verdicts: " + ", ".join(f"{k} {n}" for k, n in a.counts().items())]
    facts += [md_text(line) for line in a.looks[:1]]  # --max-rounds: the rounds run and why it stopped
    facts.append(md_text(a.scored_text()))
    facts += [md_text(c.describe()) for c in (a.quality.changed if a.quality else ())]  # outputs changed
    facts += [f"noisy: {md_text(n)}" for n in a.noisy[:5]] + ([f"and {len(a.noisy) - 5} more noisy windows"]
                                                     if len(a.noisy) > 5 else [])
    facts += [f"{len(a.redone)} runs set aside as noisy and measured again"] if a.redone else []
    return Summary(f"omnibench A/B: {a.name}", tuple(facts), changed, other, str(source), undecided)
