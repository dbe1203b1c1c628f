"""What every model deployment shares: batch tunables from ``user_config`` and a replica's health facts."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from deployments.common.errors import InvalidParameter
from serve_app.metrics import record_gpu_memory

T = TypeVar("T")


class BatchConfig(BaseModel):
    """The ``user_config`` of a batched deployment; ``reconfigure`` applies it without a restart."""

    model_config = ConfigDict(extra="forbid")

    max_batch_size: int = Field(4, ge=1, le=256)
    batch_wait_timeout_s: float = Field(0.01, ge=0.0, le=5.0)


def apply_batch_config(batched_method: Any, user_config: dict[str, Any] | None) -> tuple[BatchConfig, dict[str, Any]]:
    """Set a ``@serve.batch`` method's size and wait from ``user_config``; return the deployment's other keys."""
    options = dict(user_config or {})
    config = BatchConfig.model_validate({key: options.pop(key) for key in BatchConfig.model_fields if key in options})
    batched_method.set_max_batch_size(config.max_batch_size)
    batched_method.set_batch_wait_timeout_s(config.batch_wait_timeout_s)
    return config, options


def options_from(options_type: type[T], values: dict[str, Any], **fixed: Any) -> T:
    """Build a frozen options dataclass from ``user_config`` keys, naming the allowed keys when one is unknown."""
    allowed = {field.name for field in dataclasses.fields(options_type)} - set(fixed)
    unknown = set(values) - allowed
    if unknown:
        raise InvalidParameter(f"unknown user_config keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    return options_type(**values, **fixed)


def limit_cpu_threads(num_threads: int = 1) -> None:
    """One intra-op thread per replica: replicas, not threads, are how we use more cores (2-core boxes included)."""
    import cv2

    cv2.setNumThreads(num_threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(num_threads))


def torch_threads(num_threads: int = 1) -> None:
    """Torch replicas: one intra-op thread each (``limit_cpu_threads`` plus torch's own pool)."""
    import torch

    limit_cpu_threads(num_threads)
    torch.set_num_threads(num_threads)


def gpu_facts(stage: str) -> dict[str, Any]:
    """GPU memory this replica holds, when CUDA is present (``/healthz`` shows it; a gauge exports it)."""
    import torch

    if not torch.cuda.is_available():
        return {"device": "cpu"}
    record_gpu_memory(stage, torch.cuda.memory_allocated())
    return {
        "device": torch.cuda.get_device_name(),
        "gpu_memory_allocated_mib": round(torch.cuda.memory_allocated() / 2**20, 1),
        "gpu_memory_reserved_mib": round(torch.cuda.memory_reserved() / 2**20, 1),
        "gpu_memory_peak_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1),
    }


def replica_facts() -> dict[str, Any]:
    """Identity of the replica answering a health probe."""
    from ray import serve

    context = serve.get_replica_context()
    return {
        "replica": context.replica_tag if hasattr(context, "replica_tag") else str(context.replica_id),
        "pid": os.getpid(),
    }
