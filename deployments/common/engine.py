"""Which engine produced a result: reported in every response (header ``X-Portrait-Engine`` and JSON metadata)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deployments.common.weights import ModelStatus


@dataclass(frozen=True)
class EngineInfo:
    """``engine`` names the code path (``gpen``, ``classic-restore``...); ``weights`` the manifest entry it loaded,
    ``weights_label`` what those weights are where the name alone would mislead (the manifest's ``label``)."""

    engine: str
    neural: bool
    weights: str | None = None
    sha256: str | None = None
    weights_state: str | None = None
    weights_label: str | None = None

    @classmethod
    def from_weights(cls, status: ModelStatus) -> EngineInfo:
        """The engine a loaded model runs: its label comes from the manifest entry (one source for each fact)."""
        return cls(
            engine=status.spec.engine,
            neural=True,
            weights=status.spec.name,
            sha256=status.sha256,
            weights_state=status.state.value,
            weights_label=status.spec.label,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "neural": self.neural,
            "weights": self.weights,
            "sha256": self.sha256,
            "weights_state": self.weights_state,
            "weights_label": self.weights_label,
        }
