"""The predictor a cartoon replica holds: every style's DCT-Net graph of one kind (head or whole image) that the store
has, and the classic engine for whole images of styles without weights.

Jobs arrive as RGB (the image contract) and are converted to BGR here, at the model's edge (the official graphs take
BGR). A batch may mix styles and sizes: items are grouped by (style, shape) and each group is one forward pass.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from deployments.cartoon.classic import cartoonize_classic
from deployments.cartoon.dctnet import DctNet, load_dctnet
from deployments.cartoon.styles import CartoonStyle
from deployments.cartoon.types import ImageToStylize, ModelKind, Stylized
from deployments.common.admission import DCTNET_INPUT
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter
from deployments.common.image import PROBE_IMAGE, require_image
from deployments.common.torch_device import pick_device
from deployments.common.weights import ModelStore

logger = logging.getLogger(__name__)

CLASSIC = EngineInfo(engine="classic-cartoon", neural=False)
NO_HEAD_MODEL = EngineInfo(engine="none", neural=False)


class CartoonPredictor:
    def __init__(self, kind: ModelKind, styles: Mapping[str, CartoonStyle], store: ModelStore, device: str = "auto"):
        self.kind = kind
        self._store = store
        self._style_models = {
            name: (style.head_model if kind == "head" else style.background_model) for name, style in styles.items()
        }
        self.device = pick_device(device)
        self._models: dict[str, tuple[DctNet, EngineInfo] | None] = {}
        for name, style in styles.items():
            model_name = style.head_model if kind == "head" else style.background_model
            path = store.find(model_name) if model_name else None
            if path is None:
                fallback = "classic engine" if kind == "background" else "no head pass"
                logger.warning("style %s has no %s weights: %s", name, kind, fallback)
                self._models[name] = None
                continue
            info = EngineInfo.from_weights(store.status(model_name))
            self._models[name] = (load_dctnet(path).to(self.device), info)

    @property
    def styles(self) -> list[str]:
        return list(self._models)

    def engine_for(self, style: str) -> EngineInfo:
        loaded = self._model(style)
        if loaded is not None:
            return loaded[1]
        return CLASSIC if self.kind == "background" else NO_HEAD_MODEL

    def probe(self) -> None:
        """Every loaded style runs a 16x16 forward pass."""
        self.stylize([ImageToStylize(style, PROBE_IMAGE) for style in self.styles])

    def health(self) -> dict[str, Any]:
        engines = {style: self.engine_for(style).to_json() for style in self.styles}
        neural = any(info["neural"] for info in engines.values())
        return {
            "status": "ok" if neural else "degraded",
            "kind": self.kind,
            "engine": "dctnet" if neural else ("classic-cartoon" if self.kind == "background" else "none"),
            "styles": engines,
            "models": [self._store.status(name).to_json() for name in self._style_models.values() if name],
        }

    def admit(self, job: ImageToStylize) -> None:
        """Refuse a job this stage must not run (``admission``): not the image contract, over DCT-Net's input cap
        (``compose.prepare_background`` brings whole photos within it), or a style this replica does not know."""
        require_image(job.image, what="image to stylize")
        DCTNET_INPUT.admit_image(job.image)
        self._model(job.style)

    def stylize(self, jobs: Sequence[ImageToStylize]) -> list[Stylized]:
        results: list[Stylized | None] = [None] * len(jobs)
        groups: dict[tuple[str, tuple[int, ...]], list[int]] = defaultdict(list)
        for index, job in enumerate(jobs):
            groups[(job.style, job.image.shape)].append(index)
        for (style, _), indices in groups.items():
            for index, image in zip(indices, self._run(style, [jobs[i].image for i in indices])):
                results[index] = Stylized(image=image, engine=self.engine_for(style))
        return results

    def _run(self, style: str, images_rgb: list[np.ndarray]) -> list[np.ndarray | None]:
        loaded = self._model(style)
        if loaded is None:
            if self.kind == "head":
                return [None] * len(images_rgb)
            return [cartoonize_classic(image) for image in images_rgb]
        model, _ = loaded
        batch_bgr = torch.from_numpy(np.stack(images_rgb)[..., ::-1].copy()).permute(0, 3, 1, 2)
        out_bgr = model.forward_batch(batch_bgr.to(self.device, torch.float32))
        out_rgb = out_bgr.permute(0, 2, 3, 1).flip(-1).cpu().numpy()
        return [np.ascontiguousarray(image) for image in out_rgb]

    def _model(self, style: str) -> tuple[DctNet, EngineInfo] | None:
        if style not in self._models:
            raise InvalidParameter(f"unknown style {style!r}; styles: {', '.join(self._models)}")
        return self._models[style]
