"""The hosted-service bench (README "Keys and quotas", "Asynchronous jobs"): ``python -m bench.hosted``."""
