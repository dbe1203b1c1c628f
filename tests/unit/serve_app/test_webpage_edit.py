"""The edit job on the page: its radio, a prompt box with example prompts that fill it, the film looks loaded from
``GET /v1/edit/looks`` and titled in the page's language, prompt, look, scope, strength and identity_keep shown and
the rest under "more options", each sent under the name the job's params parse. First the page's HTML against
``EditParams``; then the page in headless Chromium (Debian's ``chromium`` driven by Playwright; skipped without it),
served with the API by uvicorn on 127.0.0.1 (the real engines in-process behind it, no Ray)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from deployments.edit.looks import default_looks
from deployments.edit.params import MAX_PROMPT_CHARS, EditParams
from serve_app.jobs import parse_job_params
from serve_app.jobs.edit import chosen_look
from serve_app.registry import PAGE_JOBS
from serve_app.routes import create_api
from serve_app.settings import Settings
from serve_app.webpage import WEB_DIR
from tests.served import chromium, i18n_tables, served

# The example prompts of issue #36, and the look each one's words pick.
EXAMPLES = {
    "让这张脸呈现80年代港风胶片质感": "hk80s",
    "给照片加点胶片颗粒感": "grain",
    "make it look like an old Kodak print": "faded",
    "让皮肤更有质感，保留皱纹": "texture",
}
SHOWN = ["prompt", "look", "scope", "strength", "identity_keep"]  # the rest: under "more options"
JOB_TIMEOUT_MS = 60_000


def _fieldset() -> str:
    html = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    return re.search(r'<fieldset id="options-edit".*?</fieldset>', html, re.DOTALL).group(0)


def _params(html: str) -> list[str]:
    return re.findall(r'data-param="(\w+)"', html)


def _schema() -> dict:
    return EditParams.model_json_schema(by_alias=True)["properties"]


@pytest.fixture(scope="module")
def tables() -> dict[str, dict[str, str]]:
    return i18n_tables(WEB_DIR)


# --- the form and the job's params ------------------------------------------------------------------------------------


def test_the_edit_job_has_its_radio_and_its_options_fieldset():
    html = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    assert "edit" in PAGE_JOBS
    assert '<input type="radio" name="job" value="edit">' in html and 'data-job="edit"' in _fieldset()


def test_prompt_look_scope_strength_and_identity_keep_are_shown_and_the_rest_are_more_options():
    shown, more = _fieldset().split('<details class="more', 1)
    assert _params(shown) == SHOWN
    assert set(_params(more)) == set(_schema()) - {"return", *SHOWN}


def test_the_prompt_box_and_the_sliders_hold_the_params_bounds():
    fieldset = _fieldset()
    box = re.search(r'<textarea id="edit-prompt"[^>]*>', fieldset).group(0)
    assert 'data-param="prompt"' in box and f'maxlength="{MAX_PROMPT_CHARS}"' in box
    assert 'data-i18n-placeholder="edit.prompt.placeholder"' in box
    for param in ("strength", "identity_keep"):
        slider = re.search(rf'<input[^>]*data-param="{param}"[^>]*>', fieldset).group(0)
        bounds = _schema()[param]
        assert f'min="{bounds["minimum"]:g}"' in slider and f'max="{bounds["maximum"]:g}"' in slider, param


def test_every_example_is_a_prompt_the_job_takes_and_its_words_pick_a_look(job_ctx):
    examples = re.findall(r'<button type="button" lang="[^"]+">([^<]+)</button>', _fieldset())
    assert examples == list(EXAMPLES)
    for example, look in EXAMPLES.items():
        assert chosen_look(parse_job_params("edit", {"prompt": example}, job_ctx))[0].name == look, example


# --- the page in a browser --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    yield from chromium()


@pytest.fixture(scope="module")
def api(local_backend):
    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings()
    return app


@pytest.fixture(scope="module")
def page_url(api):
    """``http://127.0.0.1:PORT/``: the page and the API, served for the tests of this module."""
    with served(api) as url:
        yield url + "/"


@pytest.fixture
def page(browser, page_url):
    """The page in English with the edit job chosen, once the looks and the editors are in their selects; a script
    error on the page fails the test."""
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_url)
    page.wait_for_selector('#edit-look option[value="hk80s"]', state="attached")
    page.wait_for_selector('#edit-model option[value="instructpix2pix"]', state="attached")
    page.check('input[name="job"][value="edit"]')
    yield page
    context.close()
    assert not errors, errors


def _options(page, select: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"{select} option", "options => options.map((o) => [o.value, o.textContent])")


def _sent(page) -> dict[str, str]:
    """The fields a run would post to /v1/edit."""
    return page.evaluate('Object.fromEntries(jobFields("edit"))')


def test_the_looks_come_from_the_service_titled_in_the_pages_language(page, api, tables):
    looks = TestClient(api).get("/v1/edit/looks").json()["looks"]
    for language in ("en", "zh"):
        page.click(f'button[data-lang="{language}"]')
        assert _options(page, "#edit-look") == [
            ["", tables[language]["edit.look.auto"]],
            *[[look["name"], look["title"][language]] for look in looks],
        ]
    assert page.get_attribute("#edit-prompt", "placeholder") == tables["zh"]["edit.prompt.placeholder"]


def test_each_example_fills_the_prompt_box(page):
    assert page.is_visible("#options-edit") and page.input_value("#edit-prompt") == ""
    for example in EXAMPLES:
        page.get_by_role("button", name=example).click()
        assert page.input_value("#edit-prompt") == example


def test_the_form_posts_the_options_under_the_names_the_job_parses(page, job_ctx):
    defaults = {"scope": "whole", "strength": "1", "identity_keep": "0", "steps": "20", "seed": "0", "restore": "true"}
    assert _sent(page) == {"return": "json", **defaults, "format": "auto"}
    chosen = {"prompt": "给照片加点胶片颗粒感", "look": "bw", "scope": "face", "strength": 0.5, "identity_keep": 0.25}
    page.get_by_role("button", name=chosen["prompt"]).click()
    page.select_option("#edit-look", chosen["look"])
    page.select_option("#edit-scope", chosen["scope"])
    page.fill("#edit-strength", str(chosen["strength"]))
    page.fill("#edit-identity-keep", str(chosen["identity_keep"]))
    sent = _sent(page)
    assert {name: sent[name] for name in SHOWN} == {name: str(value) for name, value in chosen.items()}
    params = parse_job_params("edit", sent, job_ctx).model_dump()
    assert {name: params[name] for name in SHOWN} == chosen
    assert page.inner_text("#edit-strength-value") == "0.50"


def test_an_editor_edits_by_the_prompt_alone_so_the_look_is_not_sent(page, job_ctx):
    """``look`` is the LOOK engine's: the job refuses it beside a named editor."""
    page.get_by_role("button", name="make it look like an old Kodak print").click()
    page.select_option("#edit-look", "bw")
    page.click("#options-edit summary")
    page.select_option("#edit-model", "instructpix2pix")
    assert page.is_disabled("#edit-look") and "look" not in _sent(page)
    assert parse_job_params("edit", _sent(page), job_ctx).model == "instructpix2pix"
    page.select_option("#edit-model", "")
    assert page.is_enabled("#edit-look") and _sent(page)["look"] == "bw"


def test_an_instruction_chooses_the_edit_job_and_its_look(page):
    page.check('input[name="job"][value="restore"]')
    page.fill("#instruction-input", "给照片加点胶片颗粒感")
    page.click("#instruction-button")
    page.wait_for_selector("#instruction-result.instruction-ok")
    assert page.is_checked('input[name="job"][value="edit"]') and page.input_value("#edit-look") == "grain"


def test_a_run_shows_the_engine_and_the_look_the_prompt_picked(page, photo_jpeg, tmp_path, tables):
    photo = tmp_path / "portrait.jpg"
    photo.write_bytes(photo_jpeg)
    page.set_input_files("#file-input", str(photo))
    page.get_by_role("button", name="让这张脸呈现80年代港风胶片质感").click()  # hk80s
    page.click("#run-button")
    page.wait_for_selector(".card.done, .card.failed", timeout=JOB_TIMEOUT_MS)
    card = page.locator(".card").first
    assert "done" in card.get_attribute("class"), card.locator(".card-error").inner_text()
    assert "look" in card.locator(".card-engine").inner_text()
    look = tables["en"]["card.look.prompt"].format(look=default_looks()["hk80s"].title_en)
    assert card.locator(".card-look").inner_text() == look
