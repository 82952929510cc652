"""The one exception the local server's request code raises for a request it refuses."""

from __future__ import annotations


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx) and ``detail``."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail
