"""Scoring computations shared by workloads: WER, speed summaries, voice similarity, quality."""
