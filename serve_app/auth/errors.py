"""The errors of keys and limits (``deployments.common.errors`` holds the tree they hang from).

InputError
├── Unauthorized     401 unauthorized     no key, or a key that is not configured
├── Forbidden        403 forbidden        the key may not run this task, or this job is not the key's
├── RateLimited      429 rate_limited     over the key's rate_per_s/burst (Retry-After: when a token is back)
├── QuotaExceeded    429 quota_exceeded   the key's daily_quota is spent (Retry-After: the next UTC day)
└── NoKeys           404 not_found        /v1/usage on a service without keys
ServiceError
└── LimitsUnavailable 503 unavailable     the shared limits do not answer (restarting)
"""

from __future__ import annotations

from deployments.common.errors import InputError, StageUnavailable


class Unauthorized(InputError):
    code = "unauthorized"
    http_status = 401


class Forbidden(InputError):
    code = "forbidden"
    http_status = 403


class RateLimited(InputError):
    code = "rate_limited"
    http_status = 429


class QuotaExceeded(InputError):
    code = "quota_exceeded"
    http_status = 429


class NoKeys(InputError):
    code = "not_found"
    http_status = 404


class LimitsUnavailable(StageUnavailable):
    """The ``KeyLimits`` actor is restarting: no request passes unchecked, and a retry soon succeeds."""
