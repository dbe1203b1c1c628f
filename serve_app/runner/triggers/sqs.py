"""S3 → SQS notifications for the bucket runner: long-poll one queue, delete a message only when it is done."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ConfigDict, Field

from deployments.common.errors import InvalidParameter
from serve_app.runner.outcomes import Status
from serve_app.runner.triggers.events import parse_notification
from serve_app.runner.worker import BucketWorker
from storage.base import StoreSettings

logger = logging.getLogger(__name__)


class SqsConfig(StoreSettings):
    """The runner's ``sqs`` section: the queue S3 notifies (``aws s3api put-bucket-notification-configuration``),
    plus how to reach SQS (the S3 connection fields: ``region``, ``endpoint_url``, keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queue_url: str
    wait_time_s: int = Field(20, ge=0, le=20, description="long polling: how long one receive waits for messages")
    visibility_timeout_s: int = Field(900, ge=1, le=43200, description="longer than a job: hidden while processed")
    max_messages: int = Field(10, ge=1, le=10)
    error_pause_s: float = Field(5.0, ge=0, description="pause after a failed receive")


class SqsConsumer:
    """Long-polls one queue; deletes a message only after every object it names has a result or error record."""

    def __init__(self, worker: BucketWorker, config: SqsConfig, client: Any = None) -> None:
        self._worker = worker
        self._config = config
        self._client = client if client is not None else sqs_client(config)
        self.deleted = 0
        self.kept = 0

    async def run_forever(self) -> None:
        while True:
            try:
                await self.receive_once()
            except Exception:
                logger.exception(
                    "SQS receive from %s failed; next try in %.0f s", self._config.queue_url, self._config.error_pause_s
                )
                await asyncio.sleep(self._config.error_pause_s)

    async def receive_once(self) -> int:
        """One long poll; returns how many messages were received."""
        reply = await asyncio.to_thread(
            self._client.receive_message,
            QueueUrl=self._config.queue_url,
            MaxNumberOfMessages=self._config.max_messages,
            WaitTimeSeconds=self._config.wait_time_s,
            VisibilityTimeout=self._config.visibility_timeout_s,
        )
        messages = reply.get("Messages", [])
        await asyncio.gather(*(self._handle(message) for message in messages))
        return len(messages)

    async def _handle(self, message: dict[str, Any]) -> None:
        try:
            events = parse_notification(message.get("Body", ""))
        except InvalidParameter as exc:
            # Not an S3 notification: nothing to process, and redelivering it would fail the same way forever.
            logger.error("deleting SQS message %s: %s", message.get("MessageId"), exc.message)
            await self._delete(message)
            return
        outcomes = [o for event in events for o in await self._worker.process_event(event)]
        if any(outcome.status is Status.DEFERRED for outcome in outcomes):
            self.kept += 1  # visible again after the visibility timeout; the reconciler may get there first
            return
        await self._delete(message)

    async def _delete(self, message: dict[str, Any]) -> None:
        await asyncio.to_thread(
            self._client.delete_message, QueueUrl=self._config.queue_url, ReceiptHandle=message["ReceiptHandle"]
        )
        self.deleted += 1


def sqs_client(config: SqsConfig) -> Any:
    import boto3

    return boto3.session.Session().client(
        "sqs",
        endpoint_url=config.endpoint_url,
        region_name=config.region,
        aws_access_key_id=config.access_key,
        aws_secret_access_key=config.secret,
    )
