"""Local-folder routes on a cluster: one absolute root for relative folders, and input folders that exist. No Ray.

A relative folder used to resolve against the working directory of whichever node hosted the runner (where
``ray start`` ran there): photos dropped where the README says produced nothing, with no warning, and after a
failover the runner would have read another machine's disk. So relative folders resolve under
``PORTRAIT_BUCKETS_ROOT``, which must be absolute, and must be set when the cluster has more than one node; and a
route whose input folder does not exist on the runner's node refuses to start instead of watching nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from deployments.common.errors import InvalidParameter
from serve_app.runner.routing import BucketRoute, Route, RoutingTable


def is_relative_folder(uri: str) -> bool:
    """Whether a route location is a local folder given relative to the buckets root."""
    return "://" not in uri and not uri.startswith("file:") and not os.path.isabs(os.path.expanduser(uri))


def buckets_root(routes: Sequence[BucketRoute], root: Path | None, *, nodes: int) -> Path | None:
    """The folder relative routes resolve under (``None``: the working directory, allowed on one node only)."""
    if root is not None and not root.is_absolute():
        raise InvalidParameter(f"PORTRAIT_BUCKETS_ROOT must be an absolute path, got {str(root)!r}")
    relative = sorted(
        {route.name for route in routes if is_relative_folder(route.input) or is_relative_folder(route.output)}
    )
    if relative and root is None and nodes > 1:
        raise InvalidParameter(
            f"routes {relative} use relative folders, but PORTRAIT_BUCKETS_ROOT is not set on a cluster of {nodes} "
            "nodes: each node would resolve them against its own working directory, and a runner that moves to "
            "another node would read another disk. Set PORTRAIT_BUCKETS_ROOT (runtime_env.env_vars) to an absolute "
            "folder on storage every node mounts, or use s3:// routes.",
            details={"routes": relative, "nodes": nodes},
        )
    return root


def require_input_folders(table: RoutingTable, *, node: str) -> None:
    """Refuse routes whose input folder is absent here: the poller would list nothing, silently, forever."""
    missing = [f"{route.name}: {route.input}" for route in table.routes if input_folder_missing(route)]
    if missing:
        raise InvalidParameter(
            f"input folders do not exist on node {node}: {missing}. Create them (on a cluster: on storage every "
            "node mounts, under PORTRAIT_BUCKETS_ROOT), or fix the route's input.",
            details={"missing": missing, "node": node},
        )


def input_folder_missing(route: Route) -> bool:
    """A local input folder absent on this node (listing it would quietly find nothing)."""
    return route.input.scheme == "file" and not Path(route.input.bucket).is_dir()
