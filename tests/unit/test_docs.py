"""The docs say what the code is: the README is a short front door that links every page of ``docs/``, the API page
lists every route the app serves (and no other), and the architecture page's layout names every deployment folder
(and no other)."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.routing import APIRoute

from serve_app.routes import create_api

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs"
README_MAX_LINES = 220
# FastAPI's own pages: served beside the API, not part of it.
FASTAPI_PAGES = {"/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"}
# The first code span of a table row or a list item: `GET /v1/jobs/{job_id}`.
ROUTE_LINE = re.compile(r"^\s*(?:\|\s*|[-*]\s+)`(GET|POST|PUT|PATCH|DELETE) (/[^`\s]*)`")
LAYOUT_LINE = re.compile(r"^- `deployments/([^/`]+)/`: \S")
DOCS_LINK = re.compile(r"\]\((docs/[^)#\s]+\.md)(?:#[^)\s]*)?\)")


def section(path: Path, heading: str) -> list[str]:
    """The lines under ``## <heading>`` up to the next heading of level 1 or 2."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"## {heading}") + 1
    end = next((i for i in range(start, len(lines)) if re.match(r"#{1,2} ", lines[i])), len(lines))
    return lines[start:end]


def app_routes() -> set[str]:
    """``METHOD /path`` of every route of the app as the unit tests build it (HEAD and OPTIONS aside)."""
    app = create_api()
    try:
        from fastapi.routing import iter_route_contexts  # FastAPI that keeps included routers as one entry each
    except ImportError:  # FastAPI that copies an included router's routes into app.routes
        found = [(route, route.path, route.methods) for route in app.routes]
    else:
        found = [(context.original_route, context.path, context.methods) for context in iter_route_contexts(app.routes)]
    return {
        f"{method} {path}"
        for route, path, methods in found
        if isinstance(route, APIRoute) and path not in FASTAPI_PAGES
        for method in methods - {"HEAD", "OPTIONS"}
    }


def test_the_layout_doc_names_every_deployment_folder_and_no_other():
    named = [
        match.group(1) for line in section(DOCS / "architecture.md", "Layout") if (match := LAYOUT_LINE.match(line))
    ]
    folders = {path.name for path in (REPO_ROOT / "deployments").iterdir() if (path / "__init__.py").is_file()}
    assert len(named) == len(set(named)), f"named twice in docs/architecture.md: {sorted(named)}"
    assert set(named) == folders, (
        f"docs/architecture.md '## Layout' lacks {sorted(folders - set(named))} "
        f"and names {sorted(set(named) - folders)} that are not deployment folders"
    )


def test_the_api_doc_lists_every_route_of_the_app():
    listed = [
        " ".join(match.groups()) for line in section(DOCS / "api.md", "Routes") if (match := ROUTE_LINE.match(line))
    ]
    served = app_routes()
    assert len(listed) == len(set(listed)), f"listed twice in docs/api.md: {sorted(listed)}"
    assert not served - set(listed), (
        f"routes the app serves that docs/api.md '## Routes' lacks: {sorted(served - set(listed))}"
    )
    assert not set(listed) - served, (
        f"routes docs/api.md lists that the app does not serve: {sorted(set(listed) - served)}"
    )


def test_the_readme_is_a_front_door():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES, "the README is the front door: the rest belongs in docs/"
    linked = set(DOCS_LINK.findall(readme))
    broken = sorted(link for link in linked if not (REPO_ROOT / link).is_file())
    assert not broken, f"the README links docs that do not exist: {broken}"
    pages = {path.relative_to(REPO_ROOT).as_posix() for path in DOCS.glob("*.md")}
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"
