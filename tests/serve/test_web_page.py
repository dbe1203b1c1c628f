"""The web page in real headless Chromium (Debian's ``chromium`` driven by Playwright): every job end to end.

Upload ``skimage.data.astronaut()``, run the job, wait for the result, check the before/after comparison, download
"all" as a ZIP and read it back. Beside a good photo, a text file, a too-large file and a faceless photo each show
the API's own error message. In Chinese and English: the page follows the browser's language and remembers a switch;
the instruction box fills a job's options from a prompt (the same params ``POST /v1/instructions`` answers) or says
why it cannot; CodeFormer's fidelity slider; the engines ``/healthz`` reports without their weights, with the
commands that fix them. Screenshots (desktop and phone) go to ``test-output/``.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import httpx
import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

from serve_app.jobs import job_context, parse_job_params
from serve_app.settings import Settings

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
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def _open_page(browser, url: str, locale: str):
    """A fresh browser profile whose preferred language is ``locale`` (navigator.languages and Accept-Language);
    script errors on the page fail the test."""
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True, locale=locale)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    _wait_loaded(page)
    yield page
    context.close()
    assert not errors, errors


def _wait_loaded(page) -> None:
    page.wait_for_function("document.getElementById('service-version').textContent.startsWith('portrait-serve')")
    page.wait_for_function("document.querySelector('#cartoon-style').value !== ''")
    page.wait_for_selector('#idphoto-spec option[value="cn-1inch"]', state="attached")


@pytest.fixture
def page(browser, serve_url):
    yield from _open_page(browser, serve_url, "en-US")


@pytest.fixture
def zh_page(browser, serve_url):
    yield from _open_page(browser, serve_url, "zh-CN")


@pytest.fixture(scope="module")
def job_ctx():
    return job_context(Settings())


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
        page.click('summary[data-i18n="idphoto.looks"]')
        page.fill("#idphoto-whitening", "10")
        page.check("#idphoto-hd")
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
        assert card.get_by_role("link", name="Download HD copy").count() == 1

    archive = _download_zip(page)
    names = set(archive.namelist())
    assert "originals/01-astronaut.png" in names
    assert archive.read("originals/01-astronaut.png") == astronaut_png.read_bytes()
    results = sorted(name for name in names if name.startswith(f"results/01-astronaut-{job}"))
    assert results, names
    if job == "idphoto":
        assert {"results/01-astronaut-idphoto-sheet.jpg", "results/01-astronaut-idphoto-hd.jpg"} <= names
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


# --- languages, the instruction box, options, engines -----------------------------------------------------------------


def _strings(page, language: str) -> dict[str, str]:
    """The page's own string table for ``language`` (i18n.js)."""
    return page.evaluate(f"I18N[{language!r}]")


def _shown_text(page) -> str:
    """Every text a person can read or pick: the page's visible text, option labels, placeholders, the title."""
    return page.evaluate(
        """() => [document.title, document.body.innerText,
            ...[...document.querySelectorAll("option")].map((option) => option.textContent),
            ...[...document.querySelectorAll("[placeholder]")].map((input) => input.placeholder)].join("\\n")"""
    )


def _ask(page, prompt: str, outcome: str = ".instruction-ok") -> str:
    page.fill("#instruction-input", prompt)
    page.click("#instruction-button")
    page.wait_for_selector(f"#instruction-result{outcome}")
    return page.inner_text("#instruction-result")


def _same_params(page, serve_url: str, prompt: str, job_ctx) -> dict:
    """The form's fields validate to exactly the params the service answers for ``prompt``; those params."""
    answer = httpx.post(f"{serve_url}/v1/instructions", json={"prompt": prompt}, timeout=60)
    assert answer.status_code == 200, answer.text
    expected = answer.json()
    task = expected["task"]
    assert page.is_checked(f'input[name="job"][value="{task}"]')
    fields = page.evaluate(f"Object.fromEntries(jobFields({task!r}))")
    assert fields.pop("return") == "json"
    if task == "idphoto":  # the page asks for the report in its own language; the prompt does not say one
        assert fields.pop("lang") == page.evaluate("state.language")
    assert parse_job_params(task, fields, job_ctx) == parse_job_params(task, expected["params"], job_ctx)
    return expected


def test_chinese_by_default_english_on_request_and_remembered(zh_page):
    page = zh_page
    zh, en = _strings(page, "zh"), _strings(page, "en")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    assert page.get_attribute('button[data-lang="zh"]', "aria-pressed") == "true"
    assert page.inner_text("label[for=instruction-input]") == "说说你想要什么"
    assert page.inner_text('label:has(input[value="idphoto"])').strip() == "证件照"
    assert page.inner_text("#run-button") == "开始处理"
    shown = _shown_text(page)
    translated = {key: text for key, text in en.items() if text != zh[key] and key != "lang.html"}
    # whole words only: "Model" is not untranslated inside "DDColor ModelScope", a name
    untranslated = [
        text
        for text in translated.values()
        if "{" not in text and re.search(rf"(?<!\w){re.escape(text.strip())}(?!\w)", shown)
    ]
    assert not untranslated
    _screenshots(page, "zh")

    page.set_viewport_size(DESKTOP)
    page.click('button[data-lang="en"]')
    assert page.evaluate("document.documentElement.lang") == "en"
    assert page.inner_text("label[for=instruction-input]") == "Describe what you want"
    assert CJK.findall(_shown_text(page).replace("中文", "")) == []
    page.reload()
    _wait_loaded(page)
    assert page.evaluate("document.documentElement.lang") == "en"  # remembered (localStorage)
    assert page.get_attribute('button[data-lang="en"]', "aria-pressed") == "true"
    _screenshots(page, "en")


def test_a_chinese_prompt_fills_the_id_photo_options_and_the_job_runs(zh_page, serve_url, astronaut_png, job_ctx):
    page = zh_page
    summary = _ask(page, "蓝底一寸证件照")
    expected = _same_params(page, serve_url, "蓝底一寸证件照", job_ctx)
    assert expected["task"] == "idphoto"
    assert page.input_value("#idphoto-spec") == "cn-1inch" and page.input_value("#idphoto-background") == "blue"
    assert "filled" in page.get_attribute("#idphoto-background", "class")
    assert summary.startswith("已选择「证件照」") and "规格" in summary and "背景色" in summary
    assert all(note in summary for note in expected["notes"])

    page.select_option("#idphoto-layout", "6inch")  # still the user's to change
    (card,) = _run(page, [astronaut_png])
    assert "done" in card.get_attribute("class"), card.locator(".card-error").inner_text()
    assert card.locator(".report h4").inner_text().startswith(("符合", "不符合"))
    assert card.locator(".card-engine").inner_text().startswith(("引擎：", "非神经网络引擎"))
    assert card.get_by_role("link", name="下载排版相纸").count() == 1
    assert page.inner_text("#form-status").startswith("证件照完成")
    _screenshots(page, "instruction-idphoto-zh")


def test_an_english_prompt_fills_the_id_photo_options(page, serve_url, job_ctx):
    prompt = "US passport photo, white background, at most 200 KB"
    summary = _ask(page, prompt)
    expected = _same_params(page, serve_url, prompt, job_ctx)
    assert expected["params"] == {"spec": "us-passport", "background": "#ffffff", "max_kb": 200}
    assert page.input_value("#idphoto-background") == "white" and page.input_value("#idphoto-max-kb") == "200"
    assert summary.startswith("Job chosen: ID photo; filled in: Standard, Background, File at most (KB).")
    _screenshots(page, "instruction-idphoto-en")


def test_an_unclear_prompt_says_why_in_the_current_language(zh_page, serve_url):
    page = zh_page
    answer = httpx.post(f"{serve_url}/v1/instructions", json={"prompt": "你好"}, timeout=60)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "instruction_unclear"

    text = _ask(page, "你好", ".instruction-error")
    assert text.startswith("没看明白要做哪一项") and text.startswith(_strings(page, "zh")["error.instruction_unclear"])
    assert answer.json()["error"]["message"] in text and "HTTP 422 · instruction_unclear" in text
    assert page.is_checked('input[name="job"][value="restore"]')  # nothing was chosen
    page.click('button[data-lang="en"]')
    assert page.inner_text("#instruction-result").startswith(_strings(page, "en")["error.instruction_unclear"])
    _screenshots(page, "instruction-unclear")
    page.set_viewport_size(DESKTOP)
    assert _ask(page, "   ", ".instruction-error") == "Write what you want first."


def test_codeformer_shows_its_fidelity_slider(page, serve_url, job_ctx):
    assert page.is_hidden("#restore-fidelity")
    prompt = "restore this old photo with codeformer, fidelity 0.3, upscale 2x"
    _ask(page, prompt)
    assert _same_params(page, serve_url, prompt, job_ctx)["params"] == {
        "model": "codeformer",
        "fidelity": 0.3,
        "upscale": 2,
    }
    assert page.is_visible("#restore-fidelity") and page.inner_text("#restore-fidelity-value") == "0.30"
    page.select_option("#restore-bg-upsampler", "lanczos")
    fields = page.evaluate("Object.fromEntries(jobFields('restore'))")
    assert (fields["model"], fields["fidelity"], fields["bg_upsampler"]) == ("codeformer", "0.3", "lanczos")
    _screenshots(page, "codeformer")

    page.set_viewport_size(DESKTOP)
    page.select_option("#restore-model", "gpen-bfr-512")
    assert page.is_hidden("#restore-fidelity")
    assert "fidelity" not in page.evaluate("Object.fromEntries(jobFields('restore'))")


def test_engines_without_their_weights_are_named_with_the_commands_that_fix_them(page, serve_url):
    health = httpx.get(f"{serve_url}/healthz", timeout=60).json()  # 200 or 503: the body is the same report
    fixes = {model["name"]: model["fix"] for model in health["models"] if model["fix"]}
    assert "gpen-bfr-256" in fixes  # absent from the session's model store (conftest)
    assert set(health["fix"].removeprefix("portrait models pull ").split()) == set(fixes)

    assert page.is_visible("#health-notice")
    page.click("#health-details summary")
    assert page.inner_text("#health-fix") == health["fix"]
    assert set(page.inner_text("#health-commands").splitlines()) == set(fixes.values())
    assert "portrait models pull gpen-bfr-256" in page.inner_text("#health-commands")
    groups = page.inner_text("#health-groups")
    assert all(name in groups for name in fixes)
    assert "Face restoration: " in groups and "the classic restorer" in groups
    option = page.inner_text('#restore-model option[value="gpen-bfr-256"]')
    assert option == "GPEN 256 (fast) · no weights: classic engine"
    assert "no weights" not in page.inner_text('#restore-model option[value="gpen-bfr-512"]')  # present (tiny)
    _screenshots(page, "engines-en")

    page.set_viewport_size(DESKTOP)
    page.click('button[data-lang="zh"]')
    assert page.inner_text("#health-summary").startswith("人脸修复")
    assert "人脸修复：" in page.inner_text("#health-groups")
    assert set(page.inner_text("#health-commands").splitlines()) == set(fixes.values())
    assert page.inner_text("#health-fix") == health["fix"]
    _screenshots(page, "engines-zh")
