"""The house style (``[tool.ruff]`` in pyproject.toml) holds for the whole tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CODE = ["serve_app", "deployments", "storage", "tests", "bench"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, *CODE], cwd=REPO_ROOT, capture_output=True, text=True)


def test_lint_is_clean():
    result = _ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout[-3000:]


def test_code_is_formatted():
    result = _ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout[-3000:]
