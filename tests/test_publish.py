"""`invoke publish`'s site: rendered from a realistic History with report files in a results
root; written whole or not at all, never over a folder that is not a site; and opened from disk
in a real headless Chromium (Debian's, driven by Playwright): no console error, the plots drawn,
a point's link to its campaign's report followed and loaded, a screenshot saved. Also the
noxfile's step that installs that browser on a fresh machine."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from browser_helpers import launched, new_page
from history_samples import COMMITS, STEP_AT, history, revision
from run_helpers import REPO

from omnibench_core.errors import StorageError
from omnibench_core.history import site
from omnibench_core.history.series import ChangePoint, History, Series


def _site(tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    return results, site.render(history(results), results, tmp_path / "site")


def _saved(out: Path) -> History:
    return History.from_json(json.loads((out / "history.json").read_text()))


# -- the renderer -----------------------------------------------------------------------------
def test_the_site_has_an_index_a_page_per_series_and_copies_of_the_reports(tmp_path):
    results, out = _site(tmp_path)
    index = (out / "index.html").read_text()
    assert "Regressions, newest first" in index and "Workload selftest" in index
    pages = sorted((out / "series").glob("*.html"))
    assert [p.name for p in pages] == ["local--selftest--selftest.completion_tokens_sum.html",
                                       "local--selftest--selftest.latency_mean_s.html"]
    latency = pages[1].read_text()
    assert latency.count('class="point"') == COMMITS and latency.count('class="change-point worse"') == 1
    assert "driver 560.35" in pages[0].read_text() and "driver: 550.54 → 560.35" in pages[0].read_text()
    # every point links a page inside the site: its report, or (commit 2 has none) its campaign
    links = [line.split('href="', 1)[1].split('"', 1)[0] for line in latency.splitlines() if 'class="point-link"' in line]
    assert len(links) == COMMITS and all((out / "series" / link).resolve().is_file() for link in links)
    assert all((out / "series" / link).resolve().is_relative_to(out) for link in links)
    assert [link.rsplit("/", 1)[1] for link in links].count("report.html") == COMMITS - 1
    campaign = (out / "series" / links[1]).resolve()
    assert campaign.name == "selftest_c2.html" and (campaign.parent / "selftest_c2.json").is_file()
    text = campaign.read_text()
    assert "No report was made" in text and f"invoke report --name local-{revision(2)[:12]}/selftest_c2" in text
    assert "&quot;status&quot;: &quot;complete&quot;" in text and ">campaign</a>" in latency
    copied = out / "reports" / f"local-{revision(3)[:12]}" / "campaigns" / "selftest_c3"
    assert (copied / "report.md").read_bytes() == (results / copied.relative_to(out / "reports") / "report.md").read_bytes()
    assert (copied / "report-plots" / "selftest.latency_mean_s.png").is_file()
    saved = _saved(out)  # the history the site shows, for programs
    assert [s.metric for s in saved.series] == [s.metric for s in history(tmp_path / "again").series]
    assert saved.series[0].points[STEP_AT - 1].values == history(tmp_path / "again2").series[0].points[STEP_AT - 1].values


def test_regressions_are_listed_newest_first_with_their_step_and_environment(tmp_path):
    results = tmp_path / "results"
    h = history(results)
    latency, tokens = h.series
    old = ChangePoint(revision(1), revision(2), (), 0.1, 0.12, 0.2, 0.1, 0.3, "worse", {"driver": ("549", "550.54")})
    # commit 2 in another time zone, written later in the day as text but earlier in time than commit 6
    points = list(latency.points)
    points[1] = type(points[1])(**{**points[1].__dict__, "commit_time": "2026-11-16T20:00:00+12:00"})
    latency = Series(latency.workload, latency.metric, latency.target, latency.direction, tuple(points),
                     latency.change_points)
    h = History((Series(latency.workload, latency.metric, latency.target, latency.direction, latency.points,
                        (*latency.change_points, old)), tokens), h.confidence, h.detector)
    index = (site.render(h, results, tmp_path / "site") / "index.html").read_text()
    regressions = index.split("Regressions, newest first", 1)[1].split("Workload", 1)[0]
    newest, oldest = regressions.index(revision(STEP_AT)[:8]), regressions.index(revision(2)[:8])
    assert newest < oldest and "+40.0% [+33.0%, +47.0%]" in regressions and "driver: 549 → 550.54" in regressions
    assert regressions.count("<tr><td>") == 2  # the context metric's environment step is not a regression
    assert "completion_tokens_sum" not in regressions


def test_a_folder_that_is_not_a_site_is_never_overwritten(tmp_path):
    results = tmp_path / "results"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep me")
    with pytest.raises(site.SiteError) as refused:
        site.render(history(results), results, mine)
    assert "not a site made by invoke publish" in refused.value.message and "thesis.tex" in str(refused.value)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(site.SiteError, match="not a folder"):
        site.render(history(results), results, tmp_path / "afile")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "mine", "results"]  # nothing made beside them


def test_an_earlier_site_is_replaced_whole_and_a_failed_render_leaves_it_as_it_was(tmp_path, monkeypatch):
    results, out = _site(tmp_path)
    (out / "stale.html").write_text("from an earlier site")
    site.render(history(results), results, out)  # a site made here: replaced
    assert not (out / "stale.html").exists() and (out / "index.html").is_file()
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    real = site.write_site

    def half_then_fail(h, r, folder, skipped=None):
        real(h, r, folder, skipped)
        (folder / "index.html").write_text("half")
        raise OSError(28, "No space left on device", str(folder / "series"))

    monkeypatch.setattr(site, "write_site", half_then_fail)
    with pytest.raises(StorageError) as failed:
        site.render(history(results), results, out)
    assert "ENOSPC" in str(failed.value)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before and "half" not in (out / "index.html").read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".site.lock") == ["results", "site"]  # no partial
    # a publish killed mid-way left its temporary folders: the next one removes them
    for left in (".site.abc123.partial", ".site.def456.old"):
        (tmp_path / left / "series").mkdir(parents=True)
    monkeypatch.setattr(site, "write_site", real)
    site.render(history(results), results, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site.lock", "results", "site"]


def test_a_report_outside_the_results_root_is_not_copied(tmp_path):
    results = tmp_path / "results"
    h = history(results)
    (tmp_path / "secret.md").write_text("not yours")
    s = h.series[0]
    p0 = s.points[0]
    (tmp_path / "secret.json").write_text("{}")
    bad = type(p0)(**{**p0.__dict__, "report": "../secret.md", "campaign": "../secret.json"})
    h = History((Series(s.workload, s.metric, s.target, s.direction, (bad, *s.points[1:]), s.change_points),),
                h.confidence, h.detector)
    out = site.render(h, results, tmp_path / "site")
    page = next((out / "series").glob("*.html")).read_text()
    assert not list(out.rglob("secret.*")) and "report not found at" in page and "no campaign file at" in page
    assert page.count('class="point-link"') == COMMITS - 1  # that point is not linked


@pytest.mark.slow
def test_invoke_publish_refuses_a_folder_that_is_not_a_site_before_anything_else(invoke, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    done = invoke("publish", "--out", str(mine))
    assert done.returncode == 1 and "not a site made by invoke publish" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and (mine / "notes.txt").read_text() == "keep"
    # a results folder that does not exist (a typo) is refused: it made an empty history there and
    # replaced the site at --out with an empty one (a new user's trial, 2026-12-06)
    site = tmp_path / "site"
    first = invoke("publish", "--out", str(site), "--results", str(tmp_path / "resluts"))
    assert first.returncode == 1 and f"no results folder at {tmp_path / 'resluts'}" in first.stderr, first.stderr
    assert not (tmp_path / "resluts").exists() and not site.exists()
    helped = invoke("publish", "-h")
    assert helped.returncode == 0 and all(f in helped.stdout for f in ("--out", "--target", "--workload", "--results"))


# -- in a real browser --------------------------------------------------------------------------
@pytest.fixture
def browser():
    with launched() as browser:
        yield browser


@pytest.mark.slow
def test_the_site_opened_alone_from_disk_draws_its_plots_and_its_report_links_resolve(tmp_path, browser):
    results, out = _site(tmp_path)
    alone = tmp_path / "elsewhere" / "site"
    shutil.copytree(out, alone)  # the folder opened alone: no results root beside it
    shutil.rmtree(results)
    shutil.rmtree(out)
    errors, failed = [], []
    page = new_page(browser, errors)
    page.on("requestfailed", lambda r: failed.append(r.url))
    assert page.goto((alone / "index.html").as_uri()).ok
    page.click("text=selftest.latency_mean_s >> nth=0")  # the regressions list links the series
    page.wait_for_selector("svg.series-plot")
    drawn = page.evaluate("""() => { const svg = document.querySelector('svg.series-plot');
        const box = svg.getBoundingClientRect();
        return {points: svg.querySelectorAll('circle.point').length, bars: svg.querySelectorAll('line.interval').length,
                changes: svg.querySelectorAll('g.change-point').length, width: box.width, height: box.height,
                band: svg.querySelector('polygon.band').getBBox().width,
                unit: svg.querySelector('text.yunit').textContent}; }""")
    assert drawn["unit"] == "seconds (axis not from zero)", drawn  # the axis says its unit, and its zoom
    assert drawn["points"] == drawn["bars"] == COMMITS and drawn["changes"] == 1, drawn
    assert drawn["width"] > 400 and drawn["height"] > 150 and drawn["band"] > 300, drawn
    shot = tmp_path / "series.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    with page.expect_navigation():
        page.locator(f'a.point-link:has(circle[data-revision="{revision(STEP_AT)}"])').click()
    assert page.url.endswith(f"local-{revision(STEP_AT)[:12]}/campaigns/selftest_c{STEP_AT}/report.html")
    # the report rendered as HTML, not shown as Markdown: its heading, its table, its plots in place
    assert f"selftest_c{STEP_AT}" in page.inner_text("article.report h1")
    assert page.locator("article.report table th").first.inner_text() and "| ---" not in page.inner_text("body")
    assert page.evaluate("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
    assert errors == [] and failed == [], (errors, failed)
    print(f"screenshot: {shot}")


# -- a report rendered safely ---------------------------------------------------------------------------
def test_a_report_is_rendered_as_html_with_raw_html_and_unsafe_links_left_inert():
    from omnibench_core.history.site_markdown import render

    html = render("# Report\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n![plot](report-plots/x.png)\n\n"
                  "<script>alert(1)</script>\n\ntext <img src=x onerror=alert(2)> [a](javascript:alert(3)) "
                  "[b](https://example.org/x) ![c](data:image/png;base64,AAAA)\n")
    assert "<h1>Report</h1>" in html and "<td>1</td>" in html and '<img alt="plot" src="report-plots/x.png"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html and "<img src=x" not in html
    assert "javascript:" not in html and 'href="https://example.org/x"' in html and "data:image" not in html


# -- the noxfile installs the browser ----------------------------------------------------------------
def _noxfile():
    spec = importlib.util.spec_from_file_location("omnibench_noxfile", REPO / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Session:
    """The part of nox's Session that install_browser uses, recording what it was asked to run."""

    def __init__(self):
        self.ran: list[tuple[tuple[str, ...], dict]] = []
        self.said: list[tuple[str, int]] = []  # each log line, with how many commands had run before it

    def log(self, message):
        self.said.append((message, len(self.ran)))

    def run(self, *args, **kwargs):
        self.ran.append((args, kwargs))

    def error(self, message):
        raise SystemExit(message)


def test_nox_installs_chromium_with_apt_when_it_is_missing_as_root_and_says_what_to_run_otherwise(monkeypatch):
    nox_file = _noxfile()
    assert nox_file.browser_steps(which=lambda name: "/usr/bin/chromium", euid=lambda: 0) == ()
    steps = nox_file.browser_steps(which=lambda name: None, euid=lambda: 0)
    assert steps == (("apt-get", "update"), ("apt-get", "install", "-y", "chromium"))
    with pytest.raises(RuntimeError, match=r"run as root: apt-get update && apt-get install -y chromium"):
        nox_file.browser_steps(which=lambda name: None, euid=lambda: 1000)
    monkeypatch.setattr(nox_file.shutil, "which", lambda name: None)
    monkeypatch.setattr(nox_file.os, "geteuid", lambda: 0)
    session = _Session()
    nox_file.install_browser(session)
    assert [args for args, _ in session.ran] == list(steps)
    assert all(kw == {"external": True, "env": {"DEBIAN_FRONTEND": "noninteractive"}} for _, kw in session.ran)
    # said before apt runs: what is installed, and how to skip the browser tests instead
    ((said, before),) = session.said
    assert before == 0 and "apt-get install -y chromium" in said and "OMNIBENCH_SKIP_BROWSER=1 python3 -m nox" in said
    monkeypatch.setattr(nox_file.os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit, match="need 'chromium' on PATH.*OMNIBENCH_SKIP_BROWSER=1"):
        nox_file.install_browser(_Session())
    # asked to skip: nothing installed, nothing said, whoever runs it
    monkeypatch.setenv("OMNIBENCH_SKIP_BROWSER", "1")
    skipped = _Session()
    nox_file.install_browser(skipped)
    assert skipped.ran == [] and skipped.said == []
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == "python3 -m pip install 'nox[uv]' && python3 -m nox -s tests"  # the README's command, unchanged
    assert "install_browser(session)" in (REPO / "noxfile.py").read_text().split("def tests(", 1)[1].split("\n@", 1)[0]


def test_a_link_in_a_reports_plots_copies_nothing_from_outside_the_results_root(tmp_path):
    """Issue 31, item 3: a `report-plots/x.png` link to a file elsewhere, and a `report-plots`
    folder that is a link, were copied into the site. Both are real links here; both are skipped,
    named in what `invoke publish` prints, and no byte of what they point at is in the site."""
    from omnibench_core.history.site_command import Published, publish_text

    results, secret = tmp_path / "results", tmp_path / "elsewhere"
    h = history(results)
    secret.mkdir()
    (secret / "secret.png").write_bytes(b"SECRET-BYTES")
    three = results / f"local-{revision(3)[:12]}" / "campaigns" / "selftest_c3" / "report-plots"
    (three / "x.png").symlink_to(secret / "secret.png")
    (three / "inner").symlink_to(secret)  # a folder link inside the plots
    four = results / f"local-{revision(4)[:12]}" / "campaigns" / "selftest_c4" / "report-plots"
    shutil.rmtree(four)
    four.symlink_to(secret, target_is_directory=True)
    skipped: list[str] = []
    out = site.render(h, results, tmp_path / "site", skipped)
    assert not [p for p in out.rglob("*") if p.is_file() and b"SECRET-BYTES" in p.read_bytes()]
    assert not [p for p in out.rglob("*") if p.is_symlink()]
    assert sorted(skipped) == sorted([f"{three / 'inner'}: a link; not copied", f"{three / 'x.png'}: a link; not copied",
                                      f"{four}: a link, not a folder of the results root; not copied"])
    assert (out / "reports" / three.relative_to(results) / "selftest.latency_mean_s.png").is_file()  # the real plots stay
    printed = publish_text(Published(out, 2, 1, tuple(skipped))).splitlines()
    assert printed[:3] == [f"skipped {line}" for line in skipped] and printed[3].startswith("site: ")


@pytest.mark.slow
def test_a_browser_test_asked_to_be_skipped_reports_a_skip_with_the_reason(tmp_path):
    """OMNIBENCH_SKIP_BROWSER=1 (the noxfile's way to leave the browser out) makes the browser
    tests skip, saying why, in a real pytest run: never a pass without a browser."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-rs", "-q",
                           "--basetemp", str(tmp_path / "bt"), "tests/test_publish.py", "-k", "opened_alone"],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMNIBENCH_SKIP_BROWSER": "1"})
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 skipped" in done.stdout and "OMNIBENCH_SKIP_BROWSER=1: the browser tests were asked to be skipped" \
        in done.stdout and "passed" not in done.stdout.splitlines()[-1]
