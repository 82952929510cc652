"""What the model said, sample by sample, compared across two sides (issue 44).

- :mod:`.outputs`  each run's per-sample outputs (Video-AMME answers, seed-tts transcripts, WER, SIM)
- :mod:`.paired`   the samples both sides answered, matched by id; outputs changed between and
  within sides; the quality verdicts from the paired samples (``stats.paired_quality``)
"""
