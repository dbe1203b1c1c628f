"""What the tests that talk HTTP share: an ASGI app served on 127.0.0.1 for a while (uvicorn in a thread), the page
in headless Chromium (Debian's ``chromium`` driven by Playwright; skipped without it), and the page's string tables."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu"]
STARTUP_TIMEOUT_S = 30


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``http://127.0.0.1:PORT``: ``app`` served while the block runs."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        raise RuntimeError("uvicorn did not start")
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def chromium() -> Iterator[Any]:
    """A headless Chromium for a module's tests (a fixture's body: ``yield from chromium()``); skipped without it."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def i18n_tables(web_dir: Path) -> dict[str, dict[str, str]]:
    """``I18N`` of the page's i18n.js: strict JSON after ``const I18N =``."""
    text = (web_dir / "i18n.js").read_text(encoding="utf-8")
    return json.loads(text.split("const I18N = ", 1)[1].rsplit(";", 1)[0])
