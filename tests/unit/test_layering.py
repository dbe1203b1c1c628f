"""The architecture, enforced: imports run ``serve_app`` → ``deployments`` → ``storage``, and inside ``serve_app``
``jobs_api`` → ``runner``; Ray stays in ``deployment.py`` modules and the Serve edge, the ingress stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_ALLOWED = {"deployment.py"}
# The Serve edge: the only serve_app modules that may import Ray. Routes, jobs and the bucket core stay testable
# without a cluster.
SERVE_EDGE = {"app.py", "ingress.py", "handles.py", "stages.py", "deployment.py"}
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _run_time_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports for annotations only never run)."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return nodes


def _import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of ``packages`` and the modules of ours it imports when it runs: at its top or inside a function
    (not for annotations only, under ``TYPE_CHECKING``)."""
    paths = {_module_name(path): path for package in packages for path in (REPO_ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        imported: set[str] = set()
        for node in _run_time_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.update({node.module, *(f"{node.module}.{alias.name}" for alias in node.names)})
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[name] = (imported & set(paths)) - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def test_no_modules_import_each_other():
    """No import circle, not even through an import inside a function: a late import only defers a heavy dependency
    (torch where MTCNN runs), never hides a circle; what two modules share lives in a third both import
    (``deployments.faces.detection`` for ``detect``, ``confirm`` and ``mtcnn``)."""
    assert _cycles(_import_graph(("deployments", "serve_app"))) == []


def test_imports_run_one_way():
    offenders = [
        f"{path.relative_to(REPO_ROOT)} imports {sorted(ours - ALLOWED_OURS[package])}"
        for package in ALLOWED_OURS
        for path in (REPO_ROOT / package).rglob("*.py")
        if (ours := _imported_modules(path, skip=SHARED_ERROR_TREE) & set(ALLOWED_OURS)) - ALLOWED_OURS[package]
    ]
    assert offenders == []


def _imported_dotted(path: Path) -> set[str]:
    """Every absolute module ``path`` imports, dotted in full (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_runner_does_not_import_the_jobs_http_side():
    """``serve_app.jobs_api`` (the /v1/jobs routes, submission, service, download) runs on ``serve_app.runner``;
    the runner (worker, triggers, the jobs store and the jobs' half) never imports it back."""
    offenders = [
        f"{path.relative_to(REPO_ROOT)} imports {name}"
        for path in (REPO_ROOT / "serve_app" / "runner").rglob("*.py")
        for name in sorted(_imported_dotted(path))
        if name == "serve_app.jobs_api" or name.startswith("serve_app.jobs_api.")
    ]
    assert offenders == []


def test_the_bucket_runner_lives_in_one_package():
    """``serve_app/bucket`` became ``serve_app/runner``: no second home for the runner's modules."""
    assert not (REPO_ROOT / "serve_app" / "bucket").exists()
    assert (REPO_ROOT / "serve_app" / "runner" / "deployment.py").is_file()


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
