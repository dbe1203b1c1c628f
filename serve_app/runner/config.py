"""The ``BucketRunner`` ``user_config``: routes, polling, concurrency, the job timeout, retries and SQS."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from serve_app.runner.outcomes import RetryPolicy
from serve_app.runner.routing import BucketRoute
from serve_app.runner.triggers.sqs import SqsConfig


class RunnerConfig(BaseModel):
    """The ``BucketRunner`` ``user_config``."""

    model_config = ConfigDict(extra="forbid")

    routes: list[BucketRoute] = Field(default_factory=list)
    poll_interval_s: float = Field(10.0, gt=0)
    max_concurrency: int = Field(4, ge=1, le=256)
    max_pending: int = Field(10_000, ge=1, le=1_000_000, description="queued webhook objects; past it: 503")
    scan_chunk: int = Field(256, ge=1, le=10_000, description="objects of a listing checked at a time")
    job_timeout_s: float = Field(300.0, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    sqs: SqsConfig | None = None

    @model_validator(mode="after")
    def _visibility_outlasts_a_job(self) -> RunnerConfig:
        if self.sqs is not None and self.sqs.visibility_timeout_s <= self.job_timeout_s:
            raise ValueError(
                f"sqs.visibility_timeout_s ({self.sqs.visibility_timeout_s}) must be longer than job_timeout_s "
                f"({self.job_timeout_s}), or messages reappear while their objects are processed"
            )
        return self
