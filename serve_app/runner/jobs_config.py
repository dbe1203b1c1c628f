"""``args.jobs``: where asynchronous jobs live, how long, how deep the queue is, how callbacks are signed and sent."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from deployments.common.errors import InvalidParameter
from serve_app.outbound import allow_list
from serve_app.secret_sources import read_secret, warn_inline
from storage.base import Location, StoreSettings, parse_location

DAY_S = 86_400
# The default store: a folder beside the folder routes of configs/local.yaml (``buckets/in``, ``buckets/out``), under
# PORTRAIT_BUCKETS_ROOT (else the working directory); ``buckets/`` is git-ignored.
DEFAULT_STORE = "buckets/jobs"
# The app's callback secret (signs the callbacks of keys without their own, and bucket routes'), read where it is used.
CALLBACK_SECRET_ENV = "PORTRAIT_CALLBACK_SECRET"


class JobsConfig(BaseModel):
    """The jobs API of the application (docs/buckets-and-jobs.md "Asynchronous jobs")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str = Field(
        DEFAULT_STORE,
        description="s3://bucket/prefix (a cluster), or a folder (relative: under PORTRAIT_BUCKETS_ROOT)",
    )
    s3: StoreSettings = Field(default_factory=StoreSettings, description="how to reach an s3:// store")
    input_store: str | None = Field(
        None, description="where JSON submissions may name their input (`input`: a key in it, or its s3:// URI)"
    )
    retention_s: int = Field(DAY_S, ge=1, le=90 * DAY_S, description="a job's input, result and record live this long")
    max_queued: int = Field(256, ge=1, le=100_000, description="accepted jobs not yet finished; beyond: 503")
    max_queued_per_key: int | None = Field(
        None, ge=1, description="of max_queued, what one key may hold (default with keys: a quarter); beyond: 503"
    )
    open_beyond_loopback: bool = Field(
        False, description="start the jobs API without keys on a host beyond loopback (a trusted network only)"
    )
    callback_secret: SecretStr | None = Field(
        None,
        description=f"inline, logged by Ray at import (a warning says so): use {CALLBACK_SECRET_ENV} or "
        "callback_secret_file. Signs the callbacks of keys without their own secret, and bucket routes'",
    )
    callback_secret_file: str | None = Field(
        None,
        description=f"a file holding the callback secret (a mounted secret), instead of {CALLBACK_SECRET_ENV}; read "
        "where the ingress and the bucket runner run",
    )
    callback_hosts: tuple[str, ...] = Field(
        (), description="hosts or CIDRs a callback may reach besides public addresses (e.g. 127.0.0.1, 10.0.0.0/8)"
    )
    callback_ca_file: str | None = Field(
        None,
        description="PEM file of CA certificates trusted for https callbacks besides the public roots (a receiver "
        "with a private or self-signed certificate); read where the bucket runner runs",
    )
    callback_retry_s: float = Field(3900.0, ge=3600, description="how long a failing callback is retried")
    callback_timeout_s: float = Field(
        10.0, gt=0, le=60, description="one attempt, all of it: resolving, connecting, TLS, sending, the answer status"
    )
    callback_concurrency: int = Field(
        16, ge=1, le=1024, description="callback POSTs at once in the runner (jobs' and bucket routes' together)"
    )
    callback_held_max: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="callbacks and job endings the runner holds in memory (sending, or waiting for their next try); "
        "beyond, they wait in the store and are taken up as the held ones end",
    )
    sweep_interval_s: float = Field(10.0, gt=0, le=3600, description="how often expired jobs are looked for")
    redirect_from_bytes: int | None = Field(
        None,
        ge=1,
        description="a result of at least this size is answered 307 to a presigned URL of the s3:// store, valid "
        "redirect_ttl_s, so the ingress never holds it for a slow client (clients must reach args.jobs.s3's endpoint)",
    )
    redirect_ttl_s: int = Field(300, ge=10, le=7 * DAY_S, description="how long a redirect's URL works (S3: ≤ 7 days)")

    @field_validator("callback_hosts")
    @classmethod
    def _hosts_or_networks(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        return allow_list(hosts)

    @model_validator(mode="after")
    def _warn_inline_secret(self) -> JobsConfig:
        if self.callback_secret is not None:
            warn_inline(
                "args.jobs.callback_secret",
                f"the environment variable {CALLBACK_SECRET_ENV} or a file named by args.jobs.callback_secret_file",
            )
        return self

    def signing_secret(self) -> SecretStr | None:
        """The app's callback secret: ``PORTRAIT_CALLBACK_SECRET``, ``callback_secret_file`` or (warned)
        ``callback_secret``, read now, in this process (``InvalidParameter`` when given twice or unreadable)."""
        return read_secret(
            "the callback secret (args.jobs)",
            inline=self.callback_secret,
            env=CALLBACK_SECRET_ENV,
            file=self.callback_secret_file,
        )

    @model_validator(mode="after")
    def _redirects_need_s3(self) -> JobsConfig:
        if self.redirect_from_bytes is not None and not self.store.startswith("s3://"):
            raise ValueError(f"redirect_from_bytes needs an s3:// store (presigned URLs), not {self.store!r}")
        return self

    @property
    def callback_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """The addresses and CIDRs of ``callback_hosts`` (the other entries are host names)."""
        networks = []
        for entry in self.callback_hosts:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                continue  # a host name
        return tuple(networks)

    def location(self, root: Path | None) -> Location:
        """The store's location; a relative folder resolves under ``root`` (the buckets root) or the working dir."""
        if "://" in self.store or self.store.startswith("file:") or root is None:
            return parse_location(self.store)
        return parse_location(os.path.join(root, os.path.expanduser(self.store)))


def require_shared_store(config: JobsConfig, root: Path | None, *, nodes: int) -> None:
    """On a cluster the ingress and the runner may run on different nodes: a folder store must be shared storage
    under ``PORTRAIT_BUCKETS_ROOT`` (or absolute), else each node would keep its own jobs."""
    store = config.store
    relative = "://" not in store and not store.startswith("file:") and not os.path.isabs(os.path.expanduser(store))
    if nodes > 1 and relative and root is None:
        raise InvalidParameter(
            f"args.jobs.store {store!r} is a relative folder on a cluster of {nodes} nodes, and PORTRAIT_BUCKETS_ROOT "
            "is not set: use s3:// (args.jobs.s3 for the connection) or a folder on storage every node mounts",
            details={"store": store, "nodes": nodes},
        )


def within(location: Location, *parts: str) -> str:
    """The URI of a folder inside ``location`` (what a bucket route's ``input``/``output`` takes)."""
    if location.scheme == "file":
        return os.path.join(location.bucket, *parts)
    prefix = "/".join(part for part in (location.prefix, *parts) if part)
    return f"s3://{location.bucket}/{prefix}"
