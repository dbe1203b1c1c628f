"""Folder entries of the manifest (diffusers repositories, file by file) and the ``generative`` group: fetched by
``portrait models pull --group generative``, never by ``--default``, ``--all`` or ``make run``."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from deployments.common.download import pull
from deployments.common.errors import InvalidParameter
from deployments.common.weights import ModelState, ModelStore, default_models, group_models, load_manifest
from serve_app.cli import _pull_selection, build_parser
from tests.conftest import REPO_ROOT

GENERATIVE = [
    "sdxl-base-1.0",
    "sdxl-instructpix2pix-768",
    "flux2-klein-4b",
    "controlnet-openpose-sdxl",
    "controlnet-canny-sdxl",
    "ip-adapter-plus-face-sdxl",
]


@pytest.fixture(scope="module")
def manifest():
    return load_manifest(REPO_ROOT / "configs" / "models.yaml")


def test_the_generative_group_is_fetched_only_when_asked(manifest):
    assert group_models(manifest, "generative") == GENERATIVE
    parser = build_parser()
    for argv, expected in (
        (["models", "pull", "--default"], False),
        (["models", "pull", "--all"], False),
        (["models", "pull", "--group", "generative"], True),
    ):
        selected = _pull_selection(manifest, parser.parse_args(argv))
        assert set(GENERATIVE) <= set(selected) if expected else not set(GENERATIVE) & set(selected)
    assert not set(GENERATIVE) & set(default_models(manifest))
    with pytest.raises(InvalidParameter, match="groups: generative"):
        _pull_selection(manifest, parser.parse_args(["models", "pull", "--group", "nope"]))


def test_sdxl_lists_the_official_layout_in_fp16(manifest):
    spec = manifest["sdxl-base-1.0"]
    paths = {part.file.removeprefix(spec.file + "/") for part in spec.parts}
    for component in ("text_encoder", "text_encoder_2", "unet", "vae"):
        assert f"{component}/config.json" in paths
        assert any(path.startswith(f"{component}/") and path.endswith(".fp16.safetensors") for path in paths)
    for tokenizer in ("tokenizer", "tokenizer_2"):
        assert {f"{tokenizer}/vocab.json", f"{tokenizer}/merges.txt"} <= paths
    assert {"model_index.json", "scheduler/scheduler_config.json"} <= paths
    assert spec.args["variant"] == "fp16" and spec.commercial_use and "RAIL++-M" in spec.license
    unet = next(part for part in spec.parts if part.file.endswith("unet/diffusion_pytorch_model.fp16.safetensors"))
    assert unet.url == (
        "https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0/resolve/main/"
        "unet/diffusion_pytorch_model.fp16.safetensors"
    )
    for name in GENERATIVE:
        assert manifest[name].is_folder and all(part.in_folder for part in manifest[name].parts)


def test_flux2_klein_lists_the_official_layout_under_its_apache_licence(manifest):
    spec = manifest["flux2-klein-4b"]
    paths = {part.file.removeprefix(spec.file + "/") for part in spec.parts}
    assert {"model_index.json", "scheduler/scheduler_config.json", "tokenizer/tokenizer.json"} <= paths
    for component in ("text_encoder", "transformer", "vae"):
        assert f"{component}/config.json" in paths
        assert any(path.startswith(f"{component}/") and path.endswith(".safetensors") for path in paths)
    assert (spec.task, spec.architecture, spec.args["side_px"]) == ("image_editing", "flux2-klein", 1024)
    assert spec.commercial_use and spec.license.startswith("Apache-2.0")
    assert spec.url == "https://huggingface.co/black-forest-labs/FLUX.2-klein-4B/resolve/main"


def _folder_manifest(tmp_path, files: dict[str, bytes], pins: bool):
    mirror = tmp_path / "mirror"
    for path, data in files.items():
        (mirror / "gen" / "repo" / path).parent.mkdir(parents=True, exist_ok=True)
        (mirror / "gen" / "repo" / path).write_bytes(data)
    entry = {
        "task": "image_generation",
        "architecture": "sdxl",
        "engine": "diffusers-sdxl",
        "file": "gen/repo",
        "url": "https://example.invalid/repo/resolve/main",
        "license": "Apache-2.0",
        "group": "generative",
        "files": [
            {
                "path": path,
                "sha256": hashlib.sha256(data).hexdigest() if pins else None,
                "size_bytes": len(data) if pins else None,
            }
            for path, data in files.items()
        ],
    }
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": {"repo": entry}}), encoding="utf-8")
    return mirror, load_manifest(tmp_path / "models.yaml")


def test_a_folder_entry_is_pulled_from_the_mirror_file_by_file(tmp_path):
    files = {"model_index.json": b"{}", "unet/config.json": b'{"a": 1}', "unet/w.safetensors": b"x" * 100}
    mirror, manifest = _folder_manifest(tmp_path, files, pins=True)
    store = ModelStore(tmp_path / "store", manifest)
    assert store.status("repo").state is ModelState.MISSING
    (outcome,) = pull(store, ["repo"], mirror=str(mirror))
    assert outcome.ok and outcome.status.state is ModelState.PRESENT
    assert outcome.source.location == f"{mirror}/gen/repo"
    assert (tmp_path / "store" / "gen/repo/unet/w.safetensors").read_bytes() == b"x" * 100
    (tmp_path / "store" / "gen/repo/unet/config.json").unlink()
    assert ModelStore(tmp_path / "store", manifest).status("repo").state is ModelState.MISSING
    (again,) = pull(ModelStore(tmp_path / "store", manifest), ["repo"], mirror=str(mirror))
    assert again.ok


def test_an_unpinned_folder_is_trusted_on_first_use_and_a_changed_file_refused(tmp_path):
    files = {"model_index.json": b"{}", "unet/w.safetensors": b"y" * 10}
    mirror, manifest = _folder_manifest(tmp_path, files, pins=False)
    store = ModelStore(tmp_path / "store", manifest)
    (outcome,) = pull(store, ["repo"], mirror=str(mirror))
    assert outcome.ok and outcome.status.state is ModelState.UNPINNED
    (mirror / "gen/repo/unet/w.safetensors").write_bytes(b"z" * 10)
    (again,) = pull(store, ["repo"], mirror=str(mirror), force=True)
    assert not again.ok and "1 of 2 files not fetched" in again.error.message
    assert "does not match the first download" in again.error.message


def test_a_file_missing_from_the_mirror_names_the_entry(tmp_path):
    mirror, manifest = _folder_manifest(tmp_path, {"model_index.json": b"{}", "vae/config.json": b"{}"}, pins=True)
    (mirror / "gen/repo/vae/config.json").unlink()
    (outcome,) = pull(ModelStore(tmp_path / "store", manifest), ["repo"], mirror=str(mirror))
    assert not outcome.ok and outcome.status.state is ModelState.MISSING
    assert "repo: 1 of 2 files not fetched" in outcome.error.message and "not in the mirror" in outcome.error.message
