"""Data files of named entries (``configs/looks.yaml``, ``configs/portrait_styles.yaml``): one top-level key holding a
mapping of slug → fields, each entry validated by its pydantic model with its slug as ``name``."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from deployments.common.errors import InternalError

Entry = TypeVar("Entry", bound=BaseModel)


def load_named_entries(path: Path | str, key: str, model: type[Entry], what: str) -> dict[str, Entry]:
    """Every entry under ``key`` of ``path``, validated as ``model``; a malformed file (another top-level key, no
    entry, an entry off its model) is refused at start-up, naming the file and the reason (``what``: "look")."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or set(raw) != {key} or not isinstance(raw[key], dict):
            raise ValueError(f"it must hold one mapping, {key}: (name: fields)")
        if not raw[key]:
            raise ValueError(f"it defines no {what}")
        return {name: model.model_validate({"name": name, **entry}) for name, entry in raw[key].items()}
    except (OSError, yaml.YAMLError, ValidationError, ValueError, TypeError) as exc:
        raise InternalError(f"{what}s file {path} is malformed: {exc}", details={"file": str(path)}) from exc
