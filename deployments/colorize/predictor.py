"""The colorization predictor a ``Colorizer`` replica holds: the DDColor networks of the manifest's colorization
models, each loaded from the store on its first request and kept.

No non-neural colouring exists: a model whose weights are absent is a 503 ``model_unavailable`` naming the command
that fetches them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import numpy as np
import torch

from deployments.colorize.ddcolor import DDColor, load_ddcolor
from deployments.colorize.params import MAX_SIZE_PX, colorizer_models
from deployments.colorize.pipeline import INPUT_MULTIPLE_PX
from deployments.colorize.types import PhotoToColorize, PredictedColor
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.torch_device import TorchOptions, autocast, autocast_dtype, pick_device
from deployments.common.weights import ModelStore, fix_command

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ColorizerOptions(TorchOptions):
    """``device`` and ``autocast_dtype`` (``TorchOptions``)."""


class ColorizationPredictor:
    """``predict`` runs one forward pass per (model, input size) group of a batch."""

    def __init__(self, store: ModelStore, options: ColorizerOptions = ColorizerOptions()) -> None:
        self.store = store
        self.options = options
        self.device = pick_device(options.device)
        self.models = colorizer_models(store.manifest)
        self._loaded: dict[str, tuple[DDColor, EngineInfo]] = {}

    def admit(self, job: PhotoToColorize) -> None:
        """Refuse what the network must not run: an unknown model, or an input not 3×S×S float32 with S a multiple
        of 32 up to ``MAX_SIZE_PX`` (the job builds it, so a refusal here is a wrong caller)."""
        if job.model not in self.models:
            raise InvalidParameter(f"unknown colorization model {job.model!r}; models: {', '.join(self.models)}")
        shape, side = job.gray.shape, job.gray.shape[-1]
        if len(shape) != 3 or shape[0] != 3 or shape[1] != side or side % INPUT_MULTIPLE_PX or side > MAX_SIZE_PX:
            raise InvalidParameter(
                f"a colorizer input is 3×S×S with S a multiple of {INPUT_MULTIPLE_PX} up to {MAX_SIZE_PX}, got {shape}"
            )

    def probe(self) -> None:
        """Nothing to run: models load on first use (a replica without weights still answers the 503)."""

    def health(self) -> dict[str, Any]:
        models = [self.store.status(name) for name in self.models]
        usable = [status.spec.name for status in models if status.usable]
        return {
            "status": "ok" if usable else "degraded",
            "engine": "ddcolor" if usable else "none",
            "models": [status.to_json() for status in models],
        }

    def default_model(self) -> str:
        """The first colorization model (manifest order) whose weights are present; the first of all when none is
        (a request then gets the 503 naming the command that fetches it)."""
        present = [name for name in self.models if self.store.status(name).usable]
        return (present or self.models)[0]

    def predict(self, jobs: Sequence[PhotoToColorize]) -> list[PredictedColor]:
        results: dict[int, PredictedColor] = {}

        def group_key(index: int) -> tuple[str, int]:
            return jobs[index].model, jobs[index].gray.shape[-1]

        for (model, _), members in groupby(sorted(range(len(jobs)), key=group_key), key=group_key):
            indices = list(members)
            network, info = self._network(model)
            batch = torch.from_numpy(np.stack([jobs[index].gray for index in indices])).to(self.device)
            with torch.inference_mode(), autocast(autocast_dtype(self.options.autocast_dtype, self.device)):
                ab = network(batch).float().cpu().numpy()
            for index, item in zip(indices, ab):
                results[index] = PredictedColor(np.ascontiguousarray(item), info)
        return [results[index] for index in range(len(jobs))]

    def _network(self, model: str) -> tuple[DDColor, EngineInfo]:
        if model not in self._loaded:
            path = self.store.find(model)
            if path is None:
                raise ModelUnavailable(
                    f"the colorization model {model} has no weights in the model store; fetch them with: "
                    f"{fix_command([model])}",
                    details={"missing_models": [model], "fix": fix_command([model])},
                )
            variant = self.store.spec(model).args.get("variant")
            network = load_ddcolor(path, variant).to(self.device)
            self._loaded[model] = network, EngineInfo.from_weights(self.store.status(model))
            logger.info("%s loaded on %s", model, self.device)
        return self._loaded[model]
