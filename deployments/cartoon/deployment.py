"""``CartoonHead`` and ``CartoonBackground``: one class, bound twice (288 head crops / whole images), batched over
items from any request; a batch may mix styles and sizes (the predictor groups them). The only Ray code of this job."""

from __future__ import annotations

from ray import serve

from deployments.cartoon.predictor import CartoonPredictor
from deployments.cartoon.styles import cartoon_styles
from deployments.cartoon.types import CARTOON_DEPLOYMENTS, ImageToStylize, ModelKind, Stylized
from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.stage import BatchConfig, Stage
from deployments.common.torch_device import DeviceOptions
from deployments.common.weights import ModelStore


def cartoon_predictor(store: ModelStore, options: DeviceOptions, kind: ModelKind) -> CartoonPredictor:
    import torch  # here, not at module level: Serve pickles the deployment with its module's globals

    # A replica's process runs only DCT-Net, so the switch is ours to set: TF32 convolutions drift from the official
    # float32 graphs, and exactness is the point of the port.
    torch.backends.cudnn.allow_tf32 = False
    return CartoonPredictor(kind, cartoon_styles(store.manifest), store, options.device)


@serve.deployment(name="Cartoonizer")
class Cartoonizer(ModelReplica):
    stage = Stage(
        "Cartoonizer",
        BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.02),
        DeviceOptions,
        cartoon_predictor,
        batched=("stylize",),
        bindings=lambda context: {name: (kind,) for kind, name in CARTOON_DEPLOYMENTS.items()},
    )

    @serve.batch(**stage.batch.model_dump())
    async def stylize(self, items: list[ImageToStylize]) -> list[Stylized | ItemFailure]:
        return await self.run_batch("stylize", items)
