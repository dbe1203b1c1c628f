"""The model store: a manifest of every model and verified, offline resolution of its weights.

Weights are never fetched from the internet while serving. ``configs/models.yaml`` names each model's file, sha256,
size, official URL and licence; the files live under a store root (a local folder, or ``s3://bucket/prefix`` mirrored
into a local cache). ``portrait models pull`` (``deployments.common.download``) is the only code that downloads.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.provenance import (
    PARTIAL_SUFFIX,
    PROVENANCE_SUFFIX,
    provenance_path,
    read_provenance,
)
from storage.locks import file_lock

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 20
MAX_MODEL_BYTES = 4 << 30  # the read cap for a file whose manifest entry states no size
MAX_FOLDER_FILE_BYTES = 16 << 30  # the same for a file of a folder entry (an SDXL UNet alone is 5.1 GB in fp16)


@dataclass(frozen=True)
class WheelSource:
    """A file inside a package on the package registry (how the built-in models travel): its wheel, or its source
    archive (``sdist``) where the package publishes no wheel (``face_recognition_models``: dlib's models)."""

    requirement: str
    member: str
    sdist: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """One manifest entry. ``sha256`` is ``None`` where the publisher states no hash: the file is then unpinned.

    ``commercial_use`` says the licence allows any use: such models are the ones ``portrait models pull --default``
    (and ``make run``) fetch, except an ``alternate`` (other weights for a job that has its default: fetched only when
    named, so ``make run`` does not download every variant); the others are fetched only when named, after their
    licence is shown. ``label`` says what the weights are where the name alone would mislead (a converted built-in);
    ``derived`` is set for a file made by converting pinned inputs rather than downloaded. ``deployment`` names the
    Serve deployment of a model that has its own (each face restorer). ``repo`` names a whole Hugging Face repository
    that its engine fetches itself (vLLM, for the LLM deployment): ``file`` is then the folder a copy may be put in,
    present when it holds the repository's ``config.json``; never in ``--default``, never fetched by ``pull``.
    ``parts`` makes the entry a folder (``file``) of several files, each its own spec (``<name>:<path>``, file
    ``<folder>/<path>``, url ``<url>/<path>``, its own sha256 and size): a diffusers repository in its official
    layout, pulled file by file and usable when every part is. ``group`` names a set of entries fetched together by
    ``portrait models pull --group NAME`` (``generative``: gigabytes each), never by ``--default`` or ``--all``.
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
    alternate: bool = False
    args: Mapping[str, Any] = field(default_factory=dict)
    wheel: WheelSource | None = None
    description: str = ""
    label: str | None = None
    derived: Derivation | None = None
    deployment: str | None = None
    repo: str | None = None
    parts: tuple[ModelSpec, ...] = ()
    group: str | None = None
    in_folder: bool = False  # a file of a folder entry (one of its ``parts``)

    @property
    def is_folder(self) -> bool:
        return bool(self.parts)


@dataclass(frozen=True)
class Derivation:
    """A file the store makes itself: ``converter`` (a name ``deployments.common.download`` knows) applied to
    ``inputs``, each pinned by sha256 and size and fetched like any model file (wheel, or the mirror)."""

    converter: str
    inputs: tuple[ModelSpec, ...]

    @property
    def pins(self) -> dict[str, str | None]:
        """Each input's file and the sha256 the manifest pins for it (what a conversion's record must name)."""
        return {spec.file: spec.sha256 for spec in self.inputs}


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
            "label": self.spec.label,
            "license": self.spec.license,
            "builtin": self.spec.builtin,
            "commercial_use": self.spec.commercial_use,
            "fix": self.fix,
        }


def fix_command(names: Iterable[str]) -> str:
    """The one command that fetches (or fetches again, over a corrupted file) every named model."""
    return "portrait models pull " + " ".join(sorted(set(names)))


def default_models(manifest: Mapping[str, ModelSpec]) -> list[str]:
    """What ``portrait models pull --default`` fetches: every model whose licence allows any use, alternates, whole
    repositories (the LLM's, fetched by vLLM) and grouped entries (the generative models: ``--group``) aside."""
    return sorted(
        name
        for name, spec in manifest.items()
        if spec.commercial_use and not spec.alternate and spec.repo is None and spec.group is None
    )


def group_models(manifest: Mapping[str, ModelSpec], group: str) -> list[str]:
    """What ``portrait models pull --group GROUP`` fetches: every entry of that group, in manifest order."""
    return [name for name, spec in manifest.items() if spec.group == group]


def load_manifest(path: str | Path) -> dict[str, ModelSpec]:
    """Read ``configs/models.yaml`` into specs keyed by model name."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    specs: dict[str, ModelSpec] = {}
    for name, entry in (raw.get("models") or {}).items():
        try:
            spec = _spec(name, entry)
            derive = entry.get("derive")
            if derive:
                inputs = tuple(
                    _spec(f"{name}:{Path(item['file']).name}", {**entry, **item, "description": ""})
                    for item in derive["inputs"]
                )
                spec = dataclasses.replace(spec, derived=Derivation(derive["convert"], inputs))
            if entry.get("files"):
                spec = dataclasses.replace(spec, parts=tuple(_part(spec, item) for item in entry["files"]))
        except KeyError as exc:
            raise InvalidParameter(f"model {name!r} in {path} lacks the field {exc.args[0]!r}") from exc
        specs[name] = spec
    return specs


def _spec(name: str, entry: Mapping[str, Any]) -> ModelSpec:
    wheel = entry.get("wheel")
    return ModelSpec(
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
        alternate=bool(entry.get("alternate", False)),
        args=dict(entry.get("args") or {}),
        wheel=WheelSource(**wheel) if wheel else None,
        description=entry.get("description", ""),
        label=entry.get("label"),
        deployment=entry.get("deployment"),
        repo=entry.get("repo"),
        group=entry.get("group"),
    )


def _part(folder: ModelSpec, item: Mapping[str, Any]) -> ModelSpec:
    """One file of a folder entry: ``{path, sha256, size_bytes}`` under the folder, from ``<url>/<path>``."""
    path = str(item["path"])
    if path.startswith("/") or ".." in Path(path).parts:
        raise InvalidParameter(f"model {folder.name!r}: file {path!r} must be a relative path inside its folder")
    return dataclasses.replace(
        folder,
        name=f"{folder.name}:{path}",
        file=f"{folder.file}/{path}",
        url=f"{folder.url.rstrip('/')}/{path}",
        sha256=item.get("sha256"),
        size_bytes=item.get("size_bytes"),
        description="",
        group=None,
        in_folder=True,
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


class ModelStore:
    """Resolves manifest entries to verified local files under ``root``.

    A file is verified against the manifest's sha256, or, where the manifest pins none, against the hash its first
    download recorded (trust on first use); a converted built-in is verified against the hash recorded when it was
    made from the manifest's pinned inputs. An ``s3://bucket/prefix`` root is mirrored file by file (with its record)
    into a private per-user cache on first use, and again whenever the cached copy no longer verifies. Hashes are
    computed once per file and remembered by (size, mtime), so health checks stay cheap.
    """

    def __init__(self, root: str | Path, manifest: Mapping[str, ModelSpec], *, cache_dir: str | Path | None = None):
        self.root = str(root)
        self.manifest = dict(manifest)
        self._remote = self.root.startswith("s3://")
        if self._remote:
            self.local_root = Path(cache_dir) if cache_dir is not None else private_cache_dir(self.root)
        else:
            self.local_root = Path(self.root)
        self._hash_cache: dict[tuple[str, int, float], str] = {}

    def spec(self, name: str) -> ModelSpec:
        try:
            return self.manifest[name]
        except KeyError:
            raise ModelUnavailable(f"unknown model {name!r}; known: {', '.join(sorted(self.manifest))}") from None

    def path_of(self, spec: ModelSpec) -> Path:
        return self.local_root / spec.file

    def local_path(self, name: str) -> Path:
        return self.path_of(self.spec(name))

    def status(self, name: str) -> ModelStatus:
        return self.check(self.spec(name))

    def check(self, spec: ModelSpec) -> ModelStatus:
        """The state of ``spec``'s file (a manifest entry, or an input of a derived one); of a folder entry, the
        worst of its files' states (missing first, then a mismatch), present only when every file is pinned."""
        if spec.is_folder:
            return folder_status(spec, [self.check(part) for part in spec.parts], self.path_of(spec))
        path = self.path_of(spec)
        status = self._verify(spec, path)
        if self._remote and not status.usable:
            self._mirror(spec, path)  # absent, or a cached copy that no longer verifies: copy it from the bucket
            status = self._verify(spec, path)
        return status

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

    def _verify(self, spec: ModelSpec, path: Path) -> ModelStatus:
        if spec.repo is not None:  # a repository's copy: its files are its engine's to check
            state = ModelState.UNPINNED if (path / "config.json").is_file() else ModelState.MISSING
            return ModelStatus(spec, state, path)
        if not path.is_file():
            return ModelStatus(spec, ModelState.MISSING, path)
        info = path.stat()
        if spec.size_bytes is not None and info.st_size != spec.size_bytes:
            return ModelStatus(spec, ModelState.SIZE_MISMATCH, path)
        key = (str(path), info.st_size, info.st_mtime)
        digest = self._hash_cache.get(key) or sha256_of(path)
        self._hash_cache[key] = digest
        if spec.sha256 is not None:
            state = ModelState.PRESENT if digest == spec.sha256 else ModelState.HASH_MISMATCH
            return ModelStatus(spec, state, path, digest)
        record = read_provenance(path)
        if record is None:
            return ModelStatus(spec, ModelState.UNPINNED, path, digest)
        if digest != record.sha256 or (spec.derived is not None and record.inputs != spec.derived.pins):
            return ModelStatus(spec, ModelState.HASH_MISMATCH, path, digest)
        return ModelStatus(spec, ModelState.PRESENT if spec.derived else ModelState.UNPINNED, path, digest)

    def _mirror(self, spec: ModelSpec, target: Path) -> None:
        """Copy one file and its record from an ``s3://`` store root into the local cache (our bucket, not the
        internet), under the file's lock so that replicas sharing the cache never write the same file at once."""
        from storage.errors import ObjectNotFound

        with file_lock(target):
            if self._verify(spec, target).usable:
                return  # another replica mirrored it while this one waited for the lock
            max_bytes = spec.size_bytes or max_bytes_of(spec)
            try:
                copy_from_store(self.root, spec.file + PROVENANCE_SUFFIX, provenance_path(target), max_bytes=1 << 20)
            except ObjectNotFound:
                provenance_path(target).unlink(missing_ok=True)  # a stale record would refuse the bucket's file
            try:
                copy_from_store(self.root, spec.file, target, max_bytes=max_bytes)
            except ObjectNotFound:
                return


def max_bytes_of(spec: ModelSpec) -> int:
    """The read cap of a file whose entry states no size: larger for the files of a folder entry."""
    return spec.size_bytes or (MAX_FOLDER_FILE_BYTES if spec.in_folder else MAX_MODEL_BYTES)


def folder_status(spec: ModelSpec, parts: list[ModelStatus], path: Path) -> ModelStatus:
    """A folder entry's state from its files' (see :meth:`ModelStore.check`)."""
    order = (ModelState.MISSING, ModelState.HASH_MISMATCH, ModelState.SIZE_MISMATCH, ModelState.UNPINNED)
    states = {status.state for status in parts}
    state = next((state for state in order if state in states), ModelState.PRESENT)
    return ModelStatus(spec, state, path)


def private_cache_dir(root: str) -> Path:
    """The local mirror of ``root``: ``$XDG_CACHE_HOME`` (or ``~/.cache``) ``/portrait-serve/models/<hash of root>``,
    mode 0700 and owned by this user, never a shared, predictable folder other users could plant files in. Without
    a writable home, a fresh private folder under the system temp dir (``mkdtemp``: random name, mode 0700)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "portrait-serve" / "models"
    folder = base / hashlib.sha256(root.encode("utf-8")).hexdigest()[:16]
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError as exc:
        logger.warning("no private model cache under %s (%s): using a fresh temporary one", base, exc)
        return Path(tempfile.mkdtemp(prefix="portrait-models-"))
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ModelUnavailable(f"model cache {folder} is not a folder owned by this user: refusing to use it")
    if info.st_mode & 0o077:
        folder.chmod(0o700)
    return folder


def copy_from_store(root: str, key: str, target: Path, *, max_bytes: int) -> None:
    """Stream object ``key`` of the store at ``root`` (``s3://bucket/prefix`` or a folder) into ``target``.

    The bytes go to a uniquely named file beside ``target`` first, which takes the name only when complete: two
    writers never share a partial file, and a reader never sees half a file. Raises the store's errors
    (``ObjectNotFound``, ``ObjectTooLarge`` past ``max_bytes``...) unchanged.
    """
    from storage.base import open_store, parse_location

    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=PARTIAL_SUFFIX)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            open_store(parse_location(root)).get_to(key, handle, max_bytes=max_bytes)
        Path(name).replace(target)
    finally:
        Path(name).unlink(missing_ok=True)
