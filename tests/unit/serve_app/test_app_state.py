"""What the routes read from ``app.state`` goes through the typed accessors of ``serve_app/app_state.py`` (one
place names each attribute and its type), never a bare ``getattr(request.app.state, ...)`` in a route module."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from serve_app.app_state import gate_of, instructions_of
from serve_app.instructions import InstructionsConfig
from serve_app.routes import create_api

SERVE_APP = Path(__file__).resolve().parents[3] / "serve_app"
# Still read where they are used, until the runner's routes move behind accessors too.
NOT_YET = {"event_sink", "jobs"}


def _is_app_state(node: ast.AST) -> bool:
    """``request.app.state``, ``scope["app"].state``, ``app.state`` or ``api.state``."""
    if not (isinstance(node, ast.Attribute) and node.attr == "state"):
        return False
    owner = node.value
    return (
        (isinstance(owner, ast.Attribute) and owner.attr == "app")
        or (isinstance(owner, ast.Subscript) and isinstance(owner.slice, ast.Constant) and owner.slice.value == "app")
        or (isinstance(owner, ast.Name) and owner.id in {"app", "api"})
    )


def _state_reads(path: Path) -> set[str]:
    """The ``app.state`` attributes ``path`` reads: ``getattr(<app>.state, "name", ...)`` or ``<app>.state.name``."""
    read: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if _is_app_state(node.args[0]) and isinstance(node.args[1], ast.Constant):
                read.add(node.args[1].value)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _is_app_state(node.value):
            read.add(node.attr)
    return read


def test_the_app_state_is_read_only_through_app_state_py():
    offenders = {
        str(path.relative_to(SERVE_APP)): sorted(reads - NOT_YET)
        for path in SERVE_APP.rglob("*.py")
        if path.name != "app_state.py" and (reads := _state_reads(path)) - NOT_YET
    }
    assert offenders == {}


def test_the_checker_sees_the_reads_it_forbids(tmp_path):
    module = tmp_path / "route.py"
    module.write_text(
        'gate = getattr(request.app.state, "gate", None)\nx = scope["app"].state.backend\napi.state.jobs = None\n'
    )
    assert _state_reads(module) == {"gate", "backend"}  # a write (the ingress attaching) is no read


def test_a_fresh_api_has_the_default_instructions_and_no_gate():
    api = create_api()
    assert gate_of(api) is None
    assert instructions_of(SimpleNamespace(app=api)) == InstructionsConfig()
