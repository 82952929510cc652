"""`invoke measure` is a campaign (warm-up run, measured runs), and `invoke report` reports it."""

from __future__ import annotations

import html
import json
import sqlite3
import subprocess

import pytest
from run_helpers import REPO


@pytest.mark.slow
def test_measure_is_a_campaign_with_its_report(invoke, tmp_path, port):
    done = invoke("measure", "--workload", "selftest", "--runs", "2", "--port", str(port))
    assert done.returncode == 0, done.stdout + done.stderr
    (folder,) = (tmp_path / "results").glob("local-*")
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["campaigns", "run0", "run1", "run2"]
    report = json.loads((folder / "campaigns" / "selftest_local" / "report.json").read_text())
    assert report["runs"] == ["run1", "run2"]  # run0 is the warm-up
    header = (folder / "campaigns" / "selftest_local" / "report.md").read_text()
    assert "- settings: target=local" in header  # not the checkout, venv and GPUs the local target never uses
    assert not any(f"{k}=" in header for k in ("checkout", "venv", "gpus")), header[:600]
    assert report["metrics"]["selftest.requests"]["values"] == {"run1": 8, "run2": 8}
    assert "run 1 of 3 (run0 warm-up, discarded)" in done.stdout and "selftest.latency_mean_s" in done.stdout
    assert "~0s left" not in done.stdout and "| nothing left] campaign complete" in done.stdout
    # the report after the campaign says it starts (and beats while it works): no silent step
    assert done.stdout.index("writing the report of campaign selftest_local") < done.stdout.index("report of local-")
    # The history is told of the campaign after its report exists: `invoke publish` right after
    # `invoke measure` links each point to the report and copies its plots (no --rebuild needed).
    site = tmp_path / "site"
    published = invoke("publish", "--out", str(site))
    assert published.returncode == 0, published.stdout + published.stderr
    pages = sorted((site / "series").glob("local--selftest--*.html"))
    assert pages and all("No report was made" not in p.read_text() for p in pages)
    copied = site / "reports" / folder.name / "campaigns" / "selftest_local"
    assert all(f'href="../reports/{folder.name}/campaigns/selftest_local/report.html"' in p.read_text() for p in pages)
    assert (copied / "report.md").is_file() and sorted(p.name for p in (copied / "report-plots").glob("*.png")) == \
        sorted(p.name for p in (folder / "campaigns" / "selftest_local" / "report-plots").glob("*.png"))
    assert list((copied / "report-plots").glob("*.png"))
    # the local target's commit is omnibench's own: its time and subject fill the history's columns
    subject = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%s"], capture_output=True, text=True,
                             check=True).stdout.strip()
    with sqlite3.connect(tmp_path / "results" / "history.sqlite") as db:
        ((committed, indexed_subject),) = db.execute("SELECT commit_time, subject FROM campaigns").fetchall()
    assert committed and indexed_subject == subject
    assert all(html.escape(subject) in p.read_text() for p in pages)
    (folder / "run3-incomplete").mkdir()  # moved aside: never part of a report
    # Issue 46: a newer campaign still being measured is passed over, and named; the look at the
    # finished one, whose runs, values and settings did not change, writes nothing new.
    reports = folder / "campaigns" / "selftest_local"
    running = json.loads((folder / "campaigns" / "selftest_local.json").read_text())
    (folder / "campaigns" / "newer.json").write_text(json.dumps({**running, "name": "newer", "status": "running"}))
    look = invoke("report")
    assert look.returncode == 0, look.stderr
    assert f"\nthe newest finished campaign of {folder.name}: selftest_local (newer, still running, not reported: " \
           "newer;" in look.stdout, look.stdout
    assert f"report: {reports / 'report.md'}" in look.stdout and "nothing changed since this report" in look.stdout
    assert not (reports / "report-2.md").exists() and not (folder / "campaigns" / "newer").exists()
    # a value that changed (run2's metrics.json edited): the next look writes report-2, keeping report
    metrics = json.loads((folder / "run2" / "metrics.json").read_text())
    metrics["metrics"]["selftest.latency_mean_s"] *= 2
    (folder / "run2" / "metrics.json").write_text(json.dumps(metrics))
    again = invoke("report")
    assert again.returncode == 0, again.stderr
    assert "report-2.md" in again.stdout and "an earlier report is kept" in again.stdout
    assert json.loads((reports / "report-2.json").read_text())["runs"] == ["run1", "run2"]
    (folder / "campaigns" / "newer.json").write_text(json.dumps({**running, "name": "newer"}))  # finished now
    assert f"\nthe newest finished campaign of {folder.name}: newer\n" in invoke("report").stdout
