"""Local Ray clusters for the Ray engine's tests, each in a temporary folder of its own."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def local_cluster(head: dict[str, Any], *nodes: dict[str, Any]) -> Iterator[Any]:
    """A ``ray.cluster_utils.Cluster`` of a head with ``head``'s arguments and a node for each of
    ``nodes`` (they take the head's temporary folder), shut down and its folder removed after.

    Why a folder of its own: the Ray group runs both Ray files on one test worker, so clusters
    follow one another in one process. Under `nox -s coverage` (whose TMPDIR is the session's,
    .nox/coverage/tmp) the second cluster's head took the first's session name and socket paths
    under the shared ray folder, and the driver hung in ray.init(), its raylet never answering
    RegisterClient (py-spy, 2026-12-06; the hang of 059a76a and 8aeb730). A fresh, short folder
    per cluster gives each its own session, and socket paths far from the 107 characters a Unix
    socket may have (106 there)."""
    from ray._common.utils import get_default_ray_temp_dir
    from ray.cluster_utils import Cluster

    # Ray still writes the cluster's address (ray_current_cluster, what address "auto" reads) to
    # its default folder, which a fresh TMPDIR does not have yet
    Path(get_default_ray_temp_dir()).mkdir(parents=True, exist_ok=True)
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={**head, "temp_dir": temp})
        added = [cluster.add_node(**args) for args in nodes]
        if added:
            cluster.wait_for_nodes()
        yield cluster
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
