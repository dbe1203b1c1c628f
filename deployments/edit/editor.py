"""What every editor takes and gives, so the job runs any of them: a photo and what to do to it in, the edited photo
and the engine that edited it out. The LOOK engine (film looks, no model) is the in-process editor; an operator's
OpenAI-compatible ``/v1/images/edits`` endpoint is another, awaited over HTTP at the edge
(``serve_app/edit_endpoint.py``); an in-process neural editor (FLUX.2 klein, InstructPix2Pix) is a model stage whose
call takes ``PhotoToEdit`` items (the job then awaits ``backend.call``). The job's ``edit_photo`` picks one. The job
keeps what is around the editor whichever runs: the restore before, the face-scoped mask, the identity blend and the
identity judge after, and the refusal policy before anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.edit.looks import Look, apply_look

LOOK_ENGINE = EngineInfo(engine="look", neural=False)


@dataclass(frozen=True, eq=False)
class PhotoToEdit:
    """``rgb`` (HxWx3 uint8 RGB), the caller's words, the look they name (None: the words decide) and the seed."""

    rgb: np.ndarray
    prompt: str | None
    look: Look | None
    seed: int


@dataclass(frozen=True, eq=False)
class EditedPhoto:
    rgb: np.ndarray
    engine: EngineInfo


class Editor(Protocol):
    def edit(self, item: PhotoToEdit) -> EditedPhoto: ...


class LookEditor:
    """Film looks as data (``configs/looks.yaml``): colours, tone and grain, never the shapes of a face."""

    def edit(self, item: PhotoToEdit) -> EditedPhoto:
        if item.look is None:
            raise ValueError("the LOOK engine needs a look")  # the job resolves it first: a bug if not
        return EditedPhoto(apply_look(item.rgb, item.look, item.seed), LOOK_ENGINE)
