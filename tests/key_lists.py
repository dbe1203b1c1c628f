"""Reading the committed official key/shape lists (``tests/data/<model>/*_keys.txt``) for layout tests."""

from __future__ import annotations

from pathlib import Path

import torch

KEY_LISTS = Path(__file__).resolve().parent / "data"

Layout = list[tuple[str, tuple[int, ...]]]


def read_key_list(path: Path) -> Layout:
    """``name<TAB>comma-separated dims`` per line (no dims for a scalar), in official ``state_dict()`` order; ``#``
    lines are comments."""
    entries = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        key, shape = line.split("\t")
        entries.append((key, tuple(int(dim) for dim in shape.split(",") if dim)))
    return entries


def layout(state: dict[str, torch.Tensor]) -> Layout:
    return [(key, tuple(value.shape)) for key, value in state.items()]
