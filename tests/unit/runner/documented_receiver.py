"""The receiver's check of docs/buckets-and-jobs.md ("Callbacks"), run as written: tests hold the docs to the code."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
MARKER = "A receiver checks the signature"


def documented_verifier() -> Callable[[bytes, str, bytes, str, str], bool]:
    """``verified(secret, header, body, my_url, my_key_id)`` as the docs write it."""
    text = (REPO_ROOT / "docs" / "buckets-and-jobs.md").read_text(encoding="utf-8")
    block = text.split(MARKER, 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(textwrap.dedent(block), namespace)  # noqa: S102 (our own docs)
    return namespace["verified"]
