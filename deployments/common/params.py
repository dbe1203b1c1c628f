"""Options every job shares: output format and what to return. Each job's params extend ``JobParams``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deployments.common.errors import InvalidParameter


class JobParams(BaseModel):
    """Validated the same way for HTTP forms, JSON bodies, bucket metadata and the CLI; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, protected_namespaces=())

    return_: Literal["image", "json"] = Field(
        "image", alias="return", description="the image bytes, or JSON with metadata"
    )

    @classmethod
    def options_of_model(cls, model: str) -> tuple[str, ...]:
        """The options only some values of the job's ``model`` option read, for ``model`` (a restorer's
        ``fidelity``); none by default. ``GET /v1/tasks`` lists them per model, so the page shows their controls."""
        return ()


def parse_params(model: type[JobParams], fields: Mapping[str, Any], *, context: Any = None) -> JobParams:
    """Validate raw fields (strings from a form are coerced; empty ones mean "default") into ``model``, or raise one
    ``InvalidParameter`` naming every problem. ``context`` reaches the model's validators (e.g. the known presets)."""
    try:
        return model.model_validate(
            {key: value for key, value in fields.items() if value not in (None, "")}, context=context
        )
    except ValidationError as exc:
        problems = [
            {
                "field": ".".join(str(part) for part in error["loc"]) or "params",
                "problem": error["msg"].removeprefix("Value error, "),
            }
            for error in exc.errors()
        ]
        message = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        raise InvalidParameter(message, details={"problems": problems}) from None
