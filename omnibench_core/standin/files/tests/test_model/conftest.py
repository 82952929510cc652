"""The stage files' server: one ``sgl-omni serve`` per stage module, with the module's SERVER_ARGS."""

from __future__ import annotations

import pytest
from sglang_omni_standin import ci


@pytest.fixture(scope="module")
def omni_server(request):
    """The base URL of a fresh stand-in server, stopped after the module."""
    with ci.server(*getattr(request.module, "SERVER_ARGS", ())) as base:
        yield base
