"""The Video-AMME Talker workload: video and a spoken question in, text and speech out.

On a target that brings its own clients (``sglang-omni``) it runs the runbook's exact client and
text-audio consistency WER in the checkout's python (``--opt videoamme.client=native``: omnibench's
native client on the set the checkout's own loader stages, sending the checkout's request text);
elsewhere a small local set, omnibench's native client and the ``asr-wer`` scorer.

Its hooks are in :mod:`.hooks`, the module its entry point names.
"""
