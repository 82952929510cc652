"""Synthetic test media: the public interface shared by the local data sets and the local server.

The local Video-AMME set shows coloured videos and asks, aloud, for the main colour among four
options; the local server names a video's colour from the same palette and picks the option it
heard. The local seed-tts set needs reference voices at several pitches. Both sides import what
they share from here, so neither copies the other's strings or reaches into the other's internals.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# The colours the local videos are painted in and the local server can name (RGB).
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 170, 70), "blue": (40, 80, 220), "yellow": (230, 200, 40),
    "purple": (140, 60, 180), "orange": (240, 140, 30)}
# Option letters of a multiple-choice question, in order.
LETTERS = "ABCD"
# How the local server answers a video question; results name it so nobody mistakes it for a model.
LOCAL_VIDEO_ANSWER_METHOD = ("local substitute: mean frame colour + the colour options heard in the spoken "
                             "question (not a video model)")
SPEECH_RATE = 24000  # sample rate of :class:`Speaker` output


def write_color_video(path: str | Path, rgb: tuple[int, int, int], *, fps: int = 8, seconds: int = 3,
                      width: int = 160, height: int = 120) -> None:
    """Write an H.264 MP4: a field of colour ``rgb`` with a white square crossing it.

    The moving square keeps the encoder honest (not one repeated frame) without changing the
    field's mean colour much.
    """
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("h264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(fps * seconds):
            img = np.empty((height, width, 3), np.uint8)
            img[:] = rgb
            x = 5 + i * (width - 40) // (fps * seconds)
            img[45:75, x:x + 30] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


class Speaker:
    """English speech from the local CPU voice (hibari-tts), at a chosen pitch; float32 at SPEECH_RATE.

    Loading the voice takes a moment; make one and reuse it.
    """

    def __init__(self) -> None:
        from .speech import Synthesizer  # the CPU speech stack, kept internal behind this class

        self._synth = Synthesizer(workers=1)

    def say(self, text: str, *, pitch: float = 1.0, seed: int | None = None) -> np.ndarray:
        """Speech for ``text`` with its pitch moved by ``pitch`` (about 0.8..1.25), at the natural rate.

        The same ``seed`` gives the same samples; ``pitch`` 1.0 is the plain voice.
        """
        return self._synth.speak_like(text, pitch, seed=seed)
