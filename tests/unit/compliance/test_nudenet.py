"""NudeNet's detector with our own pre- and post-processing: the same findings as the official package, and the
gate's rule (refused classes, score, the mirror's agreement) turned into a verdict. Refusals are tested with a
stand-in for the network's output, never with a photo of that kind."""

from __future__ import annotations

import numpy as np
import pytest

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.weights import ModelStore, load_manifest
from deployments.compliance import nudenet
from deployments.compliance.nudenet import INPUT_SIZE, NudeNetDetector, decode, network_input
from deployments.compliance.predictor import CompliancePredictor, GateOptions
from deployments.compliance.types import PhotoToCheck
from tests.conftest import REPO_ROOT, SHARED_DIR
from tests.unit.compliance.compliance_samples import CENTRE, eval_photos, skimage_portraits, stand_in_output

MANIFEST = load_manifest(REPO_ROOT / "configs" / "models.yaml")


@pytest.fixture(scope="module")
def store(builtin_store) -> ModelStore:
    store = ModelStore(builtin_store, MANIFEST)
    if not store.status("nudenet-320n").usable:
        pytest.fail("built-in nudenet-320n missing: run `portrait models pull --builtin`")
    return store


@pytest.fixture(scope="module")
def gate(store) -> CompliancePredictor:
    return CompliancePredictor(store)


def test_the_input_is_the_photo_padded_at_its_right_and_bottom_to_a_square():
    photo = np.full((100, 50, 3), 255, np.uint8)
    photo[..., 0] = 0  # no red: the channels stay in RGB order
    blob = network_input(photo)
    assert blob.shape == (3, INPUT_SIZE, INPUT_SIZE) and blob.dtype == np.float32
    assert blob[:, :, INPUT_SIZE // 2 + 2 :].max() == 0.0  # the padding: black, on the right
    assert blob[0, :, :100].max() == 0.0 and blob[1, :, :100].min() == 1.0


def test_decode_scales_clips_and_suppresses_as_the_official_code():
    output = stand_in_output(
        [
            ("FACE_FEMALE", 0.9, (100.0, 100.0, 40.0, 40.0)),
            ("FACE_FEMALE", 0.5, (102.0, 101.0, 40.0, 40.0)),  # the same face again: NMS keeps the first
            ("BELLY_COVERED", 0.19, (200.0, 200.0, 20.0, 20.0)),  # under 0.2: no candidate
            ("FEET_COVERED", 0.6, (315.0, 310.0, 30.0, 40.0)),  # past the photo's edge: clipped
        ]
    )
    found = decode(output, (640, 480))  # scale 2: the photo's long side is 640
    assert [(d.label, round(d.score, 2), d.box) for d in found] == [
        ("FACE_FEMALE", 0.9, (160, 160, 80, 80)),
        ("FEET_COVERED", 0.6, (480, 580, 0, 60)),
    ]


def test_our_findings_equal_the_official_packages(store, astronaut_rgb):
    """The same classes, boxes and scores as ``nudenet.NudeDetector.detect`` given the same RGB array (which, unlike
    its file path, reaches the network unswapped)."""
    official = pytest.importorskip("nudenet.nudenet").NudeDetector(str(store.resolve("nudenet-320n")))
    ours = NudeNetDetector(store.resolve("nudenet-320n"))
    photos = {"astronaut": astronaut_rgb, **skimage_portraits()}
    if (SHARED_DIR / "eval").is_dir():  # every evaluation photo too, when the checkout has them
        photos.update(eval_photos(SHARED_DIR))
    for name, photo in photos.items():
        expected = [(d["class"], tuple(d["box"]), d["score"]) for d in official.detect(photo)]
        [found] = ours.detect([photo])
        assert [(d.label, d.box) for d in found] == [(label, box) for label, box, _ in expected], name
        assert np.allclose([d.score for d in found], [score for *_, score in expected], atol=1e-5), name


def test_a_batch_finds_what_single_photos_find(store, astronaut_rgb):
    detector = NudeNetDetector(store.resolve("nudenet-320n"))
    photos = [astronaut_rgb, np.ascontiguousarray(astronaut_rgb[:300]), np.ascontiguousarray(astronaut_rgb[:, ::-1])]
    batched = detector.detect(photos)
    for photo, found in zip(photos, batched):
        [alone] = detector.detect([photo])
        assert [(d.label, d.box) for d in found] == [(d.label, d.box) for d in alone]
        assert np.allclose([d.score for d in found], [d.score for d in alone], atol=1e-4)


def test_no_portrait_is_refused(gate):
    verdicts = {name: gate.check([PhotoToCheck(photo)])[0] for name, photo in skimage_portraits().items()}
    assert [name for name, verdict in verdicts.items() if not verdict.passed] == []
    assert all(verdict.engine.weights == "nudenet-320n" for verdict in verdicts.values())


@pytest.mark.eval
def test_no_evaluation_photo_is_refused(gate, shared_dir):
    """Every image of ../shared/eval (docs/BENCHMARKS.md "Compliance gate" has the scores)."""
    photos = eval_photos(shared_dir)
    assert len(photos) >= 16
    verdicts = gate.check([PhotoToCheck(photo) for photo in photos.values()])
    refused = {name: verdict.refusing for name, verdict in zip(photos, verdicts)}
    assert {name: found for name, found in refused.items() if found} == {}


def _stand_in(monkeypatch, per_view):
    """The session answers ``per_view(index, batch size)``'s findings for each view of the batch."""

    def run(self, batch):
        return np.stack([stand_in_output(per_view(index, len(batch))) for index in range(len(batch))])

    monkeypatch.setattr(nudenet.NudeNetDetector, "run", run)


def test_a_refused_class_seen_in_the_photo_and_its_mirror_refuses_it(gate, monkeypatch, astronaut_rgb):
    _stand_in(
        monkeypatch,
        lambda index, size: [("FEMALE_BREAST_EXPOSED", 0.8, CENTRE), ("FACE_FEMALE", 0.9, (160, 60, 40, 40))],
    )
    [verdict] = gate.check([PhotoToCheck(astronaut_rgb)])
    assert not verdict.passed and verdict.reason_codes == ("explicit_content",)
    assert [(d.label, round(d.score, 2)) for d in verdict.refusing] == [("FEMALE_BREAST_EXPOSED", 0.8)]
    assert {d.label for d in verdict.detections} == {"FEMALE_BREAST_EXPOSED", "FACE_FEMALE"}


def test_what_the_mirror_does_not_confirm_does_not_refuse(gate, monkeypatch, astronaut_rgb):
    """The one refused-class finding on the evaluation photos (0.53, a face under a hat) is gone in the mirror."""
    _stand_in(
        monkeypatch, lambda index, size: [("FEMALE_BREAST_EXPOSED", 0.8, CENTRE)] if index < max(1, size // 2) else []
    )
    [verdict] = gate.check([PhotoToCheck(astronaut_rgb)])
    assert verdict.passed and verdict.detections
    unconfirmed = CompliancePredictor(gate.store, GateOptions(mirror_check=False))
    assert not unconfirmed.check([PhotoToCheck(astronaut_rgb)])[0].passed


def test_each_photo_of_a_batch_gets_its_own_verdict(gate, monkeypatch, astronaut_rgb):
    # Views: photo 0, photo 1, mirror 0, mirror 1; only photo 1 shows the finding in both.
    _stand_in(monkeypatch, lambda index, size: [("BUTTOCKS_EXPOSED", 0.7, CENTRE)] if index % 2 else [])
    verdicts = gate.check([PhotoToCheck(astronaut_rgb), PhotoToCheck(astronaut_rgb)])
    assert [verdict.passed for verdict in verdicts] == [True, False]


@pytest.mark.parametrize(
    "options",
    [GateOptions(min_score=0.9), GateOptions(classes=("MALE_GENITALIA_EXPOSED",))],
    ids=["under min_score", "not a refused class"],
)
def test_the_classes_and_the_score_are_the_operators(gate, monkeypatch, astronaut_rgb, options):
    _stand_in(monkeypatch, lambda index, size: [("FEMALE_BREAST_EXPOSED", 0.8, CENTRE)])
    assert CompliancePredictor(gate.store, options).check([PhotoToCheck(astronaut_rgb)])[0].passed


def test_options_come_from_a_yaml_list_and_name_what_is_allowed():
    assert GateOptions(classes=["ANUS_EXPOSED"]).classes == ("ANUS_EXPOSED",)
    with pytest.raises(InvalidParameter, match="not NudeNet's"):
        GateOptions(classes=("NUDE",))
    with pytest.raises(InvalidParameter, match="min_score"):
        GateOptions(min_score=0.1)


def test_without_its_weights_the_gate_answers_503_naming_the_fix(tmp_path, astronaut_rgb):
    gate = CompliancePredictor(ModelStore(tmp_path, MANIFEST))
    assert gate.health()["status"] == "degraded"
    with pytest.raises(ModelUnavailable, match="portrait models pull nudenet-320n"):
        gate.check([PhotoToCheck(astronaut_rgb)])


def test_an_operator_may_run_no_detector(tmp_path, astronaut_rgb):
    gate = CompliancePredictor(ModelStore(tmp_path, MANIFEST), GateOptions(model=None))
    [verdict] = gate.check([PhotoToCheck(astronaut_rgb)])
    assert verdict.passed and verdict.engine.engine == "none" and gate.health()["status"] == "ok"
