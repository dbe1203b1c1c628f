"""Each model deployment's class outside Serve: ``reconfigure`` applies its ``user_config`` (batch keys from the one
table of defaults, plus its own keys) and refuses unknown keys; ``check_health`` passes on a healthy replica."""

from __future__ import annotations

import pytest

from deployments.cartoon.deployment import Cartoonizer
from deployments.common.deployment import BATCH_DEFAULTS
from deployments.common.errors import InvalidParameter
from deployments.faces.deployment import FaceAnalyzer
from deployments.idphoto.deployment import PortraitMatter
from deployments.restore.deployment import FaceRestorer

REPLICAS = {
    "FaceAnalyzer": lambda: FaceAnalyzer.func_or_class(),
    "PortraitMatter": lambda: PortraitMatter.func_or_class(),
    "FaceRestorer": lambda: FaceRestorer.func_or_class("gpen-bfr-256"),
    "Cartoonizer": lambda: Cartoonizer.func_or_class("background"),
}
BATCHED_METHOD = {
    "FaceAnalyzer": "analyze",
    "PortraitMatter": "segment",
    "FaceRestorer": "restore",
    "Cartoonizer": "stylize",
}


@pytest.fixture(params=sorted(REPLICAS))
def replica(request, mediapipe_dir):
    return request.param, REPLICAS[request.param]()


def batch_in_force(replica_object, name: str) -> tuple[int, float]:
    method = getattr(replica_object, BATCHED_METHOD[name])
    return method._get_max_batch_size(), method._get_batch_wait_timeout_s()


def test_a_new_replica_runs_and_reports_the_one_table_of_batch_defaults(replica):
    name, obj = replica
    defaults = BATCH_DEFAULTS[name]
    assert obj._batch == defaults
    assert batch_in_force(obj, name) == (defaults.max_batch_size, defaults.batch_wait_timeout_s)


def test_reconfigure_applies_batch_keys_and_keeps_defaults_for_the_rest(replica):
    name, obj = replica
    obj.reconfigure({"max_batch_size": 3})
    expected = (3, BATCH_DEFAULTS[name].batch_wait_timeout_s)
    assert (obj._batch.max_batch_size, obj._batch.batch_wait_timeout_s) == expected
    assert batch_in_force(obj, name) == expected


def test_reconfigure_refuses_unknown_keys_and_bad_values(replica):
    _, obj = replica
    with pytest.raises(InvalidParameter, match="no_such_key"):
        obj.reconfigure({"no_such_key": 1})
    with pytest.raises(ValueError, match="max_batch_size"):
        obj.reconfigure({"max_batch_size": 0})


def test_check_health_passes_on_a_healthy_replica(replica):
    _, obj = replica
    assert obj.check_health() is None
