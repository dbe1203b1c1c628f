"""A video on the web page in real headless Chromium (the fixtures of ``test_web_page.py``): restore through
``POST /v1/jobs``, the card's progress while ``GET /v1/jobs/{id}`` is polled, the result playing in its
``<video>`` and downloaded as an mp4 with the source's frames; a job that takes photos only refuses it without
sending it. A screenshot of the card goes to ``test-output/``."""

from __future__ import annotations

import re
from fractions import Fraction

import av
import pytest

from tests.serve.test_web_page import JOB_TIMEOUT_MS, SCREENSHOTS, _open_page, browser  # noqa: F401 (fixture)
from tests.unit.video.clips import make_clip

pytestmark = pytest.mark.slow

FRAMES = 25
# The card's state texts as they change (a MutationObserver installed before the run).
RECORD_STATES = """() => {
  window.cardStates = [];
  new MutationObserver(() => document.querySelectorAll('.card-state-text').forEach((node) => {
    if (window.cardStates.at(-1) !== node.textContent) window.cardStates.push(node.textContent);
  })).observe(document.getElementById('results'), { subtree: true, childList: true, characterData: true });
}"""


@pytest.fixture
def page(browser, serve_url):  # noqa: F811 (the imported fixture)
    yield from _open_page(browser, serve_url, "en-US")


def test_a_video_is_restored_as_a_job_with_progress_and_plays_in_the_card(page, tmp_path):
    clip = make_clip(tmp_path / "walk.mp4", seconds=FRAMES / 25, width=320, height=240, fps=25)
    page.wait_for_function("state.videoJobs.length > 0")
    page.evaluate(RECORD_STATES)
    page.check('input[name="job"][value="restore"]')
    page.set_input_files("#file-input", [str(clip)])
    page.click("#run-button")
    page.wait_for_function("document.querySelectorAll('.card.done, .card.failed').length === 1", timeout=JOB_TIMEOUT_MS)
    card = page.locator(".card").first
    assert "done" in card.get_attribute("class"), card.locator(".card-error").inner_text()
    states = page.evaluate("window.cardStates")
    assert any(re.fullmatch(r"Video queued…|Processing the video… \d+% of frames done", text) for text in states)
    assert re.fullmatch(r"Done in [\d.]+ s", states[-1]), states

    player = card.locator("video.card-video")
    assert player.is_visible() and card.locator(".compare").is_hidden()
    page.wait_for_function("document.querySelector('video.card-video').readyState >= 2")
    size = player.evaluate("video => [video.videoWidth, video.videoHeight, video.duration]")
    assert size[:2] == [320, 240] and abs(size[2] - FRAMES / 25) <= 1 / 25
    assert player.get_attribute("aria-label") == "walk.mp4, the processed video"
    SCREENSHOTS.mkdir(exist_ok=True)
    card.screenshot(path=SCREENSHOTS / "web-video-desktop.png")

    with page.expect_download() as download:
        card.get_by_role("link", name="Download result").click()
    assert download.value.suggested_filename == "walk-restore.mp4"
    with av.open(download.value.path()) as result:
        stream = result.streams.video[0]
        assert (stream.average_rate, sum(1 for _ in result.decode(stream))) == (Fraction(25), FRAMES)


def test_a_job_that_takes_photos_only_refuses_a_video_before_sending_it(page, tmp_path):
    clip = make_clip(tmp_path / "walk.mp4", seconds=0.2, audio=None)
    page.wait_for_function("state.videoJobs.length > 0")
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    page.check('input[name="job"][value="idphoto"]')
    page.set_input_files("#file-input", [str(clip)])
    page.click("#run-button")
    page.wait_for_selector(".card.failed")
    error = page.locator(".card-error").inner_text()
    assert "This job takes photos only. For a video choose: photo restoration, cartoon." in error  # registry titles
    assert posts == []
