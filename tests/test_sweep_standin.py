"""docs/sweep.md's sweep with sglang-omni's own client on the stand-in `invoke standin` makes: a
campaign whose runs sweep the levels on one server, its history, and `invoke sweep --upstream`.
Its own file (issue 40): test_sweep.py's docs sweeps were one long unit on one worker beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from run_helpers import REPO, free_port
from scale_helpers import invoke_standin, path_without_nvidia_smi

# -- sglang-omni's own sweep, on the stand-in ------------------------------------------------------------
# docs/sweep.md: the campaign whose every run sweeps the levels on one server with sglang-omni's client
UPSTREAM_COMMAND = ("invoke measure --target sglang-omni --checkout /sglang-omni --workload seedtts --runs 2 "
                    "--opt seedtts.client=sglang --opt seedtts.concurrencies=1,2 --opt seedtts.max_samples=2")
UPSTREAM_HISTORY = "invoke history --target sglang-omni --checkout /sglang-omni --metric seedtts@c2.throughput_qps"
UPSTREAM_SWEEP = ("invoke sweep --target sglang-omni --checkout /sglang-omni --workload seedtts --concurrency 1,2 "
                  "--runs 2 --upstream --opt seedtts.client=sglang --opt seedtts.max_samples=2")


@pytest.mark.slow
def test_sglang_omnis_own_sweep_on_the_standin_gives_a_metric_per_level(tmp_path):
    page = (REPO / "docs" / "sweep.md").read_text()
    assert UPSTREAM_COMMAND in page and UPSTREAM_HISTORY in page and UPSTREAM_SWEEP in page
    made = invoke_standin(tmp_path / "sglang-omni", "--fake-gpus", str(tmp_path / "fakegpu"))
    assert made.fake_gpus is not None
    results = tmp_path / "results"
    env = {"PATH": path_without_nvidia_smi(made.fake_gpus)}

    def run(command: str) -> subprocess.CompletedProcess:
        words = command.replace("/sglang-omni", str(made.root)).split()[1:]
        return subprocess.run([sys.executable, "-m", "invoke", *words], cwd=REPO, capture_output=True, text=True,
                              timeout=1200, env={**os.environ, **env, "INVOKE_OMNIBENCH_RESULTS": str(results),
                                                 "INVOKE_OMNIBENCH_PORT": str(free_port())})

    done = run(UPSTREAM_COMMAND)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run1,) = results.glob("*/run1")
    steps = {s["step"]: s for s in json.loads((run1 / "manifest.json").read_text())["steps"]}
    command = steps["seedtts.generate"]["command"]
    assert command[command.index("--concurrencies") + 1] == "1,2" and command[command.index("--repeats") + 1] == "1"
    assert "seedtts.transcribe" not in steps  # upstream's sweep generates only
    assert sorted(p.name for p in (run1 / "seedtts").iterdir() if p.name.startswith("c")) == ["c1_r1", "c2_r1"]
    metrics = json.loads((run1 / "metrics.json").read_text())["metrics"]
    for level in (1, 2):
        assert metrics[f"seedtts@c{level}.throughput_qps"] > 0 and metrics[f"seedtts@c{level}.failed"] == 0
        assert metrics[f"seedtts@c{level}.latency_mean_s"] <= metrics[f"seedtts@c{level}.latency_p95_s"]
    assert "seedtts.wer.wer_corpus" not in metrics

    done = run(UPSTREAM_HISTORY + f" --json {tmp_path / 'h.json'}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (series,) = json.loads((tmp_path / "h.json").read_text())["series"]
    assert series["metric"] == "seedtts@c2.throughput_qps" and len(series["points"][0]["values"]) == 2

    # invoke sweep --upstream: one campaign, its runs sweeping both levels; a point per level
    done = run(UPSTREAM_SWEEP)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (folder,) = results.glob("*/sweeps/sweep-seedtts-*/c1_c2")
    record = json.loads((folder / "sweep.json").read_text())
    assert record["upstream"] is True and [p["label"] for p in record["points"]] == ["c1", "c2"]
    (campaign,) = {p["campaign"] for p in record["points"]}
    assert campaign.endswith(".upstream-c1_c2")
    for p in record["points"]:
        assert p["runs"] == 2 and p["throughput_qps"] > 0 and p["failed"] == 0
        assert 0 < p["latency_mean_s"] <= p["latency_p95_s"]
    assert (folder / "sweep.png").is_file() and "knee: " in done.stdout
    assert "sglang-omni's own sweep" in done.stdout and "sglang-omni's own sweep" in (folder / "sweep.md").read_text()

    refused = run("invoke run --workload seedtts --opt seedtts.concurrencies=1,2")
    assert refused.returncode == 1 and "seedtts.concurrencies is sglang-omni's own sweep" in refused.stderr
    assert "invoke sweep" in refused.stderr and "Traceback" not in refused.stderr
