"""The planted quality change of the local target (``--quality-flip P``, the setting
``local_quality_flip``): a share P of samples is answered differently.

Which samples is decided by a hash of each sample's own key (a Video-AMME video's file name, a
spoken answer's text), never by a random draw per run: both sides of an A/A, and every round of
a side, change the same samples, so a flip is a change between sides and not noise within one.
"""

from __future__ import annotations

import hashlib

from ..toolkit.synthetic import LETTERS

# Words a changed utterance gets in place of one of its own (plain words the recogniser knows).
REPLACEMENTS = ("table", "river", "yellow", "window", "seven")


def _unit(key: str, salt: str) -> float:
    """A number in [0, 1) fixed by ``key`` (sha256: the same on every host and Python)."""
    digest = hashlib.sha256(f"{salt}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def chosen(key: str, share: float) -> bool:
    """True when the sample named ``key`` is among the ``share`` (0 to 1) whose output is changed."""
    return share > 0 and _unit(key, "flip") < share


def other_letter(letter: str, key: str) -> str:
    """An option letter other than ``letter``, fixed by ``key``."""
    others = [x for x in LETTERS if x != letter.upper()] or list(LETTERS)
    return others[int(_unit(key, "letter") * len(others))]


def altered_text(text: str, key: str) -> str:
    """``text`` with words dropped and one replaced, fixed by ``key``: about a third of the words
    go (at least one) and one of those left is swapped for another word."""
    words = text.split()
    if len(words) < 2:
        return REPLACEMENTS[int(_unit(key, "word") * len(REPLACEMENTS))]
    kept = [w for i, w in enumerate(words) if _unit(f"{key}:{i}", "drop") >= 1 / 3]
    if len(kept) == len(words):
        kept.pop(int(_unit(key, "drop-one") * len(kept)))
    if not kept:
        kept = words[:1]
    at = int(_unit(key, "where") * len(kept))
    kept[at] = REPLACEMENTS[int(_unit(key, "word") * len(REPLACEMENTS))]
    return " ".join(kept)
