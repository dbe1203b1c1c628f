"""Routes as data: which uploads trigger which job with which options, and where results go. No Ray, no I/O.

A route (``BucketRoute`` at the wire: the ``routes`` list of the runner's ``user_config``) maps an input location
(``s3://bucket/prefix`` or a local folder) and suffix filters to a task, default params and an output location.
``build_routing_table`` validates every route at start-up: the task exists, the default params pass the same
pydantic models as HTTP, and no route's output can trigger an input route (a loop that would process its own
results forever). Per-object options come from the ``x-amz-meta-portrait-params`` user metadata (JSON), merged
over the route's defaults and validated by the same models. A route may say what it wants in plain language
(``prompt: 蓝底一寸证件照``) instead of ``task`` + ``params``: the rule engine reads it once, at start-up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deployments.common.errors import InputError, InvalidParameter
from deployments.common.params import JobParams
from serve_app.instructions import rule_interpreter
from serve_app.jobs import JobContext, parse_job_params
from serve_app.registry import JOB_ENTRIES, JOB_NAMES
from storage.base import Location, StoreSettings, parse_location

DEFAULT_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")
# What a route writes into its output: results in every format a job answers (photos, ``.mp4`` for a video), metadata
# and error records.
RESULT_SUFFIXES = (
    *sorted({f".{extension}" for entry in JOB_ENTRIES for extension in entry.result_media_types.values()}),
    ".json",
)
PARAMS_METADATA = "portrait-params"  # user metadata name as stores report it (the header is x-amz-meta-portrait-params)


class BucketRoute(BaseModel):
    """One route as written in the Serve YAML (``routes:`` of the ``BucketRunner`` user_config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    input: str = Field(description="s3://bucket/prefix, or a local folder (relative to the buckets root)")
    output: str = Field(description="s3://bucket/prefix, or a local folder; results, metadata and _errors/ go here")
    task: str | None = Field(None, description=f"a job name: {', '.join(JOB_NAMES)} (or give a prompt)")
    prompt: str | None = Field(None, description="the job in plain language instead of a task, e.g. 蓝底一寸证件照")
    params: dict[str, Any] = Field(default_factory=dict, description="default job params (over the prompt's)")
    suffixes: tuple[str, ...] = Field(DEFAULT_SUFFIXES, description="key suffixes that trigger (case-insensitive)")
    event_bucket: str | None = Field(
        None, description="bucket name events carry for a local-folder input (default: the folder's name)"
    )
    poll: bool | None = Field(None, description="list the input every poll interval (default: local folders only)")
    store: StoreSettings = Field(default_factory=StoreSettings)
    retention_s: int | None = Field(
        None, ge=1, description="delete sources (once recorded), results and records older than this"
    )
    callback_url: str | None = Field(
        None, pattern=r"^https?://", description="POST each object's record here, signed (PORTRAIT_CALLBACK_SECRET)"
    )

    @model_validator(mode="after")
    def _task_or_prompt(self) -> BucketRoute:
        if (self.task is None) == (self.prompt is None):
            raise ValueError("give a task (with params) or a prompt, one of the two")
        return self


@dataclass(frozen=True)
class Route:
    """A validated route: locations resolved, default params parsed."""

    name: str
    input: Location
    output: Location
    task: str
    params: JobParams
    default_fields: Mapping[str, Any] = field(hash=False)
    suffixes: tuple[str, ...]
    event_bucket: str
    poll: bool
    store: StoreSettings = field(hash=False)
    retention_s: int | None = None
    callback_url: str | None = None

    def accepts(self, key: str) -> bool:
        """Whether a store-relative ``key`` passes the suffix filter."""
        return not self.suffixes or key.lower().endswith(self.suffixes)

    def relative_key(self, bucket: str, key: str) -> str | None:
        """The key relative to this route's input, or ``None`` when the object is not this route's."""
        if bucket != self.event_bucket:
            return None
        prefix = self.input.prefix
        if prefix:
            if not key.startswith(prefix + "/"):
                return None
            key = key[len(prefix) + 1 :]
        return key if key and self.accepts(key) else None


@dataclass(frozen=True)
class RouteMatch:
    route: Route
    key: str  # relative to the route's input location


class RoutingTable:
    """Every route, validated together; ``match`` finds the routes an uploaded object triggers."""

    def __init__(self, routes: Sequence[Route]) -> None:
        _refuse_duplicate_names(routes)
        _refuse_loops(routes)
        _refuse_shared_outputs(routes)
        self.routes: tuple[Route, ...] = tuple(routes)
        self._by_name = {route.name: route for route in routes}

    def __len__(self) -> int:
        return len(self.routes)

    def route(self, name: str) -> Route:
        try:
            return self._by_name[name]
        except KeyError:
            raise InvalidParameter(f"no route named {name!r}; routes: {sorted(self._by_name)}") from None

    def match(self, bucket: str, key: str) -> list[RouteMatch]:
        """Every route the object triggers (several routes may fan one upload out to different jobs)."""
        matches = []
        for route in self.routes:
            relative = route.relative_key(bucket, key)
            if relative is not None:
                matches.append(RouteMatch(route, relative))
        return matches


def build_routing_table(
    specs: Iterable[BucketRoute | Mapping[str, Any]], context: JobContext, *, base_dir: Path | None = None
) -> RoutingTable:
    """Validate routes from configuration; ``base_dir`` anchors relative folders (default: the working directory)."""
    routes = [resolve_route(_route_model(spec), context, base_dir=base_dir) for spec in specs]
    return RoutingTable(routes)


def resolve_route(spec: BucketRoute, context: JobContext, *, base_dir: Path | None = None) -> Route:
    if spec.prompt is not None:
        spec = _from_prompt(spec, context)
    if spec.task not in JOB_NAMES:
        raise InvalidParameter(f"route {spec.name!r}: unknown task {spec.task!r}; tasks: {', '.join(JOB_NAMES)}")
    try:
        params = parse_job_params(spec.task, spec.params, context)
    except InvalidParameter as exc:
        raise InvalidParameter(f"route {spec.name!r}: invalid params: {exc.message}", details=exc.details) from None
    source = _location(spec.input, base_dir)
    target = _location(spec.output, base_dir)
    if source.scheme == "s3" and spec.event_bucket not in (None, source.bucket):
        raise InvalidParameter(f"route {spec.name!r}: event_bucket applies to local folders only")
    suffixes = tuple(suffix.lower() for suffix in spec.suffixes)
    if any(not suffix for suffix in suffixes):
        raise InvalidParameter(f"route {spec.name!r}: empty suffix (leave the list empty to accept every key)")
    return Route(
        name=spec.name,
        input=source,
        output=target,
        task=spec.task,
        params=params,
        default_fields=dict(spec.params),
        suffixes=suffixes,
        event_bucket=spec.event_bucket or (source.bucket if source.scheme == "s3" else Path(source.bucket).name),
        poll=spec.poll if spec.poll is not None else source.scheme == "file",
        store=spec.store,
        retention_s=spec.retention_s,
        callback_url=spec.callback_url,
    )


def _from_prompt(spec: BucketRoute, context: JobContext) -> BucketRoute:
    """The route with the task and params its prompt asks for (the route's own params win)."""
    try:
        instruction = rule_interpreter(context).interpret_now(spec.prompt or "")
    except InputError as exc:
        raise type(exc)(f"route {spec.name!r}: prompt: {exc.message}", details=exc.details) from None
    fields = {**instruction.fields(), **spec.params}
    return spec.model_copy(update={"task": instruction.task, "prompt": None, "params": fields})


def object_params(route: Route, user_metadata: Mapping[str, str], context: JobContext) -> JobParams:
    """The route's defaults, overridden by the object's ``x-amz-meta-portrait-params`` JSON when present."""
    raw = user_metadata.get(PARAMS_METADATA)
    if raw is None:
        return route.params
    try:
        overrides = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidParameter(f"x-amz-meta-{PARAMS_METADATA} is not valid JSON: {exc}") from None
    if not isinstance(overrides, dict):
        raise InvalidParameter(f"x-amz-meta-{PARAMS_METADATA} must be a JSON object, got {type(overrides).__name__}")
    return parse_job_params(route.task, {**route.default_fields, **overrides}, context)


def _route_model(spec: BucketRoute | Mapping[str, Any]) -> BucketRoute:
    if isinstance(spec, BucketRoute):
        return spec
    try:
        return BucketRoute.model_validate(spec)
    except ValidationError as exc:
        name = spec.get("name", "?") if isinstance(spec, Mapping) else "?"
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'route'}: {e['msg']}" for e in exc.errors())
        raise InvalidParameter(f"route {name!r}: {problems}") from None


def _location(uri: str, base_dir: Path | None) -> Location:
    if base_dir is not None and "://" not in uri and not uri.startswith("file:"):
        uri = os.path.join(base_dir, os.path.expanduser(uri))
    return parse_location(uri)


def _store_identity(location: Location, route: Route) -> tuple[str, ...]:
    if location.scheme == "file":
        return ("file",)
    return ("s3", route.store.endpoint_url or "aws", location.bucket)


def _overlap(a: Location, route_a: Route, b: Location, route_b: Route) -> bool:
    """Whether two locations can hold the same object: same store and one prefix (or folder) inside the other."""
    if _store_identity(a, route_a) != _store_identity(b, route_b):
        return False
    if a.scheme == "file":
        first, second = Path(a.bucket), Path(b.bucket)
        return first == second or first in second.parents or second in first.parents
    pa, pb = a.prefix, b.prefix
    return not pa or not pb or pa == pb or pa.startswith(pb + "/") or pb.startswith(pa + "/")


def _refuse_loops(routes: Sequence[Route]) -> None:
    for writer in routes:
        for reader in routes:
            if not _overlap(writer.output, writer, reader.input, reader):
                continue
            if not _could_match_results(reader.suffixes):
                continue  # the reader only accepts extensions no result or record ever has
            raise InvalidParameter(
                f"route {writer.name!r} writes to {writer.output}, which route {reader.name!r} reads from "
                f"({reader.input}): its results would trigger it again. Write results to another bucket or prefix.",
                details={"writer": writer.name, "reader": reader.name},
            )


def _could_match_results(suffixes: tuple[str, ...]) -> bool:
    """Results keep their source's stem, so only a suffix's extension tells whether a result could match it."""
    if not suffixes:
        return True
    return any("." not in suffix or "." + suffix.rsplit(".", 1)[1] in RESULT_SUFFIXES for suffix in suffixes)


def _refuse_shared_outputs(routes: Sequence[Route]) -> None:
    for index, first in enumerate(routes):
        for second in routes[index + 1 :]:
            if _overlap(first.output, first, second.output, second):
                raise InvalidParameter(
                    f"routes {first.name!r} and {second.name!r} write to overlapping outputs "
                    f"({first.output}, {second.output}): their results and records would overwrite each other"
                )


def _refuse_duplicate_names(routes: Sequence[Route]) -> None:
    names = [route.name for route in routes]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidParameter(f"duplicate route names: {duplicates}")
