"""API keys as configured (``args.auth`` in the Serve YAML, or a file or mounted secret), and how a request's key is
found. Only the sha256 of a key is configured: the key itself is shown once, by ``portrait keys create``.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from deployments.common.errors import InvalidParameter
from serve_app.secret_sources import ENV_NAME_PATTERN, read_secret, warn_inline

KEY_PREFIX = "pk_"
ANONYMOUS = "anonymous"  # the owner of jobs and the metric label when no keys are configured
KEY_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ApiKeyIn(BaseModel):
    """One key as configured; every limit is optional (absent: unlimited, every task)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=KEY_ID_PATTERN, description="a name for the customer; labels metrics and owns jobs")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="hex sha256 of the key (portrait keys create)")
    rate_per_s: float | None = Field(None, gt=0, description="sustained requests per second")
    burst: int | None = Field(None, ge=1, description="requests allowed at once (default: ceil(rate_per_s))")
    daily_quota: int | None = Field(None, ge=0, description="jobs per UTC day (POSTs that submit work)")
    tasks: tuple[str, ...] | None = Field(None, description="jobs the key may run (absent: every job)")
    callback_secret: SecretStr | None = Field(
        None, description="signs this key's job callbacks (in keys_file; inline in args.auth.keys Ray logs it)"
    )
    callback_secret_env: str | None = Field(
        None, pattern=ENV_NAME_PATTERN, description="the environment variable holding this key's callback secret"
    )
    callback_secret_file: str | None = Field(None, description="a file holding this key's callback secret")

    def signing_secret(self) -> SecretStr | None:
        """This key's callback secret from where it is given (one place), read now, in this process."""
        return read_secret(
            f"the callback secret of key {self.id!r}",
            inline=self.callback_secret,
            env=self.callback_secret_env,
            env_required=True,
            file=self.callback_secret_file,
        )


class AuthConfig(BaseModel):
    """``args.auth``: keys inline, or in a YAML/JSON file (a Kubernetes secret mounted as a file), or both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: tuple[ApiKeyIn, ...] = ()
    keys_file: Path | None = None

    @model_validator(mode="after")
    def _warn_inline_secrets(self) -> AuthConfig:
        inline = [key.id for key in self.keys if key.callback_secret is not None]
        if inline:
            warn_inline(
                f"the callback_secret of args.auth.keys {inline}",
                "callback_secret_env or callback_secret_file, or the key's entry in args.auth.keys_file",
            )
        return self


@dataclass(frozen=True)
class ApiKey:
    """A configured key, as requests see it."""

    id: str
    rate_per_s: float | None = None
    burst: int | None = None
    daily_quota: int | None = None
    tasks: frozenset[str] | None = None
    callback_secret: SecretStr | None = field(default=None, repr=False)

    @property
    def bucket_size(self) -> float:
        """How many requests may come at once: ``burst``, else one second's worth of the rate."""
        return float(self.burst or max(1, math.ceil(self.rate_per_s or 1)))

    def may_run(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


class KeyRing:
    """Configured keys by the sha256 of the key: a lookup never compares the secret itself."""

    def __init__(self, keys: Iterable[ApiKeyIn]) -> None:
        self._by_hash: dict[str, ApiKey] = {}
        for spec in keys:
            if spec.sha256 in self._by_hash:
                raise InvalidParameter(f"args.auth: key {spec.id!r} has the same sha256 as another key")
            if any(known.id == spec.id for known in self._by_hash.values()):
                raise InvalidParameter(f"args.auth: two keys are named {spec.id!r}")
            self._by_hash[spec.sha256] = ApiKey(
                id=spec.id,
                rate_per_s=spec.rate_per_s,
                burst=spec.burst,
                daily_quota=spec.daily_quota,
                tasks=frozenset(spec.tasks) if spec.tasks is not None else None,
                callback_secret=spec.signing_secret(),
            )

    def __len__(self) -> int:
        return len(self._by_hash)

    def find(self, token: str) -> ApiKey | None:
        return self._by_hash.get(hash_key(token))

    def by_id(self, key_id: str) -> ApiKey | None:
        return next((key for key in self._by_hash.values() if key.id == key_id), None)

    def check_tasks(self, known: Iterable[str]) -> None:
        """Refuse at start a key naming a task that does not exist (a typo would lock its owner out)."""
        names = set(known)
        for key in self._by_hash.values():
            unknown = sorted((key.tasks or frozenset()) - names)
            if unknown:
                raise InvalidParameter(
                    f"args.auth: key {key.id!r} names unknown tasks {unknown}; tasks: {sorted(names)}"
                )


def hash_key(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def load_keys(config: AuthConfig) -> KeyRing:
    """The inline keys plus those of ``keys_file`` (a YAML or JSON list, or ``{keys: [...]}``)."""
    specs = list(config.keys)
    if config.keys_file is not None:
        specs += _read_keys_file(config.keys_file)
    return KeyRing(specs)


def _read_keys_file(path: Path) -> list[ApiKeyIn]:
    try:
        loaded: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidParameter(f"args.auth.keys_file {path} cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise InvalidParameter(f"args.auth.keys_file {path} is not YAML or JSON: {exc}") from None
    entries = loaded.get("keys") if isinstance(loaded, Mapping) else loaded
    if not isinstance(entries, list):
        raise InvalidParameter(f"args.auth.keys_file {path}: expected a list of keys (or {{keys: [...]}})")
    try:
        return [ApiKeyIn.model_validate(entry) for entry in entries]
    except ValidationError as exc:
        raise InvalidParameter(f"args.auth.keys_file {path}: {exc}") from None
