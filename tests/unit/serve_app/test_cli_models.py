"""``portrait models``: what --default fetches, what make run prints without network, and where files came from.

The CLI runs in-process against a manifest and a file server on 127.0.0.1 made here (no internet).
"""

from __future__ import annotations

import hashlib
import socket

import pytest
import yaml

from serve_app.cli import main
from tests.http_files import FileServer, Route

FREE = b"weights anyone may use" * 500
RESTRICTED = b"research-only weights" * 500


def _entry(name: str, data: bytes, url: str, *, commercial_use: bool) -> dict:
    return {
        "task": "face_restoration",
        "architecture": "gpen",
        "engine": name,
        "file": f"{name}/{name}.pth",
        "url": url,
        "license": "Apache-2.0" if commercial_use else "research only",
        "commercial_use": commercial_use,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size_bytes": len(data),
    }


@pytest.fixture()
def server():
    with FileServer().running() as files:
        files.routes["/official/free/free.pth"] = Route(FREE)
        files.routes["/official/restricted/restricted.pth"] = Route(RESTRICTED)
        yield files


@pytest.fixture()
def manifest_at(tmp_path, monkeypatch):
    """Write a manifest whose two models live under ``base_url`` and point the CLI's settings at it."""

    def write(base_url: str) -> None:
        models = {
            "free": _entry("free", FREE, f"{base_url}/free/free.pth", commercial_use=True),
            "restricted": _entry(
                "restricted", RESTRICTED, f"{base_url}/restricted/restricted.pth", commercial_use=False
            ),
        }
        manifest = tmp_path / "models.yaml"
        manifest.write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
        monkeypatch.setenv("PORTRAIT_MODELS_MANIFEST", str(manifest))
        monkeypatch.setenv("PORTRAIT_MODEL_STORE", str(tmp_path / "store"))
        monkeypatch.delenv("PORTRAIT_MODELS_MIRROR", raising=False)

    return write


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_make_run_without_network_prints_one_line_and_goes_on(manifest_at, capsys):
    port = _closed_port()
    manifest_at(f"http://127.0.0.1:{port}/official")

    code = main(["models", "pull", "--default", "--best-effort"])

    out, err = capsys.readouterr()
    assert code == 0 and out == ""
    assert err.splitlines() == [
        f"models: no network to 127.0.0.1:{port} (Connection refused); 1 model(s) not fetched (neural engines: "
        "free), so their jobs run on the non-neural fallbacks. Add them later with "
        "`portrait models pull --default` (or point PORTRAIT_MODELS_MIRROR at a mirror)."
    ]


def test_default_fetches_only_the_freely_licensed_models(manifest_at, server, tmp_path, capsys):
    manifest_at(server.url("/official"))

    code = main(["models", "pull", "--default"])

    out, _ = capsys.readouterr()
    assert code == 0
    assert out.split() == ["free", "present", str(tmp_path / "store" / "free" / "free.pth")]
    assert server.gets("/official/restricted/restricted.pth") == []


def test_a_mirror_setting_serves_every_model(manifest_at, server, tmp_path, monkeypatch, capsys):
    manifest_at(f"http://127.0.0.1:{_closed_port()}/official")
    server.routes["/mirror/free/free.pth"] = Route(FREE)
    monkeypatch.setenv("PORTRAIT_MODELS_MIRROR", server.url("/mirror"))

    code = main(["models", "pull", "--default", "--best-effort"])

    _, err = capsys.readouterr()
    assert code == 0 and (tmp_path / "store" / "free" / "free.pth").read_bytes() == FREE
    assert err.endswith(f"from {server.url('/mirror/free/free.pth')}\n")


def test_a_restricted_model_is_fetched_when_named_after_its_licence_is_shown(manifest_at, server, capsys):
    manifest_at(server.url("/official"))

    code = main(["models", "pull", "restricted"])

    _, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 0
    assert lines[0] == "restricted: licence: research only (not in --default: check it allows your use)"
    assert lines[1].startswith("restricted: 0.0 MB in ")


def test_a_failed_pull_exits_1_and_says_what_to_do_without_internet(manifest_at, server, capsys):
    manifest_at(server.url("/elsewhere"))

    code = main(["models", "pull", "free"])

    out, err = capsys.readouterr()
    assert code == 1
    assert f"free: HTTP 404 Not Found at {server.url('/elsewhere/free/free.pth')}" in out
    assert err.splitlines()[-1].startswith("without internet: set PORTRAIT_MODELS_MIRROR")


def test_list_sources_shows_where_each_file_came_from(manifest_at, server, tmp_path, capsys):
    manifest_at(server.url("/official"))
    main(["models", "pull", "free"])
    by_hand = tmp_path / "store" / "restricted" / "restricted.pth"
    by_hand.parent.mkdir(parents=True)
    by_hand.write_bytes(RESTRICTED)
    capsys.readouterr()

    code = main(["models", "list", "--sources"])

    out, _ = capsys.readouterr()
    free_row = next(line for line in out.splitlines() if line.startswith("free "))
    restricted_row = next(line for line in out.splitlines() if line.startswith("restricted "))
    assert code == 0
    assert free_row.split()[1:3] == ["present", "url"] and free_row.endswith(server.url("/official/free/free.pth"))
    assert restricted_row.split()[1:3] == ["present", "-"]
    assert restricted_row.endswith("no record (not fetched by pull)")
