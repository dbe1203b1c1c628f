"""``portrait buckets setup``: make what a Serve YAML's bucket routes need on a MinIO (or other S3) server.

What ``infra/minio/setup.sh`` did by hand with ``mc``, through MinIO's own client library: the routes' input and
output buckets, the webhook target that sends events to ``POST /v1/events/s3`` (MinIO's admin API; MinIO only),
and one notification rule per route and suffix on each input bucket. Idempotent: run it again after editing routes.
Local-folder routes need nothing and are skipped.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from minio import Minio
from minio.credentials import StaticProvider
from minio.minioadmin import MinioAdmin
from minio.notificationconfig import NotificationConfig, PrefixFilterRule, QueueConfig, SuffixFilterRule

from deployments.common.errors import InvalidParameter
from serve_app.runner.routing import Route
from storage.base import StoreSettings

logger = logging.getLogger(__name__)

CREATED_EVENTS = ["s3:ObjectCreated:*"]
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class WebhookTarget:
    """MinIO's ``notify_webhook:<target_id>``: where it posts events, with the token the Serve app checks."""

    target_id: str
    endpoint: str
    auth_token: str
    queue_dir: str = "/events"  # undelivered events wait here and are replayed (at-least-once delivery)
    queue_limit: int = 10_000

    @property
    def arn(self) -> str:
        return f"arn:minio:sqs::{self.target_id}:webhook"


def notification_rules(routes: Iterable[Route], arn: str) -> dict[tuple[StoreSettings, str], NotificationConfig]:
    """One notification configuration per input bucket (S3 replaces a bucket's whole configuration at once)."""
    rules: dict[tuple[StoreSettings, str], list[QueueConfig]] = defaultdict(list)
    for route in routes:
        if route.input.scheme != "s3":
            continue
        for suffix in route.suffixes or ("",):
            rules[(route.store, route.input.bucket)].append(
                QueueConfig(
                    queue=arn,
                    events=CREATED_EVENTS,
                    config_id=f"portrait-{route.name}{suffix}",
                    prefix_filter_rule=PrefixFilterRule(f"{route.input.prefix}/") if route.input.prefix else None,
                    suffix_filter_rule=SuffixFilterRule(suffix) if suffix else None,
                )
            )
    return {where: NotificationConfig(queue_config_list=queues) for where, queues in rules.items()}


def minio_client(settings: StoreSettings) -> Minio:
    host, secure = _endpoint(settings)
    return Minio(
        host, access_key=settings.access_key, secret_key=settings.secret, secure=secure, region=settings.region
    )


def minio_admin(settings: StoreSettings) -> MinioAdmin:
    host, secure = _endpoint(settings)
    credentials = StaticProvider(settings.access_key or "", settings.secret or "")
    return MinioAdmin(endpoint=host, credentials=credentials, region=settings.region or "", secure=secure)


def setup_buckets(
    routes: Iterable[Route],
    *,
    webhook: WebhookTarget | None,
    arn: str | None = None,
    client_for: Callable[[StoreSettings], Minio] = minio_client,
    admin_for: Callable[[StoreSettings], MinioAdmin] = minio_admin,
) -> list[str]:
    """Buckets, then (with ``webhook``) MinIO's webhook target, then the notification rules; returns what was done.

    ``arn`` overrides the queue the rules name (an SQS queue on AWS, say); by default it is the webhook's.
    """
    routes = [route for route in routes if route.input.scheme == "s3" or route.output.scheme == "s3"]
    done: list[str] = []
    for store, bucket in sorted(
        {(r.store, loc.bucket) for r in routes for loc in (r.input, r.output) if loc.scheme == "s3"},
        key=lambda item: item[1],
    ):
        client = client_for(store)
        if client.bucket_exists(bucket):
            done.append(f"bucket {bucket}: exists")
        else:
            client.make_bucket(bucket)
            done.append(f"bucket {bucket}: created")
    if webhook is not None:
        for store in {route.store for route in routes}:
            admin = admin_for(store)
            admin.config_set(
                f"notify_webhook:{webhook.target_id}",
                {
                    "endpoint": webhook.endpoint,
                    "auth_token": webhook.auth_token,
                    "queue_dir": webhook.queue_dir,
                    "queue_limit": str(webhook.queue_limit),
                },
            )
            admin.service_restart()
            _wait_ready(client_for(store))
            done.append(f"webhook target {webhook.target_id} -> {webhook.endpoint}")
    queue_arn = arn or (webhook.arn if webhook else None)
    if queue_arn is None:
        raise InvalidParameter("name the notification target: a webhook endpoint, or --arn of an existing target")
    for (store, bucket), config in notification_rules(routes, queue_arn).items():
        client_for(store).set_bucket_notification(bucket, config)
        done.append(f"events {bucket}: {len(config.queue_config_list)} rules -> {queue_arn}")
    return done


def _endpoint(settings: StoreSettings) -> tuple[str, bool]:
    if not settings.endpoint_url:
        return "s3.amazonaws.com", True
    url = urllib.parse.urlsplit(settings.endpoint_url)
    if not url.netloc:
        raise InvalidParameter(f"endpoint_url must look like http://host:port, got {settings.endpoint_url!r}")
    return url.netloc, url.scheme == "https"


def _wait_ready(client: Minio) -> None:
    """Bounded wait for MinIO to answer again after its restart."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            client.list_buckets()
            return
        except Exception as exc:  # connection refused while it restarts: retry until the deadline, then raise
            if time.monotonic() > deadline:
                raise ConnectionError(f"MinIO did not come back within {READY_TIMEOUT_S:.0f} s") from exc
            time.sleep(1.0)
