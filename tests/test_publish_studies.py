"""`invoke publish`'s pages of the sweeps and A/B experiments in the results root (issue 45 item 4):
a page each with its plot, drawn from the records the real writers wrote (tests/study_samples.py,
no server), nothing recomputed; the index grouped by workload and kind with a filter that works
from disk; and, in the real headless Chromium, the new pages load without a console error, every
link and image resolves, planted HTML in a sweep's or an experiment's name stays text, and the
filter narrows the index."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser_helpers import launched, new_page
from history_samples import history
from study_samples import AB_NAME, POINTS, write_ab_sample, write_sweep_sample

from omnibench_core.history import site
from omnibench_core.history.site_command import Published, publish_text
from omnibench_core.sweep.points import LoadPoint

PLANT = '<img src=x onerror="window.planted=1">'


def _results(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A results root with the history's campaigns, one sweep and one A/B; (root, sweep.json, A/B record)."""
    results = tmp_path / "results"
    history(results)
    return results, write_sweep_sample(results).json, write_ab_sample(results)


def _render(results: Path, out: Path, skipped: list[str] | None = None) -> Path:
    return site.render(history(results.parent / "h"), results, out, skipped)


def _one(out: Path, folder: str) -> str:
    (page,) = (out / folder).glob("*.html")
    return page.read_text()


def test_points_are_named_in_words():
    assert [LoadPoint(4, None).words, LoadPoint(None, 2.0).words, LoadPoint(4, 2.5).words, LoadPoint(None, None).words] \
        == ["4 concurrent", "2 req/s", "4 concurrent, 2.5 req/s", "all at once"]


def test_a_sweep_and_an_ab_each_get_a_page_with_its_plot_read_from_their_records(tmp_path):
    results, sweep_json, ab_record = _results(tmp_path)
    skipped: list[str] = []
    out = _render(results, tmp_path / "site", skipped)
    assert skipped == []
    sweep = _one(out, "sweeps")
    # the curve: every point with both error bars (the runs' sd, from sweep.json), labelled in words
    assert 'class="sweep-plot"' in sweep and f'data-points="{len(POINTS)}"' in sweep
    assert sweep.count('class="xbar"') == sweep.count('class="ybar"') == len(POINTS)
    drawn = sweep.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert all(f">{c} concurrent</text>" in drawn for c, *_ in POINTS) and ">c4<" not in drawn  # not the label
    assert re.findall(r'class="knee"[^>]*data-label="(\w+)"', sweep) == ["c4"]
    assert "knee: 4 concurrent (c4)" in sweep and "<th>latency mean ± sd</th>" in sweep and "580 ms ± 40.0 ms" in sweep
    ab = _one(out, "ab")
    assert 'class="ab-plot"' in ab and 'data-rows="2"' in ab and 'class="verdict worse"' in ab
    assert "stopped: decided after 3 rounds" in ab and "Rounds until the answer is known" in ab  # the stop reason
    assert "B round 2: run" in ab and "was noisy" in ab  # the noise flag, as ab.md wrote it
    assert (out / "ab" / AB_NAME / "ab.md").is_file() and (out / "ab" / AB_NAME / "ab.json").is_file()
    index = (out / "index.html").read_text()
    assert '<script src="filter.js"></script>' in index and (out / "filter.js").is_file()
    assert 'data-workload="seedtts"' in index and f'href="ab/{AB_NAME}.html"' in index and "1 sweeps, 1 A/B" in index
    # doctored records: the page shows what they hold (nothing recomputed), a knee moved, a verdict turned
    doc = json.loads(sweep_json.read_text())
    sweep_json.write_text(json.dumps({**doc, "knees": ["c2"]}))
    result = ab_record.with_suffix("") / "ab.json"  # the experiment's result, beside its record
    text = result.read_text()
    result.write_text(text.replace('"verdict": "worse"', '"verdict": "better"'))
    again = _render(results, tmp_path / "site")
    assert re.findall(r'class="knee"[^>]*data-label="(\w+)"', _one(again, "sweeps")) == ["c2"]
    assert 'class="verdict worse"' not in _one(again, "ab") and 'class="verdict better"' in _one(again, "ab")


def test_a_sweep_record_without_the_runs_spread_says_so_and_draws_no_bars(tmp_path):
    results, sweep_json, _ = _results(tmp_path)
    doc = json.loads(sweep_json.read_text())
    sweep_json.write_text(json.dumps({**doc, "points": [{k: v for k, v in p.items() if k != "latency_mean_sd_s"}
                                                        for p in doc["points"]]}))
    page = _one(_render(results, tmp_path / "site"), "sweeps")
    assert 'class="ybar"' not in page and page.count('class="xbar"') == len(POINTS)
    assert "holds no spread of the mean latency" in page


def test_records_that_cannot_be_read_are_named_and_get_no_page(tmp_path):
    results, sweep_json, ab_record = _results(tmp_path)
    sweep_json.write_text(json.dumps({**json.loads(sweep_json.read_text()), "points": "none"}))
    ab_record.write_text("{")
    skipped: list[str] = []
    out = _render(results, tmp_path / "site", skipped)
    assert not (out / "sweeps").exists() and not (out / "ab").exists()
    assert any(str(sweep_json) in s and "its sweep has no page" in s for s in skipped), skipped
    assert any(str(ab_record) in s and "its experiment has no page" in s for s in skipped), skipped
    line = publish_text(Published(out, 2, 1, tuple(skipped), 0, 0))
    assert f"skipped {sweep_json}" in line and "0 sweeps, 0 A/B experiments" in line


def test_metrics_are_grouped_by_kind_on_the_index():
    assert [site.kind_of(m) for m in ("seedtts.latency_p95_s", "seedtts.throughput_qps", "seedtts.wer",
                                      "videoamme.accuracy", "seedtts.gpu_util_pct", "seedtts.energy_mj",
                                      "seedtts.power_w", "seedtts.sim_mean", "seedtts.simulated_s")] == \
        ["speed", "speed", "quality", "quality", "resources", "resources", "resources", "quality", "speed"]


# -- in a real browser --------------------------------------------------------------------------
@pytest.fixture
def browser():
    with launched() as browser:
        yield browser


def _plant(sweep_json: Path, ab_record: Path) -> None:
    """HTML planted where a name is shown: the sweep's folder and record, the experiment's file and record."""
    doc = json.loads(sweep_json.read_text())
    sweep_json.write_text(json.dumps({**doc, "sweep": PLANT, "findings": [*doc["findings"], PLANT]}))
    base = sweep_json.parent.parent
    base.rename(base.with_name(PLANT))
    planted = ab_record.with_name(f"{PLANT}.json")
    planted.write_text(json.dumps({**json.loads(ab_record.read_text()), "name": PLANT}))
    ab_record.unlink()
    ab_record.with_suffix("").rename(planted.with_suffix(""))


def _local_targets(page, out: Path) -> list[Path]:
    """Every link and image of the page that is a file of the site."""
    urls = page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)"
                         ".concat([...document.images].map(i => i.src))")
    return [Path(unquote(urlsplit(u).path)) for u in urls if u.startswith("file:")]


@pytest.mark.slow
def test_the_new_pages_load_clean_with_names_inert_and_the_index_filter_works(tmp_path, browser):
    results, sweep_json, ab_record = _results(tmp_path)
    _plant(sweep_json, ab_record)
    made = _render(results, tmp_path / "made")
    out = tmp_path / "elsewhere" / "site"
    shutil.copytree(made, out)  # opened alone: no results root beside it
    shutil.rmtree(results)
    errors: list[str] = []
    failed: list[str] = []
    page = new_page(browser, errors)
    page.on("requestfailed", lambda r: failed.append(r.url))
    assert page.goto((out / "index.html").as_uri()).ok
    for link, drawn in (("sweeps", "svg.sweep-plot"), ("ab", "svg.ab-plot")):
        with page.expect_navigation():
            page.locator(f'a[href^="{link}/"]').first.click()
        page.wait_for_selector(drawn)
        assert page.evaluate(f"() => document.querySelector('{drawn}').getBoundingClientRect().width") > 400
        assert PLANT in page.inner_text("h1")  # the planted name shown as text ...
        assert page.evaluate("() => window.planted === undefined && document.querySelectorAll('img[onerror]').length "
                             "=== 0")  # ... never run
        targets = _local_targets(page, out)
        assert targets and all(t.is_file() and t.resolve().is_relative_to(out) for t in targets), targets
        assert page.evaluate("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
        page.go_back()
    assert all(t.is_file() for t in _local_targets(page, out))

    def visible() -> dict:
        return page.evaluate("""() => ({rows: [...document.querySelectorAll('tbody tr[data-kind]')]
                                           .filter(r => r.offsetParent !== null).map(r => r.dataset.kind),
                                        nothing: !document.getElementById('nothing-shown').hidden,
                                        count: document.getElementById('filter-count').textContent})""")

    everything = visible()
    assert sorted(set(everything["rows"])) == ["ab", "speed", "sweep"] and not everything["nothing"], everything
    page.fill("#filter-words", "latency_mean")  # words: only the series whose name holds them
    assert visible()["rows"] == ["speed"] and visible()["count"] == f"1 of {len(everything['rows'])} shown"
    page.fill("#filter-words", "seedtts")  # a workload's name shows its section
    assert visible()["rows"] == ["sweep"]
    page.uncheck('#filter input[value="sweep"]')  # a kind unticked hides its rows
    assert visible()["rows"] == [] and visible()["nothing"]
    page.fill("#filter-words", "")
    assert sorted(set(visible()["rows"])) == ["ab", "speed"]
    assert errors == [] and failed == [], (errors, failed)
