"""What starts the runner's work besides its own polling (no Ray):

- ``events``: notification bodies (MinIO webhook, AWS S3 records, SQS/SNS) → ``ObjectEvent`` records;
- ``webhook``: ``POST /v1/events/s3`` (installed by the ingress), handing events to the runner;
- ``sqs``: the S3 → SQS consumer;
- ``minio_setup``: ``portrait buckets setup``: buckets, MinIO's webhook target and notification rules for the routes.
"""
