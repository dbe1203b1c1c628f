"""Errors raised by object stores, placed in the service's one error tree.

Store failures are 5xx (our side); a bad key or an oversized object is the caller's input (4xx). S3 failures keep the
S3 error code, HTTP status and request id, so a log line can be matched with the provider's own logs.

    StorageError (deployments.common.errors)   502 storage_error
    └── ObjectStoreError                        502 storage_error   (unmapped failures: transient unless a 4xx)
        ├── ObjectNotFound                      502 object_not_found
        ├── BucketNotFound                      502 bucket_not_found    permanent
        ├── AccessDenied                        502 access_denied       permanent
        ├── KeyTooLong                          502 key_too_long        permanent (the store refuses the key)
        ├── ObjectArchived                      502 object_archived     permanent (Glacier: restore it first)
        ├── PreconditionFailed                  502 precondition_failed permanent (a conditional write lost)
        └── StoreUnavailable                    503 store_unavailable   transient: retry later

``retryable`` says which: waiting helps (throttling, 5xx, network) or the same request will fail again until someone
changes the bucket, its policy or the object (a retry loop must end in an error record, not go on forever).
    InvalidParameter (deployments.common.errors)
    └── InvalidKey                              422 invalid_key
    ImageTooLarge (deployments.common.errors)
    └── ObjectTooLarge                          413 image_too_large  (readers of media say which kind: it carries
                                                                      the object's first bytes; serve_app.byte_caps)
"""

from __future__ import annotations

from typing import Any

from deployments.common.errors import ImageTooLarge, InvalidParameter, StorageError


class ObjectStoreError(StorageError):
    """A store operation failed; carries what is known about the failing request."""

    permanent: bool | None = None  # None: decided by the HTTP status (a 4xx is permanent; 5xx, 408, 429, none are not)

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        bucket: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        s3_code: str | None = None,
    ) -> None:
        found = {"key": key, "bucket": bucket, "status": status, "request_id": request_id, "s3_code": s3_code}
        details: dict[str, Any] = {name: value for name, value in found.items() if value is not None}
        super().__init__(message, details=details)
        self.key = key
        self.bucket = bucket
        self.status = status
        self.request_id = request_id
        self.s3_code = s3_code

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later without anyone changing the store."""
        if self.permanent is not None:
            return not self.permanent
        return self.status is None or self.status >= 500 or self.status in (408, 429)


class ObjectNotFound(ObjectStoreError):
    code = "object_not_found"


class BucketNotFound(ObjectStoreError):
    code = "bucket_not_found"
    permanent = True


class AccessDenied(ObjectStoreError):
    code = "access_denied"
    permanent = True


class KeyTooLong(ObjectStoreError):
    code = "key_too_long"
    permanent = True


class ObjectArchived(ObjectStoreError):
    """The object is in an archive tier (S3 ``InvalidObjectState``): it cannot be read until it is restored."""

    code = "object_archived"
    permanent = True


class PreconditionFailed(ObjectStoreError):
    """A conditional write (``put(if_absent=...)``, ``put(if_match=...)``) found the object other than it required:
    another writer got there first. Callers that write conditionally expect it and read what won."""

    code = "precondition_failed"
    permanent = True


class StoreUnavailable(ObjectStoreError):
    """The store did not answer (connection refused, timeout, throttling, 5xx) even after retries."""

    code = "store_unavailable"
    http_status = 503
    permanent = False


class InvalidKey(InvalidParameter):
    """A key that could escape its prefix or cannot be stored the same way on S3 and on a local folder."""

    code = "invalid_key"

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"invalid object key {key!r}: {reason}", details={"key": key, "reason": reason})
        self.key = key
        self.reason = reason


class ObjectTooLarge(ImageTooLarge):
    """The object is bigger than the caller's byte cap; raised before the object is read whole. ``head``: its first
    bytes (at most ``HEAD_BYTES``), so that the caller can say what kind of content it refused."""

    HEAD_BYTES = 64

    def __init__(self, key: str, *, size_bytes: int, max_bytes: int, head: bytes = b"") -> None:
        super().__init__(
            f"object {key!r} has {size_bytes} bytes, more than the limit of {max_bytes}",
            details={"key": key, "size_bytes": size_bytes, "max_bytes": max_bytes},
        )
        self.key = key
        self.size_bytes = size_bytes
        self.max_bytes = max_bytes
        self.head = head[: self.HEAD_BYTES]
