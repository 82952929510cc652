"""Loopback ports for the benchmarks' servers.

Below the kernel's ephemeral range: a port the kernel picks (``bind(0)``) is one from that range,
where every client connection of any program beside takes its local port, so it and the next one (a
duet's second slot) could be held by a connection when the servers bind them; the test suite, which
runs the benchmarks' smoke beside its other tests, saw a duet refused so ("slot 1 ... port 43904 in
use", 2026-12-07). A random start, so that two benchmarks at once rarely walk the same ports.
"""

from __future__ import annotations

import random
import socket

from omnibench_core.process.ports import ephemeral_low, port_in_use

LOWEST = 20000  # above Ray's worker ports, as the test suite's servers


def free_port(span: int = 1) -> int:
    """A port that ``span`` consecutive servers can take (it, it + 1, ...), all free now, below the
    ephemeral range; the kernel's pick when the host leaves no room there."""
    top = ephemeral_low() - span
    if top > LOWEST:
        start = random.randrange(LOWEST, top)
        for i in range(top - LOWEST):
            port = LOWEST + (start - LOWEST + i) % (top - LOWEST)
            if not any(port_in_use(p) for p in range(port, port + span)):
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
