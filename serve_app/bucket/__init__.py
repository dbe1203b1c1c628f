"""Bucket events: uploads to a bucket or folder trigger the same jobs as HTTP; results land in another location.

- ``events``: notification bodies (MinIO webhook, AWS S3 records, SQS/SNS) → ``ObjectEvent`` records;
- ``routing``: routes as data (input → task + params → output) and the loop check;
- ``folders``: local-folder routes on a cluster (one absolute root, input folders that exist);
- ``records``: the result and error records written beside results (shared with the backfill CLI);
- ``runner``: the runner core (idempotency, retries, reconcile/poll, SQS consumer), no Ray;
- ``deployment``: ``BucketRunner``, the only Ray code here.
"""
