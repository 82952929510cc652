"""How the command line says an error: one prefix, ``error: ``, for every refusal and failure a
task prints (a flag refused, a typed omnibench error, an interrupt) and for Invoke's own parse
errors ("No idea what 'X' is!"), so a user and a script look for one word."""

from __future__ import annotations

ERROR_PREFIX = "error: "


def error_text(message: str) -> str:
    """``message`` as the command line prints an error: with :data:`ERROR_PREFIX`, once."""
    return message if message.startswith(ERROR_PREFIX) else f"{ERROR_PREFIX}{message}"
