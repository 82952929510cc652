"""Answer letters read from a reply as sglang-omni reads them (``parse_multi_choice_response``).

The rules, in upstream's order (``benchmarks/tasks/visual_understand.py`` and the seed in
``build_videomme_result_records``, ``benchmarks/tasks/video_understanding.py``, both
stevejake007/sglang-omni at 8a6fc24123ced2516b6d0acd9278f4771ab0e6b6):

1. the last ``Answer: X`` (``**``, ``(X)`` allowed) whose letter is a choice;
2. else, after trimming ``, . ! ? ; : '`` from the ends: choices written ``(X)``; if none,
   choices standing alone (`` X ``); if none and the reply has more than five words, choices
   whose option text appears in it (case-insensitive);
3. one candidate: it; several: the one written last;
4. none: a random choice, from one generator seeded 42 per results file and drawn in sample
   order over the successful replies only. Such a guess is an ``is_mc_fallback``, counted in
   the summary's ``mc_fallback``: it can be right by chance, so accuracy carries it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence

FALLBACK_SEED = 42  # upstream's random.seed(42) before the records are built
_ANSWER_TAG = re.compile(r"[Aa]nswer\s*:\s*\*?\*?\s*\(?([A-Z])\)?")
_TRIM = (",", ".", "!", "?", ";", ":", "'")


def choices_of(options: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``all_choices`` (A, B, ...) and ``index2ans`` (letter -> option text) for the options."""
    letters = [chr(ord("A") + i) for i in range(len(options))]
    return letters, dict(zip(letters, options, strict=True))


def fallback_rng() -> random.Random:
    """The guess generator for one results file (the same draws as upstream's seeded module RNG)."""
    return random.Random(FALLBACK_SEED)


def parse_multi_choice_response(response: str, all_choices: Sequence[str], index2ans: Mapping[str, str],
                                rng: random.Random) -> tuple[str, bool]:
    """``(letter, is_fallback)``: the reply's answer, or a seeded guess when none can be read."""
    tagged = _ANSWER_TAG.findall(response)
    if tagged and tagged[-1] in all_choices:
        return tagged[-1], False
    for char in _TRIM:
        response = response.strip(char)
    padded = f" {response} "
    found = [c for c in all_choices if f"({c})" in padded]
    if not found:
        found = [c for c in all_choices if f" {c} " in padded]
    if not found and len(padded.split()) > 5:
        lowered = padded.lower()
        found = [c for c, text in index2ans.items() if text and text.lower() in lowered]
    if not found:
        return rng.choice(list(all_choices)), True
    if len(found) == 1:
        return found[0], False

    def last_at(choice: str) -> int:
        at = padded.rfind(f"({choice})")
        if at == -1:
            at = padded.rfind(f" {choice} ")
        if at == -1 and index2ans.get(choice):
            at = padded.lower().rfind(index2ans[choice].lower())
        return at

    positions = [last_at(c) for c in found]
    return found[positions.index(max(positions))], False
