"""Issue 31, item 8: a name a user gives (a campaign, an experiment, a metric, a revision label)
renders as text in every Markdown file omnibench writes: report.md, compare.md and its
summary.md, ab.md and its summary.md. Each file is written by its real writer, then rendered with
Python-Markdown (what mkdocs uses); the HTML must hold no link, image, HTML tag or code span made
from the name, and no ``@everyone`` a mention filter would pick up, while the name's text is there."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import markdown
import pytest

from omnibench_core.ab import record
from omnibench_core.ab.analysis import analyse
from omnibench_core.ab.record import Attempt, Design, Experiment, Identity, Side
from omnibench_core.ab.writing import summary_of, write_result
from omnibench_core.campaign import pr_summary
from omnibench_core.campaign.compare import compare
from omnibench_core.campaign.pr_summary import COMPARISON_SUMMARY
from omnibench_core.campaign.summary import stats_of
from omnibench_core.campaign.writing import write_compare, write_report
from omnibench_core.statuses import AttemptStatus
from omnibench_core.tables import ZWSP, md_text

# No "/" (a name with one is refused as a path): a relative link and image, a code span, HTML, a mention.
HOSTILE = "x`y` [link](evil.example) ![img](x.png) @everyone <img src=x onerror=alert(1)> **b** _i_ https:\\\\e.co"
METRIC = "selftest.[m](evil.example)_`code`"


def rendered(md: str) -> str:
    # GitHub renders the Markdown inside a summary's <details> (blank lines around it);
    # Python-Markdown keeps an HTML block raw: unfold it, as GitHub shows it
    md = re.sub(r"<details><summary>.*?</summary>|</details>", "", md)
    return markdown.markdown(md, extensions=["tables"])


def assert_inert(md: str, *names: str) -> None:
    """Nothing in the HTML of ``md`` is made of ``names``: no link, image, tag or code span, no
    mention; and each name's text is shown."""
    page = rendered(md)
    assert "<a " not in page and "<code>y</code>" not in page and "<code>code</code>" not in page, page
    # the only images are omnibench's own plots, named from the metric with [A-Za-z0-9_.-] only
    for tag in re.findall(r"<img[^>]*>", page):
        assert re.fullmatch(r'<img alt="[\w. -]+" src="(report|compare)-plots/[\w.-]+\.png" />', tag), tag
    assert "<strong>b</strong>" not in page and "<em>i</em>" not in page, page
    assert "@everyone" not in page  # the zero-width space breaks GitHub's mention filter
    text = html.unescape(re.sub(r"<[^>]+>", "", page)).replace(ZWSP, "")
    for name in names:
        assert name in text, (name, text)


def test_the_escape_renders_a_name_as_exactly_its_text():
    for name in (HOSTILE, METRIC, "a|b", "back\\slash", "~~struck~~", "&amp; &lt;"):
        assert_inert(md_text(name), name)
        assert_inert("| name |\n|---|\n| " + md_text(name) + " |", name)  # in a table cell, whole
    assert md_text("selftest.latency_mean_s") == "selftest.latency_mean_s"  # plain names stay readable


def _run(folder: Path, metric: str, value: float) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"metrics": {metric: value}, "complete": True}))
    (folder / "manifest.json").write_text(json.dumps({"steps": [], "status": "complete"}))
    return folder


def test_report_compare_and_their_summaries_render_the_names_as_text(tmp_path):
    a = [_run(tmp_path / "rev-a" / f"run{i}", METRIC, v) for i, v in enumerate((1.0, 1.1, 1.05), start=1)]
    b = [_run(tmp_path / "rev-b" / f"run{i}", METRIC, v) for i, v in enumerate((2.0, 2.1, 2.05), start=1)]
    sa, sb = stats_of(HOSTILE, a), stats_of(HOSTILE + " B", b)
    report = write_report(tmp_path / "out", sa, {"campaign": HOSTILE, "revision": HOSTILE})
    assert_inert(report.markdown.read_text(), HOSTILE, METRIC)
    c = compare(sa, sb)
    written = write_compare(tmp_path / "cmp", c, {METRIC: ([1.0, 1.1, 1.05], [2.0, 2.1, 2.05])},
                            COMPARISON_SUMMARY)  # the summary `invoke compare` writes
    assert_inert(written.markdown.read_text(), HOSTILE, METRIC)
    assert written.summary is not None
    summary = written.summary.read_text()
    assert_inert(summary, HOSTILE, METRIC)


@pytest.mark.parametrize("name", [HOSTILE.replace(" ", "-")])
def test_ab_md_and_its_summary_render_the_names_as_text(tmp_path, name):
    ident = Identity(("selftest",), None, (("target", "local"),), Side("A"), Side("B", sets=(("local_delay_ms", HOSTILE),)),
                     Design.INTERLEAVED, 2, 0)
    e = Experiment(name, ident, 2, "deferred", record.schedule(Design.INTERLEAVED, 2, 0))
    for i, (side, rnd, value) in enumerate([("A", 1, 1.0), ("B", 1, 1.2), ("A", 2, 1.1), ("B", 2, 1.32)]):
        _run(tmp_path / "local-abc" / f"run{i + 2}", METRIC, value)
        e = e.with_attempt(Attempt(side, rnd, f"run{i + 2}", "local-abc", AttemptStatus.COMPLETE, f"t{i}"))
    analysis = analyse(e, tmp_path)
    (tmp_path / "ab").mkdir()
    md, summary, _ = write_result(e, analysis, tmp_path / "ab" / "x.json")
    assert_inert(md.read_text(), name, METRIC, HOSTILE)
    assert_inert(summary.read_text(), name, METRIC)
    assert_inert(pr_summary.markdown(summary_of(analysis, md)), name)
