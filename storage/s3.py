"""An S3 bucket (AWS, MinIO, SeaweedFS, Ceph, R2...) behind the ``ObjectStore`` interface (see ``storage.base``).

Retries with backoff are botocore's own ("standard" or "adaptive" mode); what still fails afterwards is translated
once, by ``_ERRORS_BY_CODE``, into the store error tree with the S3 code, HTTP status and request id kept.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, BinaryIO

import boto3
import botocore.exceptions
from botocore.config import Config

from storage.base import (
    READ_CHUNK_BYTES,
    HeadExists,
    ObjectInfo,
    ObjectReader,
    RetryMode,
    StoredObject,
    normalize_metadata,
)
from storage.errors import (
    AccessDenied,
    BucketNotFound,
    KeyTooLong,
    ObjectArchived,
    ObjectNotFound,
    ObjectStoreError,
    ObjectTooLarge,
    PreconditionFailed,
    StoreUnavailable,
)
from storage.keys import is_valid_key, normalize_prefix, safe_join, validate_list_prefix

logger = logging.getLogger(__name__)


# S3 error code (or, for bodiless replies such as HEAD, the HTTP status as a string) -> our error.
_ERRORS_BY_CODE: dict[str, type[ObjectStoreError]] = {
    "NoSuchKey": ObjectNotFound,
    "NotFound": ObjectNotFound,
    "404": ObjectNotFound,
    "NoSuchBucket": BucketNotFound,
    "AccessDenied": AccessDenied,
    "AllAccessDisabled": AccessDenied,
    "InvalidAccessKeyId": AccessDenied,
    "SignatureDoesNotMatch": AccessDenied,
    "ExpiredToken": AccessDenied,
    "InvalidToken": AccessDenied,
    "403": AccessDenied,
    "KeyTooLongError": KeyTooLong,
    "InvalidObjectState": ObjectArchived,
    "PreconditionFailed": PreconditionFailed,
    "412": PreconditionFailed,
    # AWS: a conditional write raced another write of the same key; the other one is the one that counts.
    "ConditionalRequestConflict": PreconditionFailed,
    "SlowDown": StoreUnavailable,
    "Throttling": StoreUnavailable,
    "ThrottlingException": StoreUnavailable,
    "RequestLimitExceeded": StoreUnavailable,
    "ServiceUnavailable": StoreUnavailable,
    "InternalError": StoreUnavailable,
    "RequestTimeout": StoreUnavailable,
    "500": StoreUnavailable,
    "502": StoreUnavailable,
    "503": StoreUnavailable,
    "504": StoreUnavailable,
}

# Raised by botocore when no usable HTTP reply came back (after its retries): the store is unreachable for now.
_TRANSIENT_ERRORS = (
    botocore.exceptions.ConnectionError,  # refused, DNS, connect timeout, proxy
    botocore.exceptions.HTTPClientError,  # read timeout, connection closed, broken response stream
    botocore.exceptions.IncompleteReadError,
    botocore.exceptions.FlexibleChecksumError,  # body corrupted in transit
)
_CREDENTIAL_ERRORS = (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError)


_SESSION_LOCK = threading.Lock()


@functools.cache
def _shared_session() -> boto3.session.Session:
    """One session per process: it caches parsed service models, so a new client costs ~30 ms instead of ~300 ms."""
    return boto3.session.Session()


class S3Store(HeadExists):
    """Objects under ``prefix`` in one bucket; keys given to and returned by the store are relative to the prefix."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        max_attempts: int = 5,
        retry_mode: RetryMode = "standard",
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
    ) -> None:
        self.bucket = bucket
        self.prefix = normalize_prefix(prefix)
        self.endpoint_url = endpoint_url
        config = Config(
            retries={"mode": retry_mode, "max_attempts": max_attempts},
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            # Custom endpoints (MinIO, SeaweedFS, Ceph) rarely have DNS for virtual-hosted bucket names.
            s3={"addressing_style": "path" if endpoint_url else "auto"},
            signature_version="s3v4",  # what requests sign with; presigned URLs would otherwise get SigV2
        )
        with _SESSION_LOCK:  # sessions are not thread-safe; the clients they make are
            self._client = _shared_session().client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=region,
                aws_access_key_id=access_key,
                aws_secret_access_key=secret_key,
                config=config,
            )

    def __repr__(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"S3Store({where!r}, endpoint_url={self.endpoint_url!r})"

    def get(self, key: str, *, max_bytes: int) -> StoredObject:
        buffer = io.BytesIO()
        info = self.get_to(key, buffer, max_bytes=max_bytes)
        return StoredObject(buffer.getvalue(), info)

    def get_to(self, key: str, handle: BinaryIO, *, max_bytes: int) -> ObjectInfo:
        full_key = self._full_key(key)
        with self._s3_errors(key):
            # The reply's headers are the HEAD: the size is checked before any of the body is read.
            reply = self._client.get_object(Bucket=self.bucket, Key=full_key)
            body = reply["Body"]
            try:
                if reply["ContentLength"] > max_bytes:
                    head = body.read(ObjectTooLarge.HEAD_BYTES)
                    raise ObjectTooLarge(key, size_bytes=reply["ContentLength"], max_bytes=max_bytes, head=head)
                _copy_capped(body, handle.write, key, max_bytes)
            finally:
                body.close()
        return self._info(key, reply)

    def open_read(self, key: str) -> ObjectReader:
        full_key = self._full_key(key)
        with self._s3_errors(key):
            reply = self._client.get_object(Bucket=self.bucket, Key=full_key)
        body = reply["Body"]  # botocore checks at its end that it carried ContentLength bytes
        return ObjectReader(self._info(key, reply), self._chunks(key, body), body.close)

    def presigned_get_url(self, key: str, *, expires_s: int) -> str:
        """A URL that GETs the object without credentials until ``expires_s`` from now, signed for this store's
        endpoint (so the reader must reach that endpoint). Signing is local: no request, no check that it exists."""
        return self._client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self._full_key(key)}, ExpiresIn=expires_s
        )

    def _chunks(self, key: str, body: Any) -> Iterator[bytes]:
        with self._s3_errors(key):
            while chunk := body.read(READ_CHUNK_BYTES):
                yield chunk

    def head(self, key: str) -> ObjectInfo:
        full_key = self._full_key(key)
        with self._s3_errors(key):
            reply = self._client.head_object(Bucket=self.bucket, Key=full_key)
        return self._info(key, reply)

    def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str,
        metadata: Mapping[str, str] | None = None,
        if_absent: bool = False,
        if_match: str | None = None,
    ) -> ObjectInfo:
        conditions: dict[str, str] = {}
        if if_absent:
            conditions["IfNoneMatch"] = "*"
        if if_match is not None:
            conditions["IfMatch"] = f'"{if_match}"'
        try:
            return self._put(key, data, len(data), content_type, metadata, conditions)
        except ObjectNotFound as exc:  # AWS and moto: If-Match of a missing object; SeaweedFS answers 412
            raise PreconditionFailed(str(exc), key=key, bucket=self.bucket, status=exc.status) from exc

    def put_file(
        self, key: str, path: Path, *, content_type: str, metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo:
        """One PUT whose body botocore streams from the file (and rewinds for a retry); S3 takes up to 5 GiB so."""
        with open(path, "rb") as body:  # outside _s3_errors: a missing source file is the caller's bug
            return self._put(key, body, os.fstat(body.fileno()).st_size, content_type, metadata, {})

    def _put(
        self,
        key: str,
        body: bytes | BinaryIO,
        size_bytes: int,
        content_type: str,
        metadata: Mapping[str, str] | None,
        conditions: dict[str, str],
    ) -> ObjectInfo:
        full_key = self._full_key(key)
        user_metadata = normalize_metadata(metadata)
        with self._s3_errors(key):
            reply = self._client.put_object(
                Bucket=self.bucket,
                Key=full_key,
                Body=body,
                ContentType=content_type,
                Metadata=user_metadata,
                **conditions,
            )
        return ObjectInfo(
            key=key,
            size_bytes=size_bytes,
            etag=_unquote_etag(reply["ETag"]),
            # PUT does not return Last-Modified; S3 sets it to the time of the request, which the Date header gives.
            last_modified=_reply_date(reply),
            content_type=content_type,
            version_id=reply.get("VersionId"),
            user_metadata=user_metadata,
        )

    def list(self, prefix: str = "", *, suffix: str | None = None) -> Iterator[ObjectInfo]:
        validate_list_prefix(prefix)  # here, not in the generator: a bad prefix fails at the call
        return self._list(prefix, suffix)

    def _list(self, prefix: str, suffix: str | None) -> Iterator[ObjectInfo]:
        full_prefix = f"{self.prefix}/{prefix}" if self.prefix else prefix
        pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full_prefix)
        with self._s3_errors(prefix):
            for page in pages:
                for entry in page.get("Contents", []):
                    key = self._relative_key(entry["Key"])
                    if key is None or (suffix and not key.endswith(suffix)):
                        continue
                    yield ObjectInfo(key, entry["Size"], _unquote_etag(entry["ETag"]), entry["LastModified"])

    def delete(self, key: str) -> None:
        full_key = self._full_key(key)
        with self._s3_errors(key):
            self._client.delete_object(Bucket=self.bucket, Key=full_key)

    def _full_key(self, key: str) -> str:
        return safe_join(self.prefix, key)

    def _relative_key(self, full_key: str) -> str | None:
        """The store-relative key of a listed object, or ``None`` for entries the store cannot address."""
        key = full_key[len(self.prefix) + 1 :] if self.prefix else full_key
        if key.endswith("/"):  # a "folder" marker written by consoles and some tools, not an object
            return None
        if not is_valid_key(key):
            logger.warning("%s: skipping %r, which is not a valid object key", self, full_key)
            return None
        return key

    def _info(self, key: str, reply: dict[str, Any]) -> ObjectInfo:
        return ObjectInfo(
            key=key,
            size_bytes=reply["ContentLength"],
            etag=_unquote_etag(reply["ETag"]),
            last_modified=reply["LastModified"].astimezone(UTC),
            content_type=reply.get("ContentType"),
            version_id=reply.get("VersionId"),
            user_metadata=dict(reply.get("Metadata", {})),
        )

    @contextmanager
    def _s3_errors(self, key: str) -> Iterator[None]:
        """Translate botocore failures into the store error tree; the only place this happens."""
        try:
            yield
        except botocore.exceptions.ClientError as exc:
            raise self._client_error(exc, key) from exc
        except _TRANSIENT_ERRORS as exc:
            raise StoreUnavailable(
                f"S3 endpoint unreachable for {key!r} in bucket {self.bucket!r}: {exc}", key=key, bucket=self.bucket
            ) from exc
        except _CREDENTIAL_ERRORS as exc:
            raise AccessDenied(f"no usable S3 credentials: {exc}", key=key, bucket=self.bucket) from exc

    def _client_error(self, exc: botocore.exceptions.ClientError, key: str) -> ObjectStoreError:
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        s3_code = str(error.get("Code", ""))
        status = meta.get("HTTPStatusCode")
        error_class = _ERRORS_BY_CODE.get(s3_code) or _ERRORS_BY_CODE.get(str(status), ObjectStoreError)
        message = error.get("Message") or s3_code
        return error_class(
            f"S3 {exc.operation_name} of {key!r} in bucket {self.bucket!r} failed: {message}",
            key=key,
            bucket=self.bucket,
            status=status,
            request_id=meta.get("RequestId"),
            s3_code=s3_code or None,
        )


def _copy_capped(body: Any, write: Callable[[bytes], object], key: str, max_bytes: int) -> None:
    """Hand a response body to ``write`` chunk by chunk, refusing it once it passes ``max_bytes`` (a lying
    Content-Length cannot exhaust memory or disk)."""
    size_bytes, head = 0, b""
    while chunk := body.read(min(READ_CHUNK_BYTES, max_bytes + 1 - size_bytes)):
        size_bytes += len(chunk)
        head = head or chunk[: ObjectTooLarge.HEAD_BYTES]
        if size_bytes > max_bytes:
            raise ObjectTooLarge(key, size_bytes=size_bytes, max_bytes=max_bytes, head=head)
        write(chunk)


def _unquote_etag(etag: str) -> str:
    return etag.strip('"')


def _reply_date(reply: dict[str, Any]) -> datetime:
    date_header = reply.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if date_header is None:  # every HTTP/1.1 origin server sends Date; a proxy might drop it
        return datetime.now(UTC)
    return parsedate_to_datetime(date_header).astimezone(UTC)
