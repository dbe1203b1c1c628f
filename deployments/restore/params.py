"""Options of the restoration job (HTTP form/JSON, bucket metadata, CLI)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field, field_validator, model_validator

from deployments.common.errors import ModelUnavailable
from deployments.common.params import JobParams
from deployments.common.settings import get_model_settings
from deployments.common.stage import StageContext
from deployments.common.weights import ModelSpec, load_manifest
from deployments.restore.architecture import declared_traits

FACE_RESTORATION = "face_restoration"  # the manifest task of a face restorer


def restorer_specs(manifest: Mapping[str, ModelSpec]) -> list[ModelSpec]:
    """The manifest's face restorers, in its order: the order of preference."""
    return [spec for spec in manifest.values() if spec.task == FACE_RESTORATION]


def restorer_deployment(spec: ModelSpec) -> str:
    """The Serve deployment that runs the restorer ``spec`` (its ``deployment`` in the manifest)."""
    if spec.deployment is None:
        raise ModelUnavailable(f"the face restorer {spec.name!r} names no deployment in the manifest")
    return spec.deployment


def restore_template(manifest: Mapping[str, ModelSpec], model: str) -> str:
    """The alignment template the restorer of ``model`` expects (the manifest's ``args.template``: ``gpen-512``...)."""
    return str(manifest[model].args["template"])


def restorer_bindings(context: StageContext) -> dict[str, tuple[str]]:
    """The ``FaceRestorer`` stage's bindings: one deployment per restoration model, in the app's order of preference."""
    return {restorer_deployment(context.manifest[model]): (model,) for model in context.restore_models}


def deployed_restorers(manifest: Mapping[str, ModelSpec], deployments: Iterable[str]) -> tuple[str, ...]:
    """The restorers among ``deployments`` (names of deployed stages, in the app's order of preference)."""
    by_deployment = {spec.deployment: spec.name for spec in restorer_specs(manifest)}
    return tuple(by_deployment[name] for name in deployments if name in by_deployment)


# Every restorer the service offers (the ``model`` option's choices), read from the manifest once, at import: a
# restorer added there is offered with no code change. Which of them run is the Serve YAML's ``args.restore_models``.
_RESTORERS = restorer_specs(load_manifest(get_model_settings().models_manifest))
RESTORE_MODELS = tuple(spec.name for spec in _RESTORERS)
# The restorers that read ``fidelity``: their architecture says so (``Architecture.takes_fidelity``, CodeFormer's w).
FIDELITY_MODELS = tuple(spec.name for spec in _RESTORERS if declared_traits(spec).get("takes_fidelity", False))
CODEFORMER_DEFAULT_FIDELITY = 0.5  # the official inference_codeformer.py default (-w 0.5)


class RestoreParams(JobParams):
    model: Literal[RESTORE_MODELS] | None = Field(
        None, description="restoration model; default: the first deployed model whose weights are present"
    )
    fidelity: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description=f"{', '.join(FIDELITY_MODELS)} only: 0 = most enhancement, 1 = most faithful to the input "
        f"(default {CODEFORMER_DEFAULT_FIDELITY})",
    )
    upscale: Literal[1, 2, 4] = Field(1, description="whole-image upscale factor")
    bg_upsampler: Literal["realesrgan", "lanczos"] | None = Field(
        None, description="how the photo around the faces is upscaled; default realesrgan when its weights are present"
    )
    max_faces: int = Field(32, ge=1, le=64, description="restore at most this many faces, largest first")
    min_identity: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="refuse (422 identity_changed) a result whose face's similarity to the input face is below this, "
        "on the identity judge's scale (each face's identity is reported either way)",
    )
    only_center_face: bool = Field(False, description="restore only the face nearest the image centre")
    blend: float = Field(1.0, ge=0.0, le=1.0, description="0 keeps the original face, 1 the restored one")
    format: Literal["auto", "jpeg", "png", "webp"] = Field("auto", description="auto: JPEG for JPEG input, else PNG")
    colorize: Literal["auto", "true", "false"] = Field(
        "false",
        description="colorize the restored photo with DDColor: true, or auto = only a black-and-white (gray or toned) "
        "photo; without DDColor's weights auto leaves it as it is and says so, true is a 503",
    )

    @field_validator("colorize", mode="before")
    @classmethod
    def _colorize_words(cls, value: object) -> object:
        """JSON booleans mean "true"/"false"."""
        return str(value).lower() if isinstance(value, bool) else value

    @field_validator("upscale", mode="before")
    @classmethod
    def _form_digits(cls, value: object) -> object:
        """Form fields arrive as text: accept "2" for 2."""
        return int(value) if isinstance(value, str) and value.strip().isdigit() else value

    @classmethod
    def options_of_model(cls, model: str) -> tuple[str, ...]:
        """``fidelity`` for a restorer whose architecture reads it."""
        return ("fidelity",) if model in FIDELITY_MODELS else ()

    @model_validator(mode="after")
    def _fidelity_is_for_the_models_that_read_it(self) -> RestoreParams:
        if self.fidelity is not None and self.model is not None and "fidelity" not in self.options_of_model(self.model):
            raise ValueError(f"fidelity applies to model {' or '.join(FIDELITY_MODELS)} only, not {self.model}")
        return self

    def fidelity_for(self, model: str) -> float:
        """The fidelity weight a restorer of ``model`` gets (only the ``FIDELITY_MODELS`` read it)."""
        if self.fidelity is not None and model in FIDELITY_MODELS:
            return self.fidelity
        return CODEFORMER_DEFAULT_FIDELITY
