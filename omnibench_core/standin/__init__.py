"""A stand-in sglang-omni checkout: a git repository shaped like one, whose programs are real and
run on CPU through omnibench's local server, clients and scorers (``invoke standin``).

- :mod:`.repo` makes the repository (files, commits with a settings file each, the venv);
- :mod:`.venv` makes its ``omni`` venv (also run by its ``prepare_omni_venv.sh``);
- :mod:`.stages` writes its ten CI stage files; ``files/`` holds every other file it gets;
- :mod:`.gpu` writes a fake ``nvidia-smi`` (:mod:`.nvidia_smi`) whose GPUs are in use while a
  stand-in server lives on them (``invoke standin --fake-gpus DIR``).
"""

from __future__ import annotations

from .gpu import DEFAULT_GPUS, write_fake_nvidia_smi
from .repo import Standin, StandinSpec, history_text, make_standin, try_it

__all__ = ["DEFAULT_GPUS", "Standin", "StandinSpec", "history_text", "make_standin", "try_it", "write_fake_nvidia_smi"]
