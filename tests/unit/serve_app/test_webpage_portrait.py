"""The portrait job on the page: its radio, the styles loaded from ``GET /v1/portrait/styles`` and titled in the page's
language, style, prompt, count and hires shown and the rest under "more options", each sent under the name the job's
params parse. A render takes minutes on a CPU, so the page sends the photo to ``POST /v1/jobs`` (``task=portrait``),
counts the render's steps on the card from ``GET /v1/jobs/{id}``, then shows the portrait with its engine, style, seed
and identity, or the job's error; a render that a synchronous route takes as a job (202) is followed the same way.
First the page's HTML against ``PortraitParams``; then the page in headless Chromium (Debian's ``chromium`` driven by
Playwright; skipped without it), served by uvicorn on 127.0.0.1 with the jobs API running in-process (no Ray; no
generative weights, so no real render finishes here: the steps and the finished card are shown from a stub of the
jobs routes, built from the API's own wire models)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from deployments.portrait.params import MAX_COUNT, MAX_PROMPT_CHARS, PortraitParams
from deployments.portrait.styles import default_styles
from serve_app.jobs import parse_job_params
from serve_app.registry import PAGE_JOBS
from serve_app.routes import create_api
from serve_app.runner.jobs_records import JobAccepted, JobOut, JobResultOut, job_json
from serve_app.schemas import ResultMeta
from serve_app.settings import Settings
from serve_app.webpage import WEB_DIR
from tests.served import chromium, i18n_tables, served
from tests.unit.jobs_api.conftest import JobsApp, make_jobs_app

SHOWN = ["style", "prompt", "count", "hires"]  # the rest: under "more options"
DEFAULTS = {"return": "json", "count": "1", "hires": "false", "format": "auto", "keep_face": "true"}
JOB_TIMEOUT_MS = 60_000
STUB_JOB = "/v1/jobs/6b18466a-0123456789abcdef01234567"
RESULT_URL = STUB_JOB + "/result"
RESULT_JSON = {"media_type", "meta"}  # return=json: beside image_b64


def _fieldset() -> str:
    html = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    return re.search(r'<fieldset id="options-portrait".*?</fieldset>', html, re.DOTALL).group(0)


def _params(html: str) -> list[str]:
    return re.findall(r'data-param="(\w+)"', html)


def _schema() -> dict:
    return PortraitParams.model_json_schema(by_alias=True)["properties"]


def _control(param: str) -> str:
    return re.search(rf'<(?:input|textarea|select)[^>]*data-param="{param}"[^>]*>', _fieldset()).group(0)


def _bounds(schema: dict) -> dict:
    """A number field's ``minimum``/``maximum``, found beside ``null`` (``anyOf``) for an optional one."""
    return next((part for part in schema.get("anyOf", [schema]) if "minimum" in part), schema)


def _number(value: float) -> str:
    """As an HTML attribute writes it: 0, 1.5, 2147483647."""
    return str(int(value)) if float(value).is_integer() else str(value)


@pytest.fixture(scope="module")
def tables() -> dict[str, dict[str, str]]:
    return i18n_tables(WEB_DIR)


# --- the form and the job's params ------------------------------------------------------------------------------------


def test_the_portrait_job_has_its_radio_and_its_options_fieldset():
    html = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    assert "portrait" in PAGE_JOBS
    assert '<input type="radio" name="job" value="portrait">' in html and 'data-job="portrait"' in _fieldset()


def test_style_prompt_count_and_hires_are_shown_and_the_rest_are_more_options():
    shown, more = _fieldset().split('<details class="more', 1)
    assert _params(shown) == SHOWN
    assert set(_params(more)) == set(_schema()) - {"return", *SHOWN}


def test_the_style_picker_waits_for_the_services_styles():
    """Only "from the prompt" in the HTML: the styles themselves come from GET /v1/portrait/styles."""
    select = re.search(r'<select id="portrait-style".*?</select>', _fieldset(), re.DOTALL).group(0)
    assert re.findall(r'<option value="([^"]*)"', select) == [""]


def test_the_controls_hold_the_params_bounds():
    assert f'maxlength="{MAX_PROMPT_CHARS}"' in _control("prompt")
    assert 'min="1"' in _control("count") and f'max="{MAX_COUNT}"' in _control("count")
    for param in ("seed", "steps", "width", "height", "likeness", "min_identity"):
        bounds = _bounds(_schema()[param])
        control = _control(param)
        assert f'min="{_number(bounds["minimum"])}"' in control, param
        assert f'max="{_number(bounds["maximum"])}"' in control, param
    for side in ("width", "height"):
        assert f'step="{_bounds(_schema()[side])["multipleOf"]}"' in _control(side), side


# --- the page in a browser --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    yield from chromium()


@pytest.fixture(scope="module")
def jobs_app(tmp_path_factory, local_backend, job_ctx) -> JobsApp:
    """The app with the jobs API running (the store in a temp folder), served as ``jobs_url``: its runner in uvicorn's
    event loop."""
    return make_jobs_app(tmp_path_factory.mktemp("portrait-jobs"), local_backend, job_ctx)


@pytest.fixture(scope="module")
def jobs_url(jobs_app):
    with served(jobs_app.client.app) as url:
        yield url + "/"


@pytest.fixture(scope="module")
def plain_url(local_backend):
    """The app without the jobs API (no bucket runner): ``POST /v1/jobs`` answers 503 ``jobs_unavailable``."""
    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings()
    with served(app) as url:
        yield url + "/"


def _open(browser, url: str) -> Iterator:
    """The page in English with the portrait job chosen, once the styles are in their select; a script error on the
    page fails the test."""
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector('#portrait-style option[value="business"]', state="attached")
    page.check('input[name="job"][value="portrait"]')
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture
def page(browser, jobs_url):
    yield from _open(browser, jobs_url)


@pytest.fixture
def plain_page(browser, plain_url):
    yield from _open(browser, plain_url)


def _options(page, select: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"{select} option", "options => options.map((o) => [o.value, o.textContent])")


def _sent(page) -> dict[str, str]:
    """The options a run would post to /v1/jobs beside ``task`` and the photo."""
    return page.evaluate('Object.fromEntries(jobFields("portrait"))')


def _add_photo(page, tmp_path, name: str, data: bytes) -> None:
    photo = tmp_path / name
    photo.write_bytes(data)
    page.set_input_files("#file-input", str(photo))


def test_the_styles_come_from_the_service_titled_in_the_pages_language(page, jobs_url, tables):
    styles = TestClient(create_api()).get("/v1/portrait/styles").json()["styles"]
    for language in ("en", "zh"):
        page.click(f'button[data-lang="{language}"]')
        assert _options(page, "#portrait-style") == [
            ["", tables[language]["portrait.style.auto"]],
            *[[style["name"], style["title"][language]] for style in styles],
        ]
    page.select_option("#portrait-style", "hanfu")
    width, height = styles[[style["name"] for style in styles].index("hanfu")]["size"]
    steps = default_styles()["hanfu"].steps
    info = tables["zh"]["portrait.style.info"].format(width=width, height=height, steps=steps)
    assert page.inner_text("#portrait-style-info") == info


def test_the_form_posts_the_options_under_the_names_the_job_parses(page, job_ctx):
    assert _sent(page) == DEFAULTS
    defaults = parse_job_params("portrait", {"return": "json"}, job_ctx)  # the card shows the result's JSON
    assert parse_job_params("portrait", _sent(page), job_ctx) == defaults
    chosen = {"style": "graduation", "prompt": "汉服写真", "count": 3, "hires": True}
    more = {"seed": 7, "steps": 20, "width": 768, "height": 1024, "likeness": 0.6, "min_identity": 0.5}
    page.select_option("#portrait-style", chosen["style"])
    page.fill("#portrait-prompt", chosen["prompt"])
    page.fill("#portrait-count", str(chosen["count"]))
    page.check("#portrait-hires")
    page.click("#options-portrait summary")
    for name, value in more.items():
        page.fill(f"#portrait-{name.replace('_', '-')}", str(value))
    page.select_option("#portrait-format", "webp")
    page.uncheck("#portrait-keep-face")
    params = parse_job_params("portrait", _sent(page), job_ctx).model_dump()
    assert params == {**params, **chosen, **more, "format": "webp", "keep_face": False}


def test_an_instruction_chooses_the_portrait_job_and_its_style(page):
    page.check('input[name="job"][value="restore"]')
    page.fill("#instruction-input", "AI写真，毕业照")
    page.click("#instruction-button")
    page.wait_for_selector("#instruction-result.instruction-ok")
    assert page.is_checked('input[name="job"][value="portrait"]')
    assert page.input_value("#portrait-style") == "graduation"


def test_a_run_submits_a_portrait_job_and_shows_the_failed_jobs_error(page, jobs_app, faceless_png, tmp_path, tables):
    """A real job of the jobs API: a photo with no face fails at its first attempt, and the card says why."""
    _add_photo(page, tmp_path, "nobody.png", faceless_png)
    page.select_option("#portrait-style", "business")
    with page.expect_request(lambda request: request.method == "POST" and "/v1/" in request.url) as submitted:
        page.click("#run-button")
    assert urlsplit(submitted.value.url).path == "/v1/jobs"
    page.wait_for_selector(".card.done, .card.failed", timeout=JOB_TIMEOUT_MS)
    card = page.locator(".card").first
    assert "failed" in card.get_attribute("class")
    error = card.locator(".card-error")
    assert error.is_visible() and tables["en"]["error.no_face"] in error.inner_text()
    assert "no_face" in error.locator(".error-code").inner_text()
    jobs = jobs_app.client.get("/v1/jobs").json()["jobs"]  # newest first, as the service recorded them
    job = next(job for job in jobs if job["task"] == "portrait")
    assert (job["task"], job["params"], job["status"]) == ("portrait", {**DEFAULTS, "style": "business"}, "failed")
    assert error.locator(".error-detail").inner_text() == job["error"]["message"]


def test_a_render_a_route_takes_as_a_job_is_followed_on_its_card(page, jobs_app, photo_jpeg, tmp_path, tables):
    """An InstructPix2Pix edit plans more rendering than one request may (202, ``accepted_as_job``): the card
    follows the job as a portrait's. Without the generative weights its attempts fail and it goes back to the queue:
    the card says what it waits for."""
    page.wait_for_selector('#edit-model option[value="instructpix2pix"]', state="attached")
    page.check('input[name="job"][value="edit"]')
    page.fill("#edit-prompt", "make it look like an old Kodak print")
    page.click("#options-edit summary")
    page.select_option("#edit-model", "instructpix2pix")
    _add_photo(page, tmp_path, "me.jpg", photo_jpeg)
    with page.expect_response(lambda response: urlsplit(response.url).path == "/v1/edit") as answered:
        page.click("#run-button")
    assert answered.value.status == 202
    following = {tables["en"][key] for key in ("card.render.queued", "card.render.preparing")}
    page.wait_for_function(
        "(texts) => texts.includes(document.querySelector('.card-state-text').textContent)", arg=list(following)
    )
    job = jobs_app.client.get(answered.value.json()["status_url"]).json()
    assert (job["task"], job["params"]["model"]) == ("edit", "instructpix2pix")
    # Its attempts fail for want of the weights; back in the queue, the card says what it waits for.
    waiting = tables["en"]["card.waiting"].split("{message}")[0]
    page.wait_for_function(
        "(prefix) => document.querySelector('.card-state-text').textContent.startsWith(prefix)",
        arg=waiting,
        timeout=JOB_TIMEOUT_MS,
    )
    assert "portrait models pull" in page.locator(".card-state-text").inner_text()


def test_without_the_jobs_api_the_card_says_so(plain_page, photo_jpeg, tmp_path, tables):
    _add_photo(plain_page, tmp_path, "me.jpg", photo_jpeg)
    plain_page.click("#run-button")
    plain_page.wait_for_selector(".card.failed", timeout=JOB_TIMEOUT_MS)
    error = plain_page.locator(".card-error")
    assert tables["en"]["error.jobs_unavailable"] in error.inner_text()
    assert error.locator(".error-code").inner_text() == "HTTP 503 · jobs_unavailable"
    assert "bucket runner" in error.locator(".error-detail").inner_text()  # the API's own message, beside


# --- the steps and the finished card, from a stub of the jobs routes ------------------------------------------------


def _job(status: str, progress: float, **more) -> dict:
    """A ``GET /v1/jobs/{id}`` body, through the API's own wire model."""
    now = datetime.now(UTC)
    out = JobOut(
        id=STUB_JOB.rsplit("/", 1)[1],
        task="portrait",
        status=status,
        progress=progress,
        created_at=now,
        updated_at=now,
        expires_at=now + timedelta(days=1),
        params={"return": "json"},
        status_url=STUB_JOB,
        result_url=RESULT_URL,
        **more,
    )
    return job_json(out)


def _meta(photo: bytes) -> ResultMeta:
    identity = {"face": 0, "similarity": 0.8123, "same_person": True, "judge": "dlib", "threshold": 0.6}
    report = {"portrait": {"style": "hk80s", "chosen_by": "prompt", "seed": 7, "prompt_note": None}}
    return ResultMeta(
        job="portrait",
        params={"seed": 7, "style": "hk80s"},
        engine="diffusers-sdxl",
        weights=[{"name": "sdxl-base-1.0", "sha256": "ab" * 32}],
        faces=1,
        width=256,
        height=256,
        media_type="image/jpeg",
        bytes=len(photo),
        report=report,
        identity=identity,
        version="test",
    )


def _wait_for_state(page, text: str) -> None:
    page.wait_for_function(f"() => document.querySelector('.card-state-text').textContent === {json.dumps(text)}")


def test_the_card_counts_the_steps_then_shows_the_portrait_with_its_style_seed_and_identity(
    page, photo_jpeg, tmp_path, tables
):
    meta = _meta(photo_jpeg)
    result = JobResultOut(url=RESULT_URL, media_type="image/jpeg", bytes=len(photo_jpeg), meta=meta)
    image_b64 = base64.b64encode(photo_jpeg).decode()  # the page shows what it is given: the photo stands in
    job = {"now": _job("queued", 0.0)}  # what GET /v1/jobs/{id} answers; the test moves it on
    answers = {
        "/v1/jobs": lambda: (202, JobAccepted.model_validate(job["now"]).model_dump()),
        STUB_JOB: lambda: (200, job["now"]),
        RESULT_URL: lambda: (200, {"image_b64": image_b64, **result.model_dump(mode="json", include=RESULT_JSON)}),
    }

    def answer(route):
        status, body = answers[urlsplit(route.request.url).path]()
        route.fulfill(status=status, content_type="application/json", body=json.dumps(body))

    page.route(re.compile(r".*/v1/jobs(/.*)?$"), answer)
    _add_photo(page, tmp_path, "me.jpg", photo_jpeg)
    page.click("#run-button")
    _wait_for_state(page, tables["en"]["card.render.queued"])
    job["now"] = _job("running", 0.4, progress_detail={"steps_done": 12, "steps": 30})
    _wait_for_state(page, tables["en"]["card.render.steps"].format(done=12, steps=30))
    card = page.locator(".card").first
    assert card.locator(".card-progress").get_attribute("value") == "40"
    page.click('button[data-lang="zh"]')
    assert card.locator(".card-state-text").inner_text() == "生成中… 步数 12 / 30"
    page.click('button[data-lang="en"]')

    job["now"] = _job("succeeded", 1.0, result=result)
    page.wait_for_selector(".card.done", timeout=JOB_TIMEOUT_MS)
    assert "diffusers-sdxl" in card.locator(".card-engine").inner_text()
    chosen = tables["en"]["card.portrait.prompt"].format(style=default_styles()["hk80s"].title_en, seed=7)
    assert card.locator(".card-portrait").inner_text() == chosen
    same = tables["en"]["card.identity.same"].format(similarity=0.8123, judge="dlib", threshold=0.6)
    assert card.locator(".card-identity").inner_text() == same
    assert card.locator(".compare-after").get_attribute("src").startswith("blob:")
