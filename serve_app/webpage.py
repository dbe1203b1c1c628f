"""The web page for people: ``GET /`` and ``GET /static/...``, read from ``serve_app/web/`` inside the package.

Plain HTML, CSS and JavaScript with no build step; nothing is loaded from outside this service.
"""

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

WEB_DIR = Path(__file__).resolve().parent / "web"
_NO_CACHE = {"Cache-Control": "no-cache"}


def install_web_page(api: FastAPI) -> None:
    """Add the page (``/``) and its assets (``/static``) to the API, outside the OpenAPI schema."""

    @api.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html", headers=_NO_CACHE)

    api.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
