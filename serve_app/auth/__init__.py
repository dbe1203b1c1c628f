"""API keys, their limits and who a request acts for (docs/operations.md "Keys and quotas"). No Ray outside
``deployment.py``."""

from serve_app.auth.caller import acting_as, caller_id, current_key, require_task
from serve_app.auth.guard import Gate, install_key_guard, shows_details, warn_when_open
from serve_app.auth.keys import ANONYMOUS, ApiKey, ApiKeyIn, AuthConfig, KeyRing, hash_key, load_keys, new_key
from serve_app.auth.limits import Decision, LimitBook, Limiter, LocalLimiter, Usage

__all__ = [
    "ANONYMOUS",
    "ApiKey",
    "ApiKeyIn",
    "AuthConfig",
    "Decision",
    "Gate",
    "KeyRing",
    "LimitBook",
    "Limiter",
    "LocalLimiter",
    "Usage",
    "acting_as",
    "caller_id",
    "current_key",
    "hash_key",
    "install_key_guard",
    "load_keys",
    "new_key",
    "require_task",
    "shows_details",
    "warn_when_open",
]
