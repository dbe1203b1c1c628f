"""The hosted-service bench (docs/operations.md "Keys and quotas", docs/buckets-and-jobs.md):
``python -m bench.hosted``."""
