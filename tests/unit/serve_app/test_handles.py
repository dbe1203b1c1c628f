"""The Ray edge of the ingress: a model deployment's full queue becomes our 503 ``Overloaded``."""

from __future__ import annotations

import asyncio

import pytest
from ray.serve.exceptions import BackPressureError

from deployments.common.errors import Overloaded
from serve_app.handles import BucketRunnerClient, call_deployment


class _FullQueue:
    """A deployment method whose queue is full: awaiting its response raises, as Serve's handles do."""

    def remote(self, *args):
        async def response():
            raise BackPressureError(num_queued_requests=64, max_queued_requests=64)

        return response()


class _Echo:
    def remote(self, *args):
        async def response():
            return args

        return response()


def test_back_pressure_becomes_a_503_overloaded():
    with pytest.raises(Overloaded) as info:
        asyncio.run(call_deployment(_FullQueue(), "image"))
    assert info.value.http_status == 503 and info.value.code == "overloaded"


def test_answers_pass_through():
    assert asyncio.run(call_deployment(_Echo(), 1, 2)) == (1, 2)


class _Runner:
    submit = _FullQueue()


def test_a_full_bucket_runner_queue_is_a_503_overloaded_too():
    with pytest.raises(Overloaded):
        asyncio.run(BucketRunnerClient(_Runner()).submit([]))
