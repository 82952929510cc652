"""The stand-in's video-understanding task helpers: where sglang-omni defines the Video-AMME
request text, ``VIDEOAMME_REQUEST_TEXT``, so omnibench's native client reads it from here as it
does from a real checkout (``plugins/videoamme/prompt.py``)."""

VIDEOAMME_REQUEST_TEXT = (
    "Use the video and the audio question to answer. "
    "Return the final answer as Answer: $LETTER."
)
