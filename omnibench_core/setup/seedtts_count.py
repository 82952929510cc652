"""Print how many samples a seed-tts split has, with the checkout's own loader (offline).

Run by the sglang-omni checkout's python from the checkout root, as the runbook's check does.
"""

import os
import sys

sys.path.insert(0, os.getcwd())
from benchmarks.dataset.seedtts import load_seedtts_samples  # noqa: E402

print(len(load_seedtts_samples(sys.argv[1], None, split=sys.argv[2])))
