"""The web page's routes and files, without a browser or Ray: ``GET /``, ``GET /static/...``, nothing external."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from serve_app.routes import create_api
from serve_app.webpage import WEB_DIR

REPO_ROOT = Path(__file__).resolve().parents[3]
WEB_FILES = ("index.html", "app.js", "style.css")


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_api())


def test_the_page_and_its_assets_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text):
        answer = client.get(asset)
        assert answer.status_code == 200, asset
    assert "javascript" in client.get("/static/app.js").headers["content-type"]
    assert client.get("/static/style.css").headers["content-type"].startswith("text/css")


def test_static_files_stay_inside_the_web_folder(client):
    assert client.get("/static/%2e%2e/routes.py").status_code == 404
    assert client.get("/static/..%2fwebpage.py").status_code == 404
    assert client.get("/static/missing.js").status_code == 404


def test_the_page_is_not_in_the_openapi_schema(client):
    assert "/" not in client.get("/openapi.json").json()["paths"]


def test_nothing_is_loaded_from_the_internet():
    for name in WEB_FILES:
        text = (WEB_DIR / name).read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE), name


def test_the_web_files_are_packaged():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["serve_app"]
    for name in WEB_FILES:
        assert any(Path("web", name).match(pattern) for pattern in patterns), name
