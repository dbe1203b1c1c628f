"""Object stores: local folders and S3-compatible buckets behind one interface.

``S3Store`` lives in ``storage.s3`` and is not imported here, so code that only uses local folders never loads boto3;
``open_store`` picks the implementation from a location string.
"""

from storage.base import (
    Location,
    ObjectInfo,
    ObjectStore,
    StoredObject,
    StoreSettings,
    open_store,
    parse_location,
)
from storage.errors import (
    AccessDenied,
    BucketNotFound,
    InvalidKey,
    ObjectNotFound,
    ObjectStoreError,
    ObjectTooLarge,
    StoreUnavailable,
)
from storage.local import LocalStore

__all__ = [
    "AccessDenied",
    "BucketNotFound",
    "InvalidKey",
    "LocalStore",
    "Location",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "ObjectStoreError",
    "ObjectTooLarge",
    "StoreSettings",
    "StoreUnavailable",
    "StoredObject",
    "open_store",
    "parse_location",
]
