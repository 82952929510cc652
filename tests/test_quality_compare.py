"""Issue 44's check: `invoke compare` of two campaigns, one measured with the planted quality
change, says what the A/B says (test_quality_ab.py)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from run_helpers import free_port
from run_helpers import invoke_in as invoke

from omnibench_core.local import flip

# The fewest that show it: McNemar's exact test needs 6 discordant pairs one way (p 0.03); at a share
# of 0.6, 8 of the first 12 questions are flipped (p 0.008) and 4 are not (the count of changed answers
# still tells flipped from unflipped). 40 questions at 0.3 (11 flipped) cost 50 CPU-s (issue 40).
CAMPAIGN_SAMPLES = 12
FLIP_SHARE = 0.6


@pytest.mark.slow
def test_compare_of_two_campaigns_one_with_the_flip_says_what_the_ab_says(tmp_path):
    """`invoke measure` twice (the second with local_quality_flip=0.6), then `invoke compare`: accuracy
    `worse` with McNemar's counts and the answers changed; a campaign against itself: 0 changed, no
    quality row better or worse."""
    results = tmp_path / "results"
    opts = ("-w", "videoamme", "--runs", "2", "-o", f"videoamme.max_samples={CAMPAIGN_SAMPLES}", "-o", "videoamme.warmup=1")
    # the two campaigns side by side, as a matrix's slots measure (one port each): the test's wall
    # time is one campaign's, not two (issue 40: it was the suite's longest, 72 s)
    ports = [free_port()]
    while len(ports) < 2:
        ports += [p for p in [free_port()] if p not in ports]

    def measure(name: str, flip_share: str, port: int):
        return invoke(results, "measure", *opts, "--name", name, "-p", str(port),
                      env={"INVOKE_OMNIBENCH_LOCAL_QUALITY_FLIP": flip_share})

    with ThreadPoolExecutor(2) as pool:
        measured = list(pool.map(measure, ("base", "flipped"), ("0", str(FLIP_SHARE)), ports))
    for done in measured:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    n = sum(flip.chosen(f"local_vamme_{i:03d}.mp4", FLIP_SHARE) for i in range(CAMPAIGN_SAMPLES))
    assert 6 <= n < CAMPAIGN_SAMPLES, n  # enough for McNemar, and some questions left unflipped
    done = invoke(results, "compare", "base", "flipped", "--wide")
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert f"videoamme: {n} of {CAMPAIGN_SAMPLES} answers changed between A and B" in out, out
    row = next(line for line in out.splitlines() if line.startswith("videoamme.accuracy") and "McNemar" in line)
    b, c = (int(x) for x in re.findall(r"McNemar: (\d+) right on A only, (\d+) right on B only", row)[0])
    assert "WORSE" in row and b + c <= n and b >= 6 > c, row
    gate = invoke(results, "compare", "base", "flipped", "--fail-on", "worse")
    assert gate.returncode == 1 and "videoamme.accuracy (paired samples): worse" in gate.stdout + gate.stderr
    same = invoke(results, "compare", "base", "base", "--wide")
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-3000:]
    assert f"videoamme: 0 of {CAMPAIGN_SAMPLES} answers changed between A and B" in same.stdout, same.stdout
    quality = [line for line in same.stdout.splitlines() if line.startswith("videoamme.accuracy") and "McNemar" in line]
    assert quality and not any(word in line for line in quality for word in ("WORSE", "BETTER")), quality
