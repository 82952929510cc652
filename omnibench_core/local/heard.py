"""The recogniser's answers kept per audio: the same question audio is transcribed once per server.

The local recogniser is deterministic, so a second transcription of the same samples would give
the same text; the local Video-AMME set of more than ten questions reuses its ten spoken questions
(plugins/videoamme/data.py), so a 200-question run costs ten transcriptions, not 200.
The scoring server (`/v1/audio/transcriptions`) keeps them too: a campaign's runs of a deterministic
synthesizer send it the same answers' audio run after run, and the transcript is the same each time.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

from ..toolkit.speech import Recognizer

KEEP = 256  # transcripts kept, the least recently used dropped first


class HeardCache:
    """``transcribe(samples, rate)`` as the recogniser's, remembered by a hash of the audio."""

    def __init__(self, recognizer: Recognizer, keep: int = KEEP) -> None:
        self.recognizer = recognizer
        self.keep = keep
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[str, threading.Lock] = {}  # one transcription per audio at a time
        self.misses = 0

    def transcribe(self, samples: np.ndarray, rate: int) -> str:
        """The recogniser's transcript of ``samples`` at ``rate``, from the cache when heard before."""
        key = hashlib.sha256(np.ascontiguousarray(samples).tobytes() + str(rate).encode()).hexdigest()
        with self._lock:
            pending = self._pending.setdefault(key, threading.Lock())
        # Requests for the same audio that arrive together (a warm-up sends one question 16 times)
        # wait for the first one's transcript instead of each transcribing it.
        with pending:
            with self._lock:
                if key in self._texts:
                    self._texts.move_to_end(key)
                    return self._texts[key]
            text = self.recognizer.transcribe(samples, rate)
            with self._lock:
                self.misses += 1
                self._texts[key] = text
                self._pending.pop(key, None)
                while len(self._texts) > self.keep:
                    self._texts.popitem(last=False)
        return text
