"""A thread-safe handle on one ``.tflite`` model.

LiteRT interpreters are neither thread-safe nor picklable, so the handle keeps only the model path and builds one
interpreter per calling thread on first use (Ray replicas run batched work in worker threads).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from deployments.common.errors import ModelUnavailable

logger = logging.getLogger(__name__)


class TfliteModel:
    """One model file; ``run`` feeds a single input tensor and returns every output tensor, in the model's order."""

    def __init__(self, model_path: Path | str, *, num_threads: int = 1) -> None:
        self.model_path = Path(model_path)
        self.num_threads = int(num_threads)
        if not self.model_path.is_file():
            raise ModelUnavailable(f"model file missing: {self.model_path}", details={"path": str(self.model_path)})
        self._per_thread = threading.local()
        self.input_shape = tuple(int(v) for v in self._interpreter().get_input_details()[0]["shape"])

    def _interpreter(self):
        interpreter = getattr(self._per_thread, "interpreter", None)
        if interpreter is None:
            from ai_edge_litert.interpreter import Interpreter

            try:
                interpreter = Interpreter(model_path=str(self.model_path), num_threads=self.num_threads)
                interpreter.allocate_tensors()
            except (ValueError, RuntimeError) as exc:
                raise ModelUnavailable(f"cannot load {self.model_path.name}: {exc}") from exc
            logger.debug("built interpreter for %s in thread %s", self.model_path.name, threading.get_ident())
            self._per_thread.interpreter = interpreter
            self._per_thread.input_index = interpreter.get_input_details()[0]["index"]
            self._per_thread.output_indices = [d["index"] for d in interpreter.get_output_details()]
        return interpreter

    def run(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run one float32 input of exactly ``input_shape``; outputs are copies, safe to keep."""
        interpreter = self._interpreter()
        interpreter.set_tensor(self._per_thread.input_index, tensor)
        interpreter.invoke()
        return [interpreter.get_tensor(index) for index in self._per_thread.output_indices]

    def __getstate__(self):
        raise TypeError("TfliteModel is not picklable: build it inside each replica")
