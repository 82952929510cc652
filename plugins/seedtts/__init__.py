"""The seed-tts voice-clone workload: the runbook's seed-tts half, on any target.

On a target that brings its own clients and scorers (``sglang-omni``) it runs the runbook's exact
commands (sglang-omni's client in its four modes, Qwen3-ASR for WER). On any other target it makes
a small English set on first use and runs omnibench's native client, the ``asr-wer`` scorer and
omnibench's SIM and UTMOS substitutes, named in their result files. ``--opt
seedtts.client=native`` runs the native client against sglang-omni too.

Its hooks are in :mod:`.hooks`, the module its entry point names.
"""
