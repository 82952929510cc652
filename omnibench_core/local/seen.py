"""Video summaries kept per file content and sampling: the same video is decoded once per server.

A local Video-AMME set of more than ten questions reuses its ten videos under other file names
(hard links, plugins/videoamme/data.py), and every run sends each question again: the summary
(vision.py) is a function of the file's bytes and the request's sampling fields alone, so it is
kept by a hash of the bytes (not the path, which a hard link or a rewritten file would fool).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from .vision import Sampling, VideoSummary, summarize_video

KEEP = 256  # summaries kept, the least recently used dropped first


class SeenVideos:
    """``summarize(data, sampling, name)`` as vision.py's, remembered by the bytes' hash and the sampling."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._summaries: OrderedDict[tuple[str, Sampling], VideoSummary] = OrderedDict()
        self._lock = threading.Lock()
        self.decoded = 0  # videos decoded by this process

    def summarize(self, data: bytes, sampling: Sampling, name: str = "video") -> VideoSummary:
        """The video's summary; a video that cannot be decoded raises VideoError each time (not kept)."""
        key = (hashlib.sha256(data).hexdigest(), sampling)
        with self._lock:
            if key in self._summaries:
                self._summaries.move_to_end(key)
                return self._summaries[key]
        summary = summarize_video(data, sampling, name)  # two requests at once may both decode: same answer
        with self._lock:
            self.decoded += 1
            self._summaries[key] = summary
            while len(self._summaries) > self.keep:
                self._summaries.popitem(last=False)
        return summary
