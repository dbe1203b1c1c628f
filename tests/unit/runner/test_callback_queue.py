"""The runner's ``CallbackQueue`` for bucket-route callbacks (issue #32, finding 1): at most ``callback_concurrency``
POSTs at once, at most ``callback_held_max`` callbacks in memory, the rest in their ``.callback`` files until there is
room; every one delivered in the end. Jobs and routes share one queue."""

from __future__ import annotations

import asyncio
import json

from serve_app.runner.callback_queue import CallbackQueue
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.route_callbacks import RouteCallbacks
from serve_app.runner.worker import BucketWorker, job_executor
from storage.local import LocalStore
from tests.unit.runner.test_bucket_retention import pending_callbacks, route_table


class GatedReceiver:
    """Answers 200 once ``gate`` is set; counts the POSTs under way."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.keys: list[str] = []
        self.in_flight = self.peak = 0

    async def post(self, target, body, headers, timeout_s):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.gate.wait()
            self.keys.append(json.loads(body)["key"])
            return 200
        finally:
            self.in_flight -= 1


def test_route_callbacks_beyond_the_queue_wait_in_their_files_and_are_all_delivered(tmp_path, local_backend, job_ctx):
    table = route_table(tmp_path, job_ctx, callback_url="http://127.0.0.1:9/bucket-hook")
    config = JobsConfig(
        callback_secret="route-secret", callback_hosts=("127.0.0.1",), callback_concurrency=2, callback_held_max=3
    )
    source, output = LocalStore(tmp_path / "in"), LocalStore(tmp_path / "out")
    keys = [f"text-{n:02d}.jpg" for n in range(10)]
    for key in keys:
        source.put(key, b"not a photo", content_type="image/jpeg")  # each fails at once: an error record, a callback

    async def scenario():
        receiver, queue = GatedReceiver(), CallbackQueue.of(config)
        callbacks = RouteCallbacks(table.routes, config, post=receiver.post, queue=queue)
        worker = BucketWorker(table, job_executor(local_backend, job_ctx), job_ctx, on_outcome=callbacks.observe)
        await worker.reconcile(table.routes[0])
        while len(pending_callbacks(output)) < len(keys) or receiver.in_flight < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # time for more to start, were they allowed
        seen = (len(queue), receiver.peak, len(pending_callbacks(output)))
        receiver.gate.set()
        await callbacks.drain()
        return seen, receiver

    (held, peak, stored), receiver = asyncio.run(scenario())
    assert (held, peak, stored) == (3, 2, 10)  # 3 held (2 sending), the 7 others only in their files
    assert sorted(receiver.keys) == keys  # each delivered, once
    assert receiver.peak == 2
    assert pending_callbacks(output) == []


def test_a_refused_source_is_refilled_once_there_is_room_and_a_failed_refill_waits_for_the_next_ending():
    async def scenario():
        queue = CallbackQueue(concurrency=1, held_max=1)
        release, refills, done = asyncio.Event(), [], []

        async def slow():
            await release.wait()
            done.append("slow")

        async def refill():
            refills.append(len(refills))
            if len(refills) == 1:
                raise OSError("the store is down")
            queue.hold("later", quick, source="s", refill=refill)

        async def quick():
            done.append("later")

        assert queue.hold("first", slow, source="s", refill=refill)
        assert not queue.hold("second", slow, source="s", refill=refill)  # full: refused, refill noted
        assert queue.waiting("s") and len(queue) == 1
        release.set()
        await queue.drain()  # the first refill fails: noted again, run at the next ending
        assert (refills, done, queue.waiting("s")) == ([0], ["slow"], True)
        assert queue.hold("third", quick, source="other", refill=refill)
        await queue.drain()
        return refills, done, queue.waiting("s")

    refills, done, waiting = asyncio.run(scenario())
    assert refills == [0, 1] and done == ["slow", "later", "later"] and not waiting
