"""Notification bodies as MinIO and AWS send them, for the bucket tests."""

from __future__ import annotations


def s3_record(bucket: str, raw_key: str, *, name: str = "ObjectCreated:Put", source: str = "aws:s3", **obj) -> dict:
    return {
        "eventVersion": "2.1",
        "eventSource": source,
        "eventTime": "2026-11-30T10:00:00.123Z",
        "eventName": name,
        "s3": {"bucket": {"name": bucket}, "object": {"key": raw_key, "size": 1234, "eTag": "abc123", **obj}},
    }


def minio_body(bucket: str, raw_key: str, *, name: str = "s3:ObjectCreated:Put") -> dict:
    record = s3_record(bucket, raw_key, name=name, source="minio:s3", versionId="v1", userMetadata={})
    return {"EventName": name, "Key": f"{bucket}/{raw_key}", "Records": [record]}
