"""The ten MiniCPM-o stages of sglang-omni's model CI (``nox -s ci_stages``).

Stage 11 runs only for Qwen3-Omni and is left out, as in the runbook. A third-party plugin adds
a stage by returning a new ``CiStage``, or swaps one out with ``replaces=True``.

Its hooks are in :mod:`.hooks`, the module its entry point names.
"""
