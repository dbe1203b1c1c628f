"""The architecture, enforced: imports run ``serve_app`` → ``deployments`` → ``storage``, Ray stays in ``deployment.py``
modules and the Serve edge, the ingress stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_ALLOWED = {"deployment.py"}
# The Serve edge: the only serve_app modules that may import Ray. Routes, jobs and the bucket core stay testable
# without a cluster.
SERVE_EDGE = {"app.py", "ingress.py", "handles.py", "deployment.py"}
# What each top-level package may import of ours: never a package above it. The one exception is the error tree
# (``deployments.common.errors``), the vocabulary every layer reports in, so store errors keep their codes end to end.
ALLOWED_OURS = {
    "serve_app": {"serve_app", "deployments", "storage"},
    "deployments": {"deployments", "storage"},
    "storage": {"storage"},
}
SHARED_ERROR_TREE = "deployments.common.errors"


def _imported_modules(path: Path, *, skip: str = "") -> set[str]:
    """Top-level packages ``path`` imports (``skip``: one dotted module to leave out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names if alias.name != skip)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module != skip:
            names.add(node.module.split(".")[0])
    return names


def test_imports_run_one_way():
    offenders = [
        f"{path.relative_to(REPO_ROOT)} imports {sorted(ours - ALLOWED_OURS[package])}"
        for package in ALLOWED_OURS
        for path in (REPO_ROOT / package).rglob("*.py")
        if (ours := _imported_modules(path, skip=SHARED_ERROR_TREE) & set(ALLOWED_OURS)) - ALLOWED_OURS[package]
    ]
    assert offenders == []


def test_ray_is_imported_only_by_deployment_modules():
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for folder in ("deployments", "storage")
        for path in (REPO_ROOT / folder).rglob("*.py")
        if path.name not in RAY_ALLOWED and "ray" in _imported_modules(path)
    ]
    assert offenders == []


def test_serve_app_keeps_ray_at_its_edge():
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "serve_app").rglob("*.py")
        if path.name not in SERVE_EDGE and "ray" in _imported_modules(path)
    ]
    assert offenders == []


def test_the_ingress_does_not_import_torch():
    code = "import sys, serve_app.ingress; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False"
