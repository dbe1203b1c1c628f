"""Bucket events: uploads to a bucket or folder trigger the same jobs as HTTP; results land in another location.

- ``events``: notification bodies (MinIO webhook, AWS S3 records, SQS/SNS) → ``ObjectEvent`` records;
- ``routing``: routes as data (input → task + params → output) and the loop check;
- ``folders``: local-folder routes on a cluster (one absolute root, input folders that exist);
- ``records``: the result and error records written beside results (shared with the backfill CLI);
- ``runner``: the runner core (triggers: the webhook queue, reconcile/poll in chunks), no Ray;
- ``attempts``: one object to one record: every step classified (``outcomes``), retried, recorded;
- ``pending``: the bounded, deduplicated webhook queue and the per-name locks a reconfigure hands over;
- ``leases``: claims in the output, so two processes (a runner, ``portrait process``) never run one object twice;
- ``sqs``: the S3 → SQS consumer;
- ``deployment``: ``BucketRunner``, the only Ray code here.
"""
