"""Is a TCP port free, and if not, who holds it: pids for checks, a description for messages."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterable
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


LOCAL_PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low(path: Path = LOCAL_PORT_RANGE) -> int:
    """The first port of the kernel's ephemeral range, where every outgoing connection takes its
    local port (Linux's default 32768 when the file cannot be read): a server port chosen inside
    it can be held by some client's connection when the server binds it."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def listener_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """Socket inodes listening on TCP ``port`` (any address, IPv4 or IPv6), from /proc/net/tcp{,6}."""
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
    return inodes


def socket_holders(inodes: set[str], pids: Iterable[int] | None = None, proc: Path = Path("/proc")) -> dict[str, set[int]]:
    """For each socket inode, the pids holding it open, looking at ``pids`` (default: every process).

    A process whose fds cannot be read (another user's, when not root) is not seen.
    """
    holders: dict[str, set[int]] = {inode: set() for inode in inodes}
    if not inodes:
        return holders
    if pids is None:
        pids = [int(e.name) for e in os.scandir(proc) if e.name.isdigit()]
    for pid in pids:
        try:
            fds = os.scandir(proc / str(pid) / "fd")
            with fds:
                for fd in fds:
                    try:
                        target = os.readlink(fd.path)
                    except OSError:
                        continue
                    if target.startswith("socket:[") and target[8:-1] in holders:
                        holders[target[8:-1]].add(pid)
        except OSError:
            continue
    return holders


def port_listeners(port: int, proc: Path = Path("/proc")) -> list[int]:
    """Pids of the processes holding a socket that listens on ``port``; [] when nobody (visible) does."""
    found: set[int] = set()
    for pids in socket_holders(listener_inodes(port, proc), proc=proc).values():
        found |= pids
    return sorted(found)


def describe_pid(pid: int, proc: Path = Path("/proc")) -> str:
    """``"pid 123 (python3 -m http.server)"`` for messages."""
    try:
        cmd = (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = "gone"
    return f"pid {pid} ({cmd[:120]})"


def port_holder(port: int, proc: Path = Path("/proc")) -> str:
    """Best effort: ``"pid 123 (python3 -m http.server)"`` for a listener on ``port``; "" if unknown."""
    pids = port_listeners(port, proc)
    return describe_pid(pids[0], proc) if pids else ""


def foreign_listeners(port: int, ours: set[int], proc: Path = Path("/proc")) -> dict[str, set[int]]:
    """Listening sockets on ``port`` that none of the pids ``ours`` holds, with who holds them.

    An empty holder set means the holder is not visible from here (another user, another pid
    namespace): not ours either, since ours are visible. ``{}`` when every listener is ours or
    nobody listens.
    """
    inodes = listener_inodes(port, proc)
    if not inodes:
        return {}
    held = socket_holders(inodes, ours, proc)
    others = {inode for inode, pids in held.items() if not pids}
    return socket_holders(others, None, proc) if others else {}
