"""Face tracks across frames: association, smoothing that removes jitter without lagging, fades instead of pops."""

from __future__ import annotations

import numpy as np

from deployments.faces.types import Face
from deployments.video.tracking import FaceTracker, OneEuroFilter, TrackingOptions

TEMPLATE = np.array([[30, 40], [70, 40], [50, 60], [35, 80], [65, 80]], np.float64)


def _face(offset_xy, scale=1.0, noise=None) -> Face:
    points = TEMPLATE * scale + np.asarray(offset_xy)
    if noise is not None:
        points = points + noise
    x1, y1 = points.min(axis=0) - 20
    x2, y2 = points.max(axis=0) + 20
    return Face(box=(x1, y1, x2, y2), score=0.9, landmarks=points.astype(np.float32), roll_deg=0.0, chin=(0.0, 0.0))


def _residual_px(track: np.ndarray) -> float:
    """Jitter: the RMS residual of each coordinate after a cubic fit along time."""
    t = np.arange(len(track))
    flat = track.reshape(len(track), -1)
    fit = np.stack([np.polyval(np.polyfit(t, flat[:, i], 3), t) for i in range(flat.shape[1])], axis=1)
    return float(np.sqrt(((flat - fit) ** 2).mean()))


def test_smoothing_cuts_the_jitter_of_a_moving_face_at_least_in_half():
    rng = np.random.default_rng(0)
    frames = [_face((100 + 2.0 * i, 80 + 0.5 * i), noise=rng.normal(0, 1.5, (5, 2))) for i in range(75)]
    raw = FaceTracker(25.0, TrackingOptions(smooth=False))
    smooth = FaceTracker(25.0, TrackingOptions())
    raw_track = np.stack([raw.step([f])[0].landmarks for f in frames])
    smooth_track = np.stack([smooth.step([f])[0].landmarks for f in frames])
    assert _residual_px(smooth_track[10:]) * 2 <= _residual_px(raw_track[10:])
    # no lag worth seeing: the smoothed face stays within 2 px of where it truly is
    truth = np.stack([TEMPLATE + (100 + 2.0 * i, 80 + 0.5 * i) for i in range(75)])
    assert np.abs(smooth_track[10:] - truth[10:]).mean() < 2.0


def test_two_faces_keep_their_track_ids_while_they_move():
    tracker = FaceTracker(25.0, TrackingOptions())
    ids = []
    for i in range(10):
        faces = tracker.step([_face((300 - 3 * i, 50)), _face((20 + 3 * i, 60))])
        ids.append(sorted((round(f.landmarks[0, 0]), f.track_id) for f in faces))
    left_ids = {pairs[0][1] for pairs in ids}
    right_ids = {pairs[1][1] for pairs in ids}
    assert len(left_ids) == 1 and len(right_ids) == 1 and left_ids != right_ids


def test_a_face_fades_in_when_it_appears_and_out_when_it_leaves():
    tracker = FaceTracker(25.0, TrackingOptions(fade_frames=4))
    seen = [tracker.step([_face((100, 100))])[0].opacity for _ in range(5)]
    assert seen == [0.25, 0.5, 0.75, 1.0, 1.0]
    gone = [[f.opacity for f in tracker.step([])] for _ in range(5)]
    assert gone == [[0.75], [0.5], [0.25], [], []]


def test_between_detections_a_track_moves_at_its_last_velocity():
    tracker = FaceTracker(25.0, TrackingOptions(detect_every=2, smooth=False))
    assert tracker.is_detection_frame(0) and not tracker.is_detection_frame(1)
    tracker.step([_face((100, 100))])
    tracker.step([_face((104, 100))])
    predicted = tracker.step(None)[0]
    assert np.allclose(predicted.landmarks, TEMPLATE + (108, 100))


def test_one_euro_filter_is_steady_on_a_still_signal_and_follows_a_step():
    smoother = OneEuroFilter(25.0, min_cutoff_hz=1.0, beta=0.05, derivative_cutoff_hz=1.0)
    still = [smoother(np.array([10.0]))[0] for _ in range(5)]
    assert still == [10.0] * 5
    after_step = [smoother(np.array([20.0]))[0] for _ in range(25)]
    assert 10.0 < after_step[0] < 20.0 and after_step[-1] > 19.5


def test_a_tracker_restored_from_its_state_continues_exactly_where_it_stopped():
    import json

    rng = np.random.default_rng(1)
    frames = [_face((100 + 2.0 * i, 80), noise=rng.normal(0, 1.5, (5, 2))) for i in range(20)]
    whole = FaceTracker(25.0, TrackingOptions())
    expected = [whole.step([f]) for f in frames]
    first = FaceTracker(25.0, TrackingOptions())
    for f in frames[:10]:
        first.step([f])
    resumed = FaceTracker.from_state(25.0, TrackingOptions(), json.loads(json.dumps(first.state())))
    for f, want in zip(frames[10:], expected[10:]):
        got = resumed.step([f])
        assert [(g.track_id, g.opacity) for g in got] == [(w.track_id, w.opacity) for w in want]
        assert np.allclose(got[0].landmarks, want[0].landmarks)
