"""A stand-in sglang-omni checkout: a git repository shaped like one, whose programs are real and
run on CPU through omnibench's local server, clients and scorers (``invoke standin``).

- :mod:`.repo` makes the repository (files, commits with a settings file each, the venv);
- :mod:`.venv` makes its ``omni`` venv (also run by its ``prepare_omni_venv.sh``);
- :mod:`.stages` writes its ten CI stage files; ``files/`` holds every other file it gets;
- :mod:`.gpu` writes a fake ``nvidia-smi`` whose memory is in use while a stand-in server lives.
"""

from __future__ import annotations

from .gpu import write_fake_nvidia_smi
from .repo import Standin, StandinSpec, history_text, make_standin

__all__ = ["Standin", "StandinSpec", "history_text", "make_standin", "write_fake_nvidia_smi"]
