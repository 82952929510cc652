"""The served model's identity, read from the server itself once it is READY: the ids its
OpenAI-compatible ``GET /v1/models`` lists (sglang-omni serves it, as the local server does:
``{"object": "list", "data": [{"id": ..., "root": ..., ...}]}``, sgl-project/sglang-omni
``sglang_omni/serve/openai_api.py`` ``_register_models`` at 2489a10eecb9).

Part of a run's fingerprint (issue 33): the manifest's revision and dirty state say which code
ran, its environment the packages and GPUs, and this what the server says it serves, so a run
against a server that loaded another model than asked is visible in the manifest.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

from . import http_get

MODELS_PATH = "/v1/models"
# the whole call, redirects and a server that sends a byte at a time included (run/http_get.py): the
# server is READY, so it answers at once, or the answer is not worth a longer wait
TIMEOUT_S = 10.0
MAX_BYTES = 64 * 1024  # a list of model ids; anything longer is not one
MAX_IDS = 16


def read_served(url: str, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """``{"ids": [...]}`` from ``url`` (a server's ``/v1/models``), or ``{"unavailable": why}``
    when it does not answer with a model list within ``timeout_s`` in all (a workload's own test
    server may have none). Never raises: the identity is evidence for the manifest, not a gate."""
    try:
        reply = http_get.get(url, timeout_s, MAX_BYTES)
    except http_get.DeadlineExceeded as exc:
        return {"unavailable": f"no whole answer from {url} within {timeout_s:g} s ({exc})"}
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return {"unavailable": f"{type(exc).__name__} from {url}: {exc}"}
    if reply.status != 200:
        return {"unavailable": f"HTTP {reply.status} from {url}"}
    if reply.truncated:
        return {"unavailable": f"the reply of {url} is over {MAX_BYTES} bytes: not a model list"}
    body = reply.body
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return {"unavailable": f"the reply of {url} is not JSON"}
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return {"unavailable": f"the reply of {url} has no 'data' list"}
    ids = [str(m["id"])[:200] for m in models if isinstance(m, dict) and isinstance(m.get("id"), (str, int))]
    return {"ids": ids[:MAX_IDS]} if ids else {"unavailable": f"the reply of {url} lists no model id"}
