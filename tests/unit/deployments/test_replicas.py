"""Each model deployment's class outside Serve: ``reconfigure`` applies its ``user_config`` (batch keys from its stage
declaration, plus its own keys) and refuses unknown keys; ``check_health`` passes on a healthy replica."""

from __future__ import annotations

import pytest

from deployments.cartoon.deployment import Cartoonizer
from deployments.common.errors import InvalidParameter
from deployments.faces.deployment import FaceAnalyzer
from deployments.idphoto.deployment import PortraitMatter
from deployments.restore.deployment import FaceRestorer

REPLICAS = {
    "FaceAnalyzer": lambda: FaceAnalyzer.func_or_class(),
    "PortraitMatter": lambda: PortraitMatter.func_or_class(),
    "FaceRestorer": lambda: FaceRestorer.func_or_class("FaceRestorer256", "gpen-bfr-256"),
    "Cartoonizer": lambda: Cartoonizer.func_or_class("CartoonBackground", "background"),
}


@pytest.fixture(params=sorted(REPLICAS))
def replica(request, mediapipe_dir):
    return REPLICAS[request.param]()


def batch_in_force(replica_object) -> tuple[int, float]:
    (name,) = replica_object.stage.batched
    method = getattr(replica_object, name)
    return method._get_max_batch_size(), method._get_batch_wait_timeout_s()


def test_a_new_replica_runs_and_reports_its_stages_batch_defaults(replica):
    defaults = replica.stage.batch
    assert replica._batch == defaults
    assert batch_in_force(replica) == (defaults.max_batch_size, defaults.batch_wait_timeout_s)


def test_reconfigure_applies_batch_keys_and_keeps_defaults_for_the_rest(replica):
    replica.reconfigure({"max_batch_size": 3})
    expected = (3, replica.stage.batch.batch_wait_timeout_s)
    assert (replica._batch.max_batch_size, replica._batch.batch_wait_timeout_s) == expected
    assert batch_in_force(replica) == expected


def test_reconfigure_refuses_unknown_keys_and_bad_values(replica):
    with pytest.raises(InvalidParameter, match="no_such_key"):
        replica.reconfigure({"no_such_key": 1})
    with pytest.raises(ValueError, match="max_batch_size"):
        replica.reconfigure({"max_batch_size": 0})


def test_check_health_passes_on_a_healthy_replica(replica):
    assert replica.check_health() is None
