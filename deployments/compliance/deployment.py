"""``ComplianceGate``: NudeNet on a CPU, batched over photos from any request, before any GPU stage runs on them. The
only Ray code of the gate (the language model's verdict and the rules are the job's: ``serve_app/jobs/compliance.py``).
"""

from __future__ import annotations

from ray import serve

from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.stage import BatchConfig, Stage
from deployments.compliance.predictor import CompliancePredictor, GateOptions
from deployments.compliance.types import COMPLIANCE_GATE, ComplianceVerdict, PhotoToCheck


@serve.deployment(name=COMPLIANCE_GATE)
class ComplianceGate(ModelReplica):
    stage = Stage(
        COMPLIANCE_GATE,
        BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.005),
        GateOptions,
        CompliancePredictor,
        batched=("check",),
    )

    @serve.batch(**stage.batch.model_dump())
    async def check(self, items: list[PhotoToCheck]) -> list[ComplianceVerdict | ItemFailure]:
        return await self.run_batch("check", items)
