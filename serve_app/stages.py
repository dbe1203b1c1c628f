"""Every model stage of the app, found where it is declared: each ``deployments/<folder>/deployment.py`` with a
``ModelReplica`` deployment. ``build_app`` binds them all and the in-process backend runs them; a new stage is its
folder, nothing here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

import deployments
from deployments.common.deployment import ModelReplica
from deployments.common.stage import Stage, StageContext

if TYPE_CHECKING:
    from ray.serve import Deployment


@cache
def model_deployments() -> tuple[Deployment, ...]:
    """The ``ModelReplica`` deployments of every ``deployments/<folder>/deployment.py``, in folder order."""
    found = []
    for folder in sorted(module.name for module in pkgutil.iter_modules(deployments.__path__) if module.ispkg):
        try:
            module = importlib.import_module(f"deployments.{folder}.deployment")
        except ModuleNotFoundError as exc:
            if exc.name != f"deployments.{folder}.deployment":
                raise
            continue
        found += [
            value
            for value in vars(module).values()
            if isinstance(getattr(value, "func_or_class", None), type) and issubclass(value.func_or_class, ModelReplica)
        ]
    return tuple(found)


def stage_of(deployment: Deployment) -> Stage:
    return deployment.func_or_class.stage


def bindings(context: StageContext) -> Iterator[tuple[str, Deployment, tuple]]:
    """``(deployment name, deployment, __init__ arguments)`` for every binding of every stage, restorers in the
    context's order of preference."""
    for deployment in model_deployments():
        for name, args in stage_of(deployment).bound(context).items():
            yield name, deployment, args
