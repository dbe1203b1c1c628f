"""What a bucket route writes beside each source object, and how to read it back. Shared by the runner and the
backfill CLI, so both name and describe results the same way.

    <output>/<key without extension>.<ext>     the result image
    <output>/<key without extension>.json      ``ResultRecord``: source (bucket, key, ETag, version), task, params,
                                               the job's ``ResultMeta``, upload → result lag
    <output>/_errors/<key>.json                ``ErrorRecord``: why that ETag got no result (code, message)
    <output>/_attachments/<key>.json           what ``return=json`` adds beside the image (restore's face crops,
                                               the ID photo's report), so a stored result answers like the route
    <output>/_errors/_errors/<sha256>.lease    a worker's claim on the source while it processes it
    <output>/_errors/_errors/<sha256>.callback the route's callback for the source until it is delivered

The ``.json`` is written after the image: it is the commit marker the idempotency check reads. The names come from
``storage.keys``: a key that cannot name a result (reserved, or too long) still has an error record name, so every
object ends in a record (see ``RecordNames``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from deployments.common.errors import InputError, PortraitError
from serve_app.jobs.results import JobResult
from serve_app.registry import result_extension
from serve_app.schemas import ErrorDetail, ResultMeta
from storage.base import Location, ObjectInfo, ObjectStore
from storage.errors import InvalidKey, ObjectNotFound
from storage.keys import callback_name, error_name, lease_name, result_name, safe_join

logger = logging.getLogger(__name__)

MAX_RECORD_BYTES = 1 << 20
RECORD_CONTENT_TYPE = "application/json"
ATTACHMENTS_FOLDER = "_attachments"


class ResultCollision(InputError):
    """Two sources share a stem (``a.jpg``, ``a.png``) and so the same result name; the second one is refused."""

    code = "result_collision"
    http_status = 409


class SourceOut(BaseModel):
    bucket: str  # the S3 bucket, or the local folder
    key: str  # the full key in that bucket
    etag: str | None  # None (like size and time) when the store refused even to describe the object
    version_id: str | None = None
    size_bytes: int | None = None
    last_modified: datetime | None = None


class ResultRecord(BaseModel):
    kind: Literal["result"] = "result"
    source: SourceOut
    route: str
    task: str
    params: dict[str, Any]
    result_key: str
    sheet_key: str | None = None  # the ID photo's print sheet, when the params asked for a layout
    hd_key: str | None = None  # the ID photo's HD copy, when the params asked for hd
    attachments_key: str | None = None  # the JSON attachments of a ``return=json`` result
    meta: ResultMeta
    uploaded_at: datetime
    finished_at: datetime
    event_lag_s: float  # upload (the object's Last-Modified) → result written
    attempts: int


class ErrorRecord(BaseModel):
    kind: Literal["error"] = "error"
    source: SourceOut
    route: str
    task: str
    error: ErrorDetail
    failed_at: datetime


@dataclass(frozen=True)
class RecordNames:
    """Where the records of one source key go, relative to the output store (its prefix is ``within``)."""

    key: str
    error: str  # always a valid name
    lease: str  # the claim of a worker processing the source (``serve_app.runner.leases``)
    callback: str  # the route's callback for the source until delivered (``serve_app.runner.route_callbacks``)
    metadata: str | None  # None when the key cannot name a result; ``refusal`` says why
    refusal: InvalidKey | None = None

    def require_metadata(self) -> str:
        if self.metadata is None:
            raise self.refusal or InvalidKey(self.key, "it cannot name a result")
        return self.metadata


def record_names(key: str, *, within: str = "") -> RecordNames:
    try:
        metadata: str | None = result_name(key, "json", within=within)
        refusal = None
    except InvalidKey as exc:
        metadata, refusal = None, exc
    return RecordNames(key, error_name(key, within=within), lease_name(key), callback_name(key), metadata, refusal)


def unread_source(location: Location, key: str, etag: str | None) -> SourceOut:
    """The source as known before (or without) reading it: its key, and the ETag an event or a listing gave."""
    return SourceOut(bucket=location.bucket, key=safe_join(location.prefix, key), etag=etag)


def describe_source(location: Location, info: ObjectInfo) -> SourceOut:
    return SourceOut(
        bucket=location.bucket,
        key=safe_join(location.prefix, info.key),
        etag=info.etag,
        version_id=info.version_id,
        size_bytes=info.size_bytes,
        last_modified=info.last_modified,
    )


def find_records(store: ObjectStore, names: RecordNames) -> list[ResultRecord | ErrorRecord]:
    """The result and error records readable for one source (zero, one or both)."""
    found = [
        read_record(store, names.metadata, ResultRecord) if names.metadata else None,
        read_record(store, names.error, ErrorRecord),
    ]
    return [record for record in found if record is not None]


def is_recorded(records: list[ResultRecord | ErrorRecord], source: SourceOut) -> bool:
    """Whether a record covers this exact version of the source (same key and ETag), so it is done.

    Raises ``ResultCollision`` when the result name already belongs to another source with the same stem."""
    mine = [r for r in records if r.source.key == source.key and r.source.bucket == source.bucket]
    if any(record.source.etag == source.etag for record in mine):
        return True
    others = [r for r in records if isinstance(r, ResultRecord) and r not in mine]
    if others:
        raise ResultCollision(
            f"the result name for {source.key!r} is taken by {others[0].source.key!r} (same name, other extension)",
            details={"other_key": others[0].source.key},
        )
    return False


def write_result(store: ObjectStore, names: RecordNames, result: JobResult, record: ResultRecord) -> None:
    """The images first, then the ``.json``: a crash in between leaves no record, so the object is redone."""
    for name, data in result.companions().items():
        companion_key = getattr(record, f"{name}_key")
        if companion_key is not None:
            store.put(companion_key, data, content_type=result.media_type)
    if result.attachments and record.attachments_key is not None:
        store.put(record.attachments_key, json.dumps(result.attachments).encode(), content_type=RECORD_CONTENT_TYPE)
    if isinstance(result.body, Path):
        store.put_file(record.result_key, result.body, content_type=result.media_type)
    else:
        store.put(record.result_key, result.body, content_type=result.media_type)
    store.put(names.require_metadata(), dump_record(record), content_type=RECORD_CONTENT_TYPE)
    store.delete(names.error)  # an error record of an earlier version no longer describes the object


def write_error(store: ObjectStore, names: RecordNames, record: ErrorRecord) -> None:
    store.put(names.error, dump_record(record), content_type=RECORD_CONTENT_TYPE)


def output_key(key: str, result: JobResult, *, within: str = "") -> str:
    return result_name(key, result_extension(result.media_type), within=within)


def companion_key(key: str, result: JobResult, name: str, *, within: str = "") -> str | None:
    """``<key without extension>.<name>.<ext>`` beside the result (``name``: sheet, hd), when the job made one."""
    if name not in result.companions():
        return None
    return result_name(key, f"{name}." + result_extension(result.media_type), within=within)


def attachments_key(key: str, result: JobResult) -> str | None:
    """``_attachments/<key>.json`` (named like the error record: the full source key), when the result has any."""
    return safe_join(ATTACHMENTS_FOLDER, f"{key}.json") if result.attachments else None


def error_detail(exc: PortraitError) -> ErrorDetail:
    return ErrorDetail(code=exc.code, message=exc.message, details=exc.details or None)


def dump_record(record: BaseModel) -> bytes:
    return record.model_dump_json(indent=2).encode("utf-8")


def read_record(store: ObjectStore, key: str, model: type[BaseModel]) -> Any:
    found = read_record_at(store, key, model)
    return None if found is None else found[0]


def read_record_at(store: ObjectStore, key: str, model: type[BaseModel]) -> tuple[Any, str] | None:
    """The record (``None`` when unreadable) and the ETag it was read at, for a write conditioned on it; ``None``
    when absent."""
    try:
        stored = store.get(key, max_bytes=MAX_RECORD_BYTES)
    except ObjectNotFound:
        return None
    try:
        return model.model_validate(json.loads(stored.data)), stored.info.etag
    except (ValueError, ValidationError) as exc:  # a hand-edited or foreign file: redo the object, say why
        logger.warning("%s: unreadable record %r (%s); the source will be processed again", store, key, exc)
        return None, stored.info.etag
