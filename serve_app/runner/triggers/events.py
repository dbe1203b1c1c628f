"""Notification bodies → ``ObjectEvent`` records. No Ray, no I/O.

Three shapes arrive, all carrying S3 event records (``Records[].s3.bucket.name``, ``Records[].s3.object.key``):

- a MinIO webhook body ``{"EventName": "s3:ObjectCreated:Put", "Key": "bucket/key", "Records": [...]}``;
- an AWS S3 notification ``{"Records": [...]}`` (what S3 sends to SQS, SNS or Lambda);
- an SQS message body holding either of the above, possibly wrapped by SNS (``{"Type": "Notification",
  "Message": "<json>"}``); S3's ``s3:TestEvent`` (sent when a notification is configured) carries no object.

Keys arrive URL-encoded (``%2F``, ``+`` for space) and are decoded here. A record whose key cannot be stored safely
(``..`` segments, NUL) is dropped with a warning: no result or error record could name it either.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from deployments.common.errors import InvalidParameter
from storage.errors import InvalidKey
from storage.keys import decode_event_key

logger = logging.getLogger(__name__)

CREATED_MARKER = "ObjectCreated:"


@dataclass(frozen=True)
class ObjectEvent:
    """One object-level notification; ``key`` is decoded and is the full key in ``bucket``."""

    bucket: str
    key: str
    event_name: str
    etag: str | None = None
    size_bytes: int | None = None
    version_id: str | None = None
    event_time: datetime | None = None

    @property
    def is_created(self) -> bool:
        """Only creations (``Put``, ``Post``, ``Copy``, ``CompleteMultipartUpload``) trigger work."""
        return CREATED_MARKER in self.event_name


def parse_notification(body: bytes | str | Mapping[str, Any]) -> list[ObjectEvent]:
    """Events of a webhook body or an SQS message body (MinIO, AWS, SNS-wrapped); ``[]`` for ``s3:TestEvent``."""
    document = _load_json(body) if isinstance(body, (bytes, str)) else body
    if not isinstance(document, Mapping):
        raise InvalidParameter(f"an event notification must be a JSON object, got {type(document).__name__}")
    if document.get("Type") == "Notification" and "Message" in document:  # SNS → SQS wrapping
        return parse_notification(_text(document["Message"], "SNS Message"))
    if document.get("Event") == "s3:TestEvent":
        return []
    records = document.get("Records")
    if records is None:
        raise InvalidParameter("an event notification needs a 'Records' list (MinIO webhook or S3 event body)")
    if not isinstance(records, list):
        raise InvalidParameter(f"'Records' must be a list, got {type(records).__name__}")
    events: list[ObjectEvent] = []
    for index, record in enumerate(records):
        event = parse_record(record, index=index)
        if event is not None:
            events.append(event)
    return events


def parse_record(record: Any, *, index: int = 0) -> ObjectEvent | None:
    """One S3 event record (AWS or MinIO); ``None`` when its key cannot be addressed safely."""
    where = f"Records[{index}]"
    if not isinstance(record, Mapping):
        raise InvalidParameter(f"{where} must be an object, got {type(record).__name__}")
    s3 = _mapping(record.get("s3"), f"{where}.s3")
    bucket = _text(_mapping(s3.get("bucket"), f"{where}.s3.bucket").get("name"), f"{where}.s3.bucket.name")
    obj = _mapping(s3.get("object"), f"{where}.s3.object")
    raw_key = _text(obj.get("key"), f"{where}.s3.object.key")
    try:
        key = decode_event_key(raw_key)
    except InvalidKey as exc:
        logger.warning("dropping %s of bucket %r: %s", where, bucket, exc.message)
        return None
    size = obj.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise InvalidParameter(f"{where}.s3.object.size must be a non-negative integer, got {size!r}")
    return ObjectEvent(
        bucket=bucket,
        key=key,
        event_name=_text(record.get("eventName"), f"{where}.eventName"),
        etag=_optional_text(obj.get("eTag") or obj.get("etag"), f"{where}.s3.object.eTag"),
        size_bytes=size,
        version_id=_optional_text(obj.get("versionId"), f"{where}.s3.object.versionId"),
        event_time=_parse_time(record.get("eventTime"), f"{where}.eventTime"),
    )


def created_events(events: list[ObjectEvent]) -> list[ObjectEvent]:
    return [event for event in events if event.is_created]


def _load_json(body: bytes | str) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidParameter(f"the event notification is not valid JSON: {exc}") from None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidParameter(f"{where} must be an object, got {_describe(value)}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidParameter(f"{where} must be a non-empty string, got {_describe(value)}")
    return value


def _optional_text(value: Any, where: str) -> str | None:
    if value in (None, ""):
        return None
    return _text(value, where).strip('"')


def _parse_time(value: Any, where: str) -> datetime | None:
    if value in (None, ""):
        return None
    text = _text(value, where)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidParameter(f"{where} is not an ISO 8601 time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _describe(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:80]
