"""The OpenAI-compatible routes run their job under the request timeout, as the job routes do: a stage that answers
late (a model scaling up from zero) is a 504 ``timeout`` in OpenAI's shape, and the job is abandoned."""

from __future__ import annotations

import asyncio
import base64

import pytest
from fastapi.testclient import TestClient

from tests.stage_doubles import FaceAnalysisDouble

LATE_S = 5.0  # far past the 0.3 s timeout below; short enough that the test ends if the timeout is not applied


class LateFaces(FaceAnalysisDouble):
    """The real engines, except a face analysis that answers only after ``LATE_S``; ``abandoned`` counts calls the
    caller gave up on."""

    def __init__(self, backend) -> None:
        super().__init__(backend)
        self.abandoned = 0

    async def analyze_faces(self, image):
        try:
            await asyncio.sleep(LATE_S)
        except asyncio.CancelledError:
            self.abandoned += 1
            raise
        return await super().analyze_faces(image)


@pytest.fixture
def late(api, local_backend):
    api.state.backend = LateFaces(local_backend)
    api.state.settings = api.state.settings.model_copy(update={"request_timeout_s": 0.3})
    return api


def _timed_out(answer) -> None:
    assert answer.status_code == 504
    error = answer.json()["error"]
    assert error.pop("request_id")
    assert error == {
        "message": "no answer within 0.3 s; retry later",
        "type": "server_error",
        "param": None,
        "code": "timeout",
    }


def test_images_edits_answers_504_at_the_request_timeout(late, photo_jpeg):
    with TestClient(late, raise_server_exceptions=False) as client:
        answer = client.post(
            "/v1/images/edits", data={"prompt": "卡通"}, files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}
        )
    _timed_out(answer)
    assert late.state.backend.abandoned == 1


def test_chat_completions_answers_504_at_the_request_timeout(late, photo_jpeg):
    url = "data:image/jpeg;base64," + base64.b64encode(photo_jpeg).decode("ascii")
    message = {"role": "user", "content": [{"type": "text", "text": "卡通"}, {"type": "image_url", "image_url": url}]}
    with TestClient(late, raise_server_exceptions=False) as client:
        answer = client.post("/v1/chat/completions", json={"model": "portrait", "messages": [message]})
    _timed_out(answer)
    assert late.state.backend.abandoned == 1
