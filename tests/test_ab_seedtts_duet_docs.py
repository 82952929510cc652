"""The duet seed-tts A/B command of README.md and docs/ab.md, run as written (issue 46): WORSE on
balanced slots. Its own file, so it runs on another worker than the interleaved command's story
(tests/test_ab_seedtts_docs.py, whose helpers it uses): each is one of the suite's longer tests."""

from __future__ import annotations

import pytest
from test_ab_seedtts_docs import DUET, _record, run_called_worse


@pytest.mark.slow
def test_the_duet_command_of_the_readme_and_ab_md_calls_it_worse_on_balanced_slots(tmp_path):
    results = tmp_path / "results"
    seq = run_called_worse(results, DUET, "duet")
    rec = _record(results)
    measured = [a for a in rec["attempts"] if a["status"] == "complete" and a["round"] > 0]
    assert len(measured) == 2 * seq["rounds_run"] and not any(a["alone"] for a in measured)
    on_slot_0 = [a["where"] for a in measured if a["side"] == "A"]
    assert len(set(on_slot_0)) == 2 and on_slot_0.count(on_slot_0[0]) == len(on_slot_0) // 2  # A on each slot alike
