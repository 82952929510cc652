"""``sgl-router --port N --worker-urls URL...``: a small round-robin HTTP proxy (CI's router role).

Each request goes to the next worker; ``/health`` is healthy when every worker is.
"""

from __future__ import annotations

import argparse
import itertools

import aiohttp
from aiohttp import web


def build_app(workers: list[str]) -> web.Application:
    """The proxy over ``workers``."""
    turn = itertools.cycle(workers)

    async def health(request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session:
            for url in workers:
                try:
                    async with session.get(f"{url}/health") as reply:
                        if reply.status != 200:
                            return web.json_response({"status": "unhealthy", "worker": url}, status=503)
                except aiohttp.ClientError:
                    return web.json_response({"status": "unhealthy", "worker": url}, status=503)
        return web.json_response({"status": "healthy", "workers": len(workers)})

    async def forward(request: web.Request) -> web.Response:
        url = f"{next(turn)}{request.rel_url}"
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept")}
        async with aiohttp.ClientSession() as session:
            async with session.request(request.method, url, data=await request.read(), headers=headers) as reply:
                return web.Response(status=reply.status, body=await reply.read(),
                                    content_type=reply.content_type)

    app = web.Application(client_max_size=1 << 30)
    app.router.add_get("/health", health)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM."""
    p = argparse.ArgumentParser(prog="sgl-router")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--worker-urls", nargs="+", required=True)
    a = p.parse_args(argv)
    web.run_app(build_app([u.rstrip("/") for u in a.worker_urls]), host=a.host, port=a.port, print=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
