"""Is a TCP port free, and if not, who holds it (for the error message only)."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path


def port_in_use(port: int, host: str = "0.0.0.0") -> bool:
    """True when ``port`` cannot be bound on ``host`` (sglang-omni binds 0.0.0.0 by default)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def port_holder(port: int, proc: Path = Path("/proc")) -> str:
    """Best effort: ``"pid 123 (python3 -m http.server)"`` for a listener on ``port``; "" if unknown."""
    inodes: set[str] = set()
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            # local_address is HEX_IP:HEX_PORT; state 0A is LISTEN
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    if not inodes:
        return ""
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    cmd = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                    return f"pid {pid_dir.name} ({cmd[:120]})"
        except OSError:
            continue
    return ""
