"""The interpreter wrapper: per-thread interpreters, typed errors."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

from deployments.common.errors import ModelUnavailable
from deployments.faces.tflite import TfliteModel


def test_each_thread_gets_its_own_interpreter(mediapipe_dir):
    model = TfliteModel(mediapipe_dir / "face_detection_short_range.tflite")
    assert model.input_shape == (1, 128, 128, 3)
    tensor = np.zeros(model.input_shape, np.float32)
    expected = model.run(tensor)[1]
    results = []
    threads = [threading.Thread(target=lambda: results.append(model.run(tensor)[1])) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and all(np.array_equal(r, expected) for r in results)


def test_missing_model_and_pickling_fail_clearly(mediapipe_dir, tmp_path):
    with pytest.raises(ModelUnavailable):
        TfliteModel(tmp_path / "absent.tflite")
    with pytest.raises(TypeError):
        pickle.dumps(TfliteModel(mediapipe_dir / "face_landmark.tflite"))
