"""``IdentityJudge``: face embeddings, batched over faces from any request (CPU; a fractional GPU changes nothing
for dlib or OpenCV's SFace). The only Ray code of the judge; the verdict is ``verdict.compare``, in the caller."""

from __future__ import annotations

from ray import serve

from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.stage import BatchConfig, Stage
from deployments.identity.predictor import IdentityPredictor, JudgeOptions
from deployments.identity.types import IDENTITY_JUDGE, FaceEmbedding, FaceToJudge


@serve.deployment(name=IDENTITY_JUDGE)
class IdentityJudge(ModelReplica):
    stage = Stage(
        IDENTITY_JUDGE,
        BatchConfig(max_batch_size=16, batch_wait_timeout_s=0.005),
        JudgeOptions,
        IdentityPredictor,
        batched=("embed",),
    )

    @serve.batch(**stage.batch.model_dump())
    async def embed(self, faces: list[FaceToJudge]) -> list[FaceEmbedding | ItemFailure]:
        return await self.run_batch("embed", faces)
