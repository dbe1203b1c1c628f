"""The web page in real headless Chromium (Debian's ``chromium`` driven by Playwright): every job end to end.

Upload ``skimage.data.astronaut()``, run the job, wait for the result, check the before/after comparison, download
"all" as a ZIP and read it back. Beside a good photo, a text file, a too-large file and a faceless photo each show
the API's own error message. Screenshots (desktop and phone) go to ``test-output/``.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import httpx
import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
JOB_TIMEOUT_MS = 180_000


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, serve_url):
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    page = context.new_page()
    page.goto(serve_url)
    page.wait_for_function("document.getElementById('service-version').textContent.startsWith('portrait-serve')")
    yield page
    context.close()


@pytest.fixture(scope="module")
def astronaut_png(astronaut_rgb, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("web") / "astronaut.png"
    Image.fromarray(astronaut_rgb).save(path)
    return path


def _choose_options(page, job: str) -> None:
    page.check(f'input[name="job"][value="{job}"]')
    if job == "restore":
        page.select_option("#restore-model", "gpen-bfr-512")
    elif job == "idphoto":
        page.wait_for_selector('#idphoto-spec option[value="cn-1inch"]', state="attached")
        page.select_option("#idphoto-spec", "cn-1inch")
        page.select_option("#idphoto-background", "blue")
        page.select_option("#idphoto-layout", "6inch")
    else:
        page.wait_for_function("document.querySelector('#cartoon-style').value !== ''")


def _run(page, files: list[Path]):
    """Pick the files, press Run, wait until every card is done or failed; the cards in order."""
    page.set_input_files("#file-input", [str(path) for path in files])
    page.click("#run-button")
    page.wait_for_function(
        f"document.querySelectorAll('.card.done, .card.failed').length === {len(files)}", timeout=JOB_TIMEOUT_MS
    )
    return [page.locator(".card").nth(i) for i in range(len(files))]


def _download_zip(page) -> zipfile.ZipFile:
    with page.expect_download() as download:
        page.click("#zip-button")
    archive = zipfile.ZipFile(download.value.path())
    assert archive.testzip() is None  # every CRC-32 checks out
    return archive


def _screenshots(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"web-{name}-desktop.png", full_page=True)
    page.set_viewport_size(PHONE)
    page.screenshot(path=SCREENSHOTS / f"web-{name}-phone.png", full_page=True)


@pytest.mark.parametrize("job", ["restore", "idphoto", "cartoon"])
def test_a_job_shows_before_and_after_and_zips_everything(page, astronaut_png, job):
    _choose_options(page, job)
    (card,) = _run(page, [astronaut_png])
    assert "done" in card.get_attribute("class"), card.locator(".card-error").inner_text()

    images = card.locator(".compare img")
    assert images.count() == 2
    assert all(images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0") for i in range(2))
    divider = card.locator(".compare-divider")
    divider.focus()
    divider.press("ArrowLeft")
    assert divider.get_attribute("aria-valuenow") == "45"
    assert card.locator(".card-engine").inner_text().startswith(("Engine:", "non-neural"))
    if job == "idphoto":
        assert card.locator(".report h4").inner_text().startswith(("Meets", "Does not meet"))
        assert card.locator(".checks tbody tr").count() >= 2
        assert card.get_by_role("link", name="Download print sheet").count() == 1

    archive = _download_zip(page)
    names = set(archive.namelist())
    assert "originals/01-astronaut.png" in names
    assert archive.read("originals/01-astronaut.png") == astronaut_png.read_bytes()
    results = sorted(name for name in names if name.startswith(f"results/01-astronaut-{job}"))
    assert results, names
    for name in results:
        Image.open(io.BytesIO(archive.read(name))).verify()
    metadata = json.loads(archive.read("metadata/01-astronaut.json"))
    assert metadata["status"] == "done" and metadata["job"] == job
    assert metadata["response"]["meta"]["job"] == job and metadata["response"]["meta"]["engine"]
    engine = metadata["response"]["meta"]["engine"]
    assert engine in page.locator("#engines-used").inner_text()
    _screenshots(page, job)


def test_each_api_error_shows_its_message_beside_the_good_photo(page, serve_url, astronaut_png, tmp_path):
    """ID photo on four files: a portrait (done), a text file (415), a too-large file (413), a faceless photo (422)."""
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a photo\n", encoding="utf-8")
    too_large = tmp_path / "huge.jpg"
    too_large.write_bytes(bytes(22 * 1024 * 1024))
    faceless = tmp_path / "wall.png"
    Image.new("RGB", (300, 400), (200, 200, 200)).save(faceless)
    expected = httpx.post(
        f"{serve_url}/v1/idphoto", files={"image": ("notes.txt", text_file.read_bytes(), "text/plain")}, timeout=60
    )
    assert expected.status_code == 415
    message = expected.json()["error"]["message"]

    page.check('input[name="job"][value="idphoto"]')
    photo, text, large, wall = _run(page, [astronaut_png, text_file, too_large, faceless])
    assert "done" in photo.get_attribute("class")
    for card, status, code in (
        (text, 415, "unsupported_image"),
        (large, 413, "image_too_large"),
        (wall, 422, "no_face"),
    ):
        assert "failed" in card.get_attribute("class")
        error = card.locator(".card-error")
        assert error.is_visible() and f"HTTP {status} · {code}" in error.inner_text()
        assert card.locator(".card-result").is_hidden()
    assert message in text.locator(".card-error").inner_text()

    archive = _download_zip(page)
    assert "originals/02-notes.txt" in archive.namelist()
    assert not any(name.startswith(("results/02-", "results/03-", "results/04-")) for name in archive.namelist())
    metadata = json.loads(archive.read("metadata/02-notes.json"))
    assert metadata["status"] == "failed" and metadata["error"] == {"code": "unsupported_image", "message": message}
    _screenshots(page, "errors")
