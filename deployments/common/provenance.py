"""The record beside each file ``portrait models pull`` wrote (``<file>.source.json``); two writers of one file are
kept apart by ``storage.locks.file_lock``.

The record says where the bytes came from, when, and their sha256. For a file the manifest does not pin it is the
trust-on-first-use anchor: the store refuses a later file, or a later download, whose hash differs. For a file
converted from pinned inputs (a derived built-in) it also names each input's sha256, so a conversion made from other
inputs than the manifest pins is never taken for the right one.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from deployments.common.errors import ModelUnavailable

PARTIAL_SUFFIX = ".partial"
PROVENANCE_SUFFIX = ".source.json"

Via = Literal["url", "mirror", "wheel", "converted"]


@dataclass(frozen=True)
class Provenance:
    """Which source, when (UTC), the bytes it gave, and for a converted file the sha256 of each input by file."""

    model: str
    via: Via
    source: str
    fetched_at: str
    sha256: str
    size_bytes: int
    inputs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def provenance_path(path: Path) -> Path:
    return path.with_name(path.name + PROVENANCE_SUFFIX)


def read_provenance(path: Path) -> Provenance | None:
    """The record of the file at ``path``; ``None`` when it was not fetched by ``portrait models pull``."""
    record = provenance_path(path)
    if not record.is_file():
        return None
    try:
        return Provenance(**json.loads(record.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise ModelUnavailable(f"unreadable download record {record}: {exc}") from exc


def write_provenance(path: Path, record: Provenance) -> None:
    """Write the record atomically (a reader sees the old record or the new one)."""
    target = provenance_path(path)
    with tempfile.NamedTemporaryFile("w", dir=target.parent, prefix=target.name, suffix=".tmp", delete=False) as tmp:
        tmp.write(json.dumps(record.to_json(), indent=2) + "\n")
    os.chmod(tmp.name, 0o644)  # as readable as the file it describes (a temporary file starts at 0600)
    Path(tmp.name).replace(target)
