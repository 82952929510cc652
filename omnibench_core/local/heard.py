"""The recogniser's answers kept per audio: the same audio is transcribed once per server, and with
a folder, once per host.

The local recogniser is deterministic, so a second transcription of the same samples would give
the same text; the local Video-AMME set of more than ten questions reuses its ten spoken questions
(plugins/videoamme/data.py), so a 200-question run costs ten transcriptions, not 200.

Transcripts are also kept in a folder (the server's ``--heard-dir``, by default
``<omnibench cache>/heard``): every run of a campaign or an A/B starts a server anew. Each one
transcribed the same ten questions again (about 1.5 CPU-s each: most of a local Video-AMME run's
work), and each scoring server (`/v1/audio/transcriptions`) the answers of a deterministic
synthesizer that the runs and campaigns before it had sent too (3.6 of a 12-question Video-AMME
run's 6.9 CPU-s, 2026-12-06). The folder is keyed by the recogniser's identity (pocketsphinx's
version and the source of the code that turns audio into text) and the audio's hash, so a changed
recogniser never reads an old transcript, and a kept one is the text the recogniser gives.

Servers beside each other on one folder (a matrix's slots, two campaigns measured at once) hear the
same questions at the same moment: each audio's transcription is claimed with a ``flock`` on a file
beside its transcript, so the second server waits for the first one's text instead of transcribing it
too. The claim is an economy, never a wait without end: a claim held longer than ``CLAIM_WAIT_S`` (a
hung server) is passed by, and a folder without room for the lock file is heard without one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np

from ..jsonio import NotReadable, read_bounded
from ..run.ownership import take_flock
from ..toolkit import audio, speech
from ..toolkit.speech import Recognizer

KEEP = 256  # transcripts kept, the least recently used dropped first
MAX_TRANSCRIPT_BYTES = 64 * 1024  # a kept transcript larger than this is not one of ours
FOLDER = "heard"  # the kept transcripts' folder in the omnibench cache (the server's --heard-dir default)
CLAIM_WAIT_S = 120.0  # a server waits this long for another's transcription of the same audio (one takes ~2 s)


@cache
def recogniser_identity() -> str:
    """What a kept transcript depends on besides the audio: pocketsphinx's version and the source of
    the modules that turn samples into its text (speech.py, audio.py's resampling)."""
    digest = hashlib.sha256(importlib.metadata.version("pocketsphinx").encode())
    for module in (speech, audio):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


class HeardCache:
    """``transcribe(samples, rate)`` as the recogniser's, remembered by a hash of the audio; with a
    ``folder``, also in files there (under the recogniser's identity), for the server processes after."""

    def __init__(self, recognizer: Recognizer, keep: int = KEEP, folder: Path | None = None,
                 identity: str | None = None) -> None:
        self.recognizer = recognizer
        self.keep = keep
        self.folder = folder / (identity or recogniser_identity()) if folder is not None else None
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[str, threading.Lock] = {}  # one transcription per audio at a time
        self.misses = 0  # transcribed by this process
        self.recalled = 0  # read from the folder
        self.waited = 0  # claimed by another server when first asked for: its transcript was waited for

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
            text = self._recall(key)
            heard_here = False
            if text is None:
                with self._claim(key):  # another server may be hearing it now: its text, once written
                    text = self._recall(key)
                    if text is None:
                        text, heard_here = self.recognizer.transcribe(samples, rate), True
                        self._keep(key, text)
            with self._lock:
                if heard_here:
                    self.misses += 1
                else:
                    self.recalled += 1
                self._texts[key] = text
                self._pending.pop(key, None)
                while len(self._texts) > self.keep:
                    self._texts.popitem(last=False)
        return text

    @contextlib.contextmanager
    def _claim(self, key: str) -> Iterator[None]:
        """Hold ``.<key>.lock`` in the folder while hearing ``key``'s audio, so a server beside this
        one waits for the transcript rather than transcribing it too (no folder: nothing to share)."""
        if self.folder is None:
            yield
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / f".{key}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError:  # a read-only cache, or the name taken (a link, a folder): heard without a claim
            yield
            return
        try:
            take_flock(fd, fcntl.LOCK_EX, CLAIM_WAIT_S, self._waiting)  # held too long: heard anyway (an economy)
            yield
        finally:
            os.close(fd)  # closing drops the lock

    def _waiting(self) -> None:
        with self._lock:
            self.waited += 1

    def _recall(self, key: str) -> str | None:
        if self.folder is None:
            return None
        try:
            # a transcript is a line of words: anything but a small regular file (a planted FIFO would
            # block the open, a huge file the read) is not one of ours, so it is heard anew
            return read_bounded(self.folder / f"{key}.txt", MAX_TRANSCRIPT_BYTES).decode("utf-8")
        except (OSError, NotReadable, UnicodeDecodeError):  # not there yet, or not ours: heard anew
            return None

    def _keep(self, key: str, text: str) -> None:
        """Written aside and renamed into place: servers running beside read a whole file or none."""
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            aside = self.folder / f".{key}.{os.getpid()}.{threading.get_ident()}"
            aside.write_text(text, encoding="utf-8")
            os.replace(aside, self.folder / f"{key}.txt")
        except OSError:  # a read-only cache: this server keeps it in memory only
            pass
