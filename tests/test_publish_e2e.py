"""`invoke publish` on the user's path, once the history store is there: `invoke standin` makes 4
commits with a latency planted from commit 3 on, `invoke matrix` measures each (2 runs, local
engine, two fake GPUs), `invoke publish` writes the site, and Chromium opens it from disk: the
plot has a dot per commit, the step is marked, and a dot's link opens its campaign's page
(a matrix makes no report.md).

It needs ``omnibench_core.history.query`` (the history store's branch): without it, it is skipped,
saying so; merged, it runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import browser_group, chromium, launched, new_page
from run_helpers import REPO, free_port
from scale_helpers import invoke_standin, path_without_nvidia_smi, server_pids

pytest.importorskip("omnibench_core.history.query", reason="the history store (invoke history) is not in this tree")

SELFTEST = ("--workload", "selftest", "--opt", "selftest.serve_with_target=true", "--opt", "selftest.requests=4")
SLOTS = ("--runs", "2", "--slots", "0,1", "--slot-per", "gpu", "--slot-cpus", "shared")


def _invoke(results: Path, *args: str, path: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "PATH": path})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout[-4000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow
@browser_group
def test_invoke_publish_of_a_measured_standin_history_opens_in_chromium(tmp_path):
    chromium()  # skipped or failed before the matrix, not after it
    made = invoke_standin(tmp_path / "co", "--commits", "4", "--regress-at", "3", "--base-delay-ms", "50",
                          "--delay-ms", "100", "--fake-gpus", str(tmp_path / "fakegpu"))
    results, path = tmp_path / "results", path_without_nvidia_smi(made.fake_gpus)
    common = ("--target", "sglang-omni", "--checkout", str(made.root))
    _invoke(results, "matrix", *common, *SELFTEST, *SLOTS, "--revisions", ",".join(made.commits),
            "--port", str(free_port()), path=path)
    out = tmp_path / "site"
    done = _invoke(results, "publish", *common, "--out", str(out), path=path)
    assert f"site: {out / 'index.html'}" in done.stdout
    assert not server_pids(tmp_path)
    with launched() as browser:
        errors: list[str] = []
        page = new_page(browser, errors)
        assert page.goto((out / "index.html").as_uri()).ok
        page.click("text=selftest.latency_mean_s >> nth=0")
        page.wait_for_selector("svg.series-plot")
        assert page.locator("svg.series-plot circle.point").count() == 4
        assert page.locator("svg.series-plot g.change-point.worse").count() == 1
        page.screenshot(path=str(tmp_path / "series.png"), full_page=True)
        with page.expect_navigation():
            page.locator(f'a.point-link:has(circle[data-revision="{made.commits[2]}"])').click()
        # a matrix's campaign has no report.md: the dot opens its campaign's page, with the command to make one
        assert page.url.endswith(".html") and f"{made.commits[2][:7]}/campaigns/" in page.url
        assert "No report was made" in page.content() and '"status": "complete"' in page.inner_text("pre.campaign")
        assert errors == [], errors
