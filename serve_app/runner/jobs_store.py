"""The jobs store: a job's record, state, input and outputs (``serve_app.runner.jobs_layout``) over one ``ObjectStore``.
Blocking calls: the API and the runner call them in worker threads."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from deployments.common.errors import InternalError, InvalidParameter
from serve_app.jobs.progress import read_progress, read_waiting, work_prefix
from serve_app.jobs.results import COMPANIONS, companions_json
from serve_app.runner.jobs_config import within
from serve_app.runner.jobs_layout import JobRef, idempotency_key, is_job_id
from serve_app.runner.jobs_records import IdempotencyClaim, JobRecord, JobState, JobView
from serve_app.runner.leases import Lease
from serve_app.runner.records import (
    ATTACHMENTS_FOLDER,
    MAX_RECORD_BYTES,
    ErrorRecord,
    ResultRecord,
    find_records,
    record_names,
)
from serve_app.runner.routing import PARAMS_METADATA
from serve_app.schemas import ErrorDetail
from storage.base import (
    Location,
    ObjectReader,
    ObjectStore,
    StoreSettings,
    enforces_conditional_writes,
    open_store,
    parse_location,
)
from storage.errors import ObjectNotFound
from storage.keys import lease_name
from storage.s3 import S3Store

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
JSON_TYPE = "application/json"


class JobStore:
    def __init__(self, location: Location, settings: StoreSettings, tasks: Iterable[str]) -> None:
        self.location = location
        self.root: ObjectStore = open_store(location, settings)
        # Inputs and outputs through stores rooted where the bucket runner's routes read and write (a local store
        # keeps user metadata in a sidecar of its own root).
        self._inputs = {task: open_store(parse_location(within(location, "in", task)), settings) for task in tasks}
        self._outputs = {task: open_store(parse_location(within(location, "out", task)), settings) for task in tasks}

    def prepare(self) -> None:
        """Make a local store's input folders (the bucket runner refuses a route whose input folder is missing), and
        check that the store enforces conditional writes, which idempotency keys rest on."""
        if self.location.scheme == "file":
            for task in self._inputs:
                os.makedirs(within(self.location, "in", task), exist_ok=True)
        self._check_conditional_writes()

    def _check_conditional_writes(self) -> None:
        """An S3 server that ignores ``If-None-Match`` would let two submits with one idempotency key both win."""
        if enforces_conditional_writes(self.root, f"probes/{uuid.uuid4().hex}.json"):
            return
        raise InvalidParameter(
            f"the jobs store {self.location} ignores conditional writes (If-None-Match: *), so idempotency keys "
            "cannot hold there: use a store that enforces them (AWS S3, recent MinIO, SeaweedFS, R2, a folder)",
            details={"store": str(self.location)},
        )

    def __repr__(self) -> str:
        return f"JobStore({self.location})"

    # Writing ------------------------------------------------------------------------------------------------------

    def create(self, record: JobRecord, data: bytes | Path, fields: dict[str, Any]) -> None:
        """The record first, then the input: the input is what the runner picks up, and it finds the record. ``data``
        a file (a large upload, ``serve_app.upload_spool``): streamed from it into the store (``put_file``), never
        read whole here."""
        ref = JobRef(record.owner, record.id)
        self.root.put(ref.record_key, _dump(record), content_type=JSON_TYPE)
        options = json.dumps(fields, separators=(",", ":"), ensure_ascii=True)
        inputs = self._inputs[record.task]
        metadata = {PARAMS_METADATA: options}
        if isinstance(data, Path):
            inputs.put_file(ref.key, data, content_type="application/octet-stream", metadata=metadata)
        else:
            inputs.put(ref.key, data, content_type="application/octet-stream", metadata=metadata)

    def put_state(self, ref: JobRef, state: JobState) -> None:
        self.root.put(ref.state_key, _dump(state), content_type=JSON_TYPE)

    def write_claim(self, owner: str, digest: str, claim: IdempotencyClaim, *, replacing: str | None) -> str:
        """Create the idempotency key's claim (``replacing`` None) or replace the one of ETag ``replacing``; its new
        ETag. ``PreconditionFailed`` when another submit wrote first: the store decides, so this holds across
        replicas."""
        info = self.root.put(
            idempotency_key(owner, digest),
            _dump(claim),
            content_type=JSON_TYPE,
            if_absent=replacing is None,
            if_match=replacing,
        )
        return info.etag

    def delete_input(self, ref: JobRef, task: str) -> None:
        self._inputs[task].delete(ref.key)

    def delete_data(self, ref: JobRef, task: str) -> int:
        """The input and every output (result, sheet, attachments, records); returns how many objects went."""
        output = self._outputs[task]
        doomed = [info.key for info in output.list(f"{ref.key}.")]
        doomed += [info.key for info in output.list(work_prefix(ref.key))]  # a video's finished chunks
        doomed += [record_names(ref.key).error, f"{ATTACHMENTS_FOLDER}/{ref.key}.json", lease_name(ref.key)]
        for key in doomed:
            output.delete(key)
        self.delete_input(ref, task)
        return len(doomed) + 1

    def delete(self, ref: JobRef, record: JobRecord | None) -> int:
        """Everything of the job: its data, state, idempotency pointer and record (last: a crash leaves it findable
        for the next sweep)."""
        deleted = 0
        if record is not None:
            deleted += self.delete_data(ref, record.task)
            self._forget_claim(record)
        self.root.delete(ref.state_key)
        self.root.delete(ref.record_key)
        return deleted + 2

    def purge(self, ref: JobRef) -> int:
        """``delete`` of a job known by its reference only (expired, or abandoned at submit)."""
        return self.delete(ref, self.record(ref))

    def _forget_claim(self, record: JobRecord) -> None:
        """Delete the idempotency claim if it still names this job (a later job may hold the key now)."""
        if record.idempotency is None:
            return
        found = self.claim(record.owner, record.idempotency)
        if found is not None and (found[0] is None or found[0].id == record.id):
            self.root.delete(idempotency_key(record.owner, record.idempotency))

    # Reading ------------------------------------------------------------------------------------------------------

    def record(self, ref: JobRef) -> JobRecord | None:
        return _read(self.root, ref.record_key, JobRecord)

    def view(self, ref: JobRef) -> JobView | None:
        record = self.record(ref)
        if record is None:
            return None
        state = _read(self.root, ref.state_key, JobState) or JobState(updated_at=record.created_at)
        records = find_records(self._outputs[record.task], record_names(ref.key))
        result = next((found for found in records if isinstance(found, ResultRecord)), None)
        error = next((found for found in records if isinstance(found, ErrorRecord)), None)
        if state.status == "queued" and not records:
            if self._claimed(ref, record.task):
                fraction, detail = read_progress(self._outputs[record.task], ref.key) or (0.0, None)
                state = state.model_copy(update={"status": "running", "progress": fraction, "progress_detail": detail})
            elif waiting := read_waiting(self._outputs[record.task], ref.key):
                state = state.model_copy(update={"waiting": ErrorDetail(**waiting)})
        return JobView(record=record, state=state, result=result, error=error)

    def _claimed(self, ref: JobRef, task: str) -> bool:
        """Whether the bucket runner holds a live claim on the job's input: it is running now."""
        lease = _read(self._outputs[task], lease_name(ref.key), Lease)
        return lease is not None and lease.expires_at > datetime.now(UTC)

    def claim(self, owner: str, digest: str) -> tuple[IdempotencyClaim | None, str] | None:
        """(the idempotency key's claim, None if unreadable; its ETag), or None when the key is free."""
        try:
            stored = self.root.get(idempotency_key(owner, digest), max_bytes=MAX_RECORD_BYTES)
        except ObjectNotFound:
            return None
        try:
            return IdempotencyClaim.model_validate_json(stored.data), stored.info.etag
        except ValidationError:
            logger.warning("%s: unreadable idempotency claim of %s (replaced by the next submit)", self, owner)
            return None, stored.info.etag

    def open_result(self, view: JobView) -> ObjectReader:
        """The result opened for a streamed download: a video's may be GiBs, so it is never read whole here."""
        stored = view.result
        if stored is None:
            raise ObjectNotFound(view.record.id)
        return self._outputs[view.record.task].open_read(stored.result_key)

    def presigned_result_url(self, view: JobView, *, expires_s: int) -> str:
        """A URL the client GETs the result from itself (``args.jobs.redirect_from_bytes``); ``ObjectNotFound`` when
        the result is gone, as for ``open_result``."""
        stored = view.result
        if stored is None:
            raise ObjectNotFound(view.record.id)
        output = self._outputs[view.record.task]
        if not isinstance(output, S3Store):
            # JobsConfig allows redirects only with an s3:// store: reaching here is our bug, not the caller's
            raise InternalError(f"{self} is not an s3:// store: its results cannot be presigned")
        output.head(stored.result_key)
        return output.presigned_get_url(stored.result_key, expires_s=expires_s)

    def result_json_fields(self, view: JobView) -> dict[str, Any]:
        """What ``return=json`` answers (``JobResult.to_json``) after the result's own ``image_b64`` (streamed from
        ``open_result``, never read whole): its media type and meta, companions (sheet, HD copy) and attachments."""
        stored = view.result
        if stored is None:
            raise ObjectNotFound(view.record.id)
        output = self._outputs[view.record.task]
        answer: dict[str, Any] = {
            "media_type": stored.meta.media_type,
            "meta": stored.meta.model_dump(),
        }
        companions = {
            name: output.get(key, max_bytes=1 << 31).data
            for name in COMPANIONS
            if (key := getattr(stored, f"{name}_key")) is not None
        }
        answer |= companions_json(companions, stored.meta.media_type)
        if stored.attachments_key is not None:
            answer |= _read_json(output, stored.attachments_key) or {}
        return answer

    def refs(self, owner: str | None = None) -> Iterator[JobRef]:
        """Every job of ``owner`` (every job when None), from the records' names."""
        for info in self.root.list(f"jobs/{owner}/" if owner else "jobs/", suffix=".json"):
            parts = info.key.split("/")
            if len(parts) == 3 and parts[2].endswith(".json") and is_job_id(parts[2][: -len(".json")]):
                yield JobRef(parts[1], parts[2][: -len(".json")])

    def inputs(self) -> Iterator[tuple[str, JobRef]]:
        """(task, job) of every input still in the store: jobs queued or running, and ended jobs whose callback is not
        settled yet (an ending deletes the input last)."""
        for task, inputs in self._inputs.items():
            for info in inputs.list():
                owner, _, job_id = info.key.partition("/")
                if owner and is_job_id(job_id):
                    yield task, JobRef(owner, job_id)


def _dump(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


def _read_json(store: ObjectStore, key: str) -> Any:
    try:
        return json.loads(store.get(key, max_bytes=MAX_RECORD_BYTES).data)
    except ObjectNotFound:
        return None


def _read(store: ObjectStore, key: str, model: type[M]) -> M | None:
    try:
        data = store.get(key, max_bytes=MAX_RECORD_BYTES).data
    except ObjectNotFound:
        return None
    try:
        return model.model_validate_json(data)
    except ValidationError:
        logger.warning("%s: unreadable job file %r", store, key)
        return None
