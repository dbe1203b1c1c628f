"""A running job's progress as the jobs store reads it back: what the job counted, written at most once a second
(an object PUT each), never backwards, and gone when the job ends."""

from __future__ import annotations

import asyncio

from deployments.common.batching import Progress
from serve_app.jobs.progress import RenderSteps, StoredProgress, read_progress, reporting_to
from storage.local import LocalStore


class CountingStore(LocalStore):
    def __init__(self, root) -> None:
        super().__init__(root)
        self.puts: list[bytes] = []

    def put(self, key, data, **kwargs):
        self.puts.append(data)
        return super().put(key, data, **kwargs)


def test_reports_are_written_at_once_then_at_most_once_a_second_and_never_backwards(tmp_path, monkeypatch):
    monkeypatch.setattr("serve_app.jobs.progress.WRITE_EVERY_S", 0.2)
    store = CountingStore(tmp_path)

    async def job() -> None:
        progress = StoredProgress(store, "in/me.jpg")
        progress(0.1, {"steps_done": 1, "steps": 10})
        await asyncio.sleep(0.05)
        assert read_progress(store, "in/me.jpg") == (0.1, {"steps_done": 1, "steps": 10})
        for done in range(2, 8):  # within the next window: only the last is written, when it opens
            progress(done / 10, {"steps_done": done, "steps": 10})
        progress(0.05, {"steps_done": 1, "steps": 20})  # the job planned more: its fraction never goes back
        await asyncio.sleep(0.3)
        assert read_progress(store, "in/me.jpg") == (0.7, {"steps_done": 7, "steps": 10})
        assert len(store.puts) == 2
        await progress.close()
        progress(0.9, {"steps_done": 9, "steps": 10})  # after the end: nothing
        await asyncio.sleep(0.3)

    asyncio.run(job())
    assert read_progress(store, "in/me.jpg") is None
    assert list(store.list("")) == []


def test_the_steps_of_parallel_renders_add_up_from_their_plans():
    heard: list[tuple[float, dict[str, int]]] = []
    steps = RenderSteps()
    with reporting_to(lambda fraction, detail: heard.append((fraction, detail))):
        first, second = steps.plan("a", 4), steps.plan("b", 4)
        first(Progress(1, 4))
        second(Progress(1, 2))  # the renderer knows best: this one runs 2
        first(Progress(4, 4))
    assert heard == [
        (1 / 8, {"steps_done": 1, "steps": 8}),
        (2 / 6, {"steps_done": 2, "steps": 6}),
        (5 / 6, {"steps_done": 5, "steps": 6}),
    ]


def test_outside_a_job_nobody_listens():
    RenderSteps().plan("a", 4)(Progress(1, 4))  # no listener: nothing happens, nothing fails
