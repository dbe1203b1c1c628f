"""The web page's routes and files, without a browser or Ray: ``GET /``, ``GET /static/...``, nothing external; its
string tables (both languages, every key the page uses) and its form (one control per option of each job's params
model, offering exactly the values the model accepts, defaulting to the model's defaults)."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from deployments.idphoto.params import NAMED_COLOURS, TRANSPARENT
from deployments.restore.params import CODEFORMER_DEFAULT_FIDELITY
from serve_app.instructions.llm import FALLBACK_INTERPRETER
from serve_app.instructions.llm import INTERPRETER as LLM
from serve_app.instructions.rules import INTERPRETER as RULES
from serve_app.instructions.vocabulary import enum_values
from serve_app.jobs import job_context, parse_job_params
from serve_app.registry import JOB_NAMES, PAGE_JOBS, job_entry
from serve_app.routes import create_api
from serve_app.settings import Settings
from serve_app.webpage import WEB_DIR
from tests.served import i18n_tables

REPO_ROOT = Path(__file__).resolve().parents[3]
# The page's scripts: classic scripts sharing one global scope, i18n.js (string tables) first, app.js (start-up) last.
SCRIPTS = tuple(sorted(path.name for path in WEB_DIR.glob("*.js")))
WEB_FILES = ("index.html", "style.css", *SCRIPTS)
# Options whose values come from the service at run time (/v1/idphoto/specs, /v1/idphoto/attire, /v1/cartoon/styles,
# /v1/edit/looks, /v1/portrait/styles, /v1/tasks), not the page.
LOADED_OPTIONS = {
    ("idphoto", "spec"),
    ("idphoto", "attire"),
    ("idphoto", "attire_color"),
    ("cartoon", "style"),
    ("edit", "look"),
    ("portrait", "style"),
    ("restore", "model"),
    ("colorize", "model"),
    ("edit", "model"),
}
# A custom ID-photo size: the spec select's "custom" choice with width, height and a unit (px or mm).
CUSTOM_SIZE = {"width_px", "height_px", "width_mm", "height_mm"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Control:
    job: str
    param: str
    tag: str
    attrs: dict[str, str | None]
    hidden: bool  # inside an element of its job's fieldset that starts hidden
    options: list[tuple[str, bool]] = field(default_factory=list)  # a select's (value, selected)

    def default(self) -> str | None:
        """What a fresh page sends (None: nothing), as ``jobFields`` in options.js reads it."""
        if self.hidden or "disabled" in self.attrs:
            return None
        if self.attrs.get("type") == "checkbox":
            return "true" if "checked" in self.attrs else "false"
        if self.tag == "select":
            chosen = [value for value, selected in self.options if selected] or [self.options[0][0]]
            return chosen[0] or None
        return self.attrs.get("value") or None


class PageParser(HTMLParser):
    """The translation keys of ``index.html`` and its option controls (``data-param``), per job fieldset."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()
        self.controls: list[Control] = []
        self._open: list[tuple[str, bool, str | None]] = []  # (tag, hidden, job)
        self._select: Control | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.keys |= {value for name, value in attrs if name.startswith("data-i18n") and value}
        job = attributes.get("data-job") or (self._open[-1][2] if self._open else None)
        inner_hidden = any(hidden for _, hidden, owner in self._open if owner == job and job is not None)
        if "data-param" in attributes:
            control = Control(job, attributes["data-param"], tag, attributes, inner_hidden)
            self.controls.append(control)
            if tag == "select":
                self._select = control
        if tag == "option" and self._select is not None:
            self._select.options.append((attributes.get("value", ""), "selected" in attributes))
        if tag not in _VOID:
            starts_hidden = "hidden" in attributes and "data-job" not in attributes
            self._open.append((tag, starts_hidden, job))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        while self._open and self._open.pop()[0] != tag:
            pass


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_api())


@pytest.fixture(scope="module")
def page() -> PageParser:
    parser = PageParser()
    parser.feed((WEB_DIR / "index.html").read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def tables() -> dict[str, dict[str, str]]:
    return i18n_tables(WEB_DIR)


def _loaded_scripts() -> list[str]:
    """The scripts ``index.html`` loads, in its order."""
    return re.findall(r'<script src="/static/([^"]+)"', (WEB_DIR / "index.html").read_text(encoding="utf-8"))


def _page_code() -> str:
    """Every script of the page but the string tables (whose own keys would name themselves)."""
    return "\n".join((WEB_DIR / name).read_text(encoding="utf-8") for name in _loaded_scripts() if name != "i18n.js")


def test_the_page_and_its_assets_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text)
    assert {f"/static/{name}" for name in (*SCRIPTS, "style.css")} <= set(assets)
    for asset in assets:
        answer = client.get(asset)
        assert answer.status_code == 200, asset
        if asset.endswith(".js"):
            assert "javascript" in answer.headers["content-type"], asset
    assert client.get("/static/style.css").headers["content-type"].startswith("text/css")


def test_the_page_loads_every_script_once_tables_first_start_up_last():
    loaded = _loaded_scripts()
    assert sorted(loaded) == list(SCRIPTS) and len(SCRIPTS) > 2
    assert (loaded[0], loaded[-1]) == ("i18n.js", "app.js")
    for name in loaded:
        text = (WEB_DIR / name).read_text(encoding="utf-8")
        assert '"use strict";' in text and "import " not in text and "export " not in text, name


def test_static_files_stay_inside_the_web_folder(client):
    assert client.get("/static/%2e%2e/routes.py").status_code == 404
    assert client.get("/static/..%2fwebpage.py").status_code == 404
    assert client.get("/static/missing.js").status_code == 404


def test_the_page_is_not_in_the_openapi_schema(client):
    assert "/" not in client.get("/openapi.json").json()["paths"]


def test_nothing_is_loaded_from_the_internet():
    for name in WEB_FILES:
        text = (WEB_DIR / name).read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE), name


def test_the_web_files_are_packaged():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["serve_app"]
    for name in WEB_FILES:
        assert any(Path("web", name).match(pattern) for pattern in patterns), name


# --- the string tables ------------------------------------------------------------------------------------------------


def test_chinese_and_english_have_the_same_keys_and_placeholders(tables):
    assert set(tables) == {"zh", "en"}
    assert set(tables["zh"]) == set(tables["en"])
    for key, chinese in tables["zh"].items():
        assert chinese.strip() and tables["en"][key].strip(), key
        placeholders = set(re.findall(r"\{(\w+)\}", chinese))
        assert placeholders == set(re.findall(r"\{(\w+)\}", tables["en"][key])), key
    assert (tables["zh"]["lang.html"], tables["en"]["lang.html"]) == ("zh-CN", "en")


def test_every_key_the_page_uses_is_in_both_tables(tables, page):
    known = tables["en"]
    namespaces = {key.split(".")[0] for key in known}
    literals = set(re.findall(r'"([a-z_]+\.[a-z0-9_.-]+)"', _page_code()))
    used_in_script = {key for key in literals if key.split(".")[0] in namespaces}
    assert used_in_script, "the scripts name no key"
    assert not (page.keys | used_in_script) - set(known)
    # Keys the scripts build from names: colours, each model choice's default and "no weights" labels, the
    # interpreters an instruction names. The jobs' own names come from the service (GET /v1/tasks).
    assert {f"colour.{name}" for name in [*NAMED_COLOURS, TRANSPARENT]} <= set(known)
    models = [task for task in PAGE_JOBS if enum_values(job_entry(task).params_model, "model")]
    assert {f"{task}.model.{label}" for task in models for label in ("default", "unusable")} <= set(known)
    assert {f"instruction.interpreter.{name}" for name in (RULES, LLM, FALLBACK_INTERPRETER)} <= set(known)


def test_the_model_labels_name_only_models_the_service_offers(tables):
    """The page labels a model it knows (``<job>.model.<name>``); which models there are comes from GET /v1/tasks."""
    for key in tables["en"]:
        job, _, rest = key.partition(".model.")
        if rest and rest not in ("default", "unusable", "hint"):
            assert rest in enum_values(job_entry(job).params_model, "model"), key


def test_a_control_shown_for_some_models_is_an_option_some_model_reads():
    """``data-model-option``: shown only while the chosen model reads it (GET /v1/tasks lists each model's options)."""
    html = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    fieldsets = re.findall(r'<fieldset id="options-(\w+)"(.*?)</fieldset>', html, re.DOTALL)
    shown = [(job, option) for job, body in fieldsets for option in re.findall(r'data-model-option="(\w+)"', body)]
    assert shown == [("restore", "fidelity")]
    for job, option in shown:
        model = job_entry(job).params_model
        assert [name for name in enum_values(model, "model") if option in model.options_of_model(name)], option


def test_the_named_colours_are_the_services():
    match = re.search(r"const NAMED_COLOURS = (\{.*?\});", _page_code(), re.DOTALL)
    assert json.loads(match.group(1)) == NAMED_COLOURS


# --- the form and the params models -----------------------------------------------------------------------------------


def _fields(task: str) -> set[str]:
    return set(job_entry(task).params_model.model_json_schema(by_alias=True)["properties"]) - {"return"}


def test_every_option_of_every_job_has_one_control(page):
    for task in PAGE_JOBS:
        params = [control.param for control in page.controls if control.job == task]
        assert len(params) == len(set(params)), task
        custom = CUSTOM_SIZE if task == "idphoto" else set()
        assert set(params) | custom == _fields(task), task


def test_each_choice_offers_exactly_what_its_params_model_accepts(page):
    selects = [control for control in page.controls if control.tag == "select"]
    assert len(selects) >= 10
    for control in selects:
        offered = {value for value, _ in control.options} - {""}
        model = job_entry(control.job).params_model
        if (control.job, control.param) in LOADED_OPTIONS:
            assert offered <= {"custom", "none"}, control.param  # filled from the service
        elif control.param == "background":
            assert offered == {*NAMED_COLOURS, TRANSPARENT, "custom"}
        else:
            assert offered == {str(value) for value in enum_values(model, control.param)}, control.param


def test_a_fresh_form_sends_the_params_models_defaults(page):
    context = job_context(Settings())
    for task in PAGE_JOBS:
        sent = {c.param: c.default() for c in page.controls if c.job == task and c.default() is not None}
        assert parse_job_params(task, sent, context) == parse_job_params(task, {}, context), task
    fidelity = next(control for control in page.controls if control.param == "fidelity")
    assert fidelity.hidden and float(fidelity.attrs["value"]) == CODEFORMER_DEFAULT_FIDELITY


# --- videos ----------------------------------------------------------------------------------------------------------


def test_the_task_list_tells_the_page_which_jobs_take_a_video(client):
    """``GET /v1/tasks``: the page sends a video only to a job whose ``frames`` is true (through ``/v1/jobs``), and
    offers whole jobs only (``step_of`` null)."""
    tasks = client.get("/v1/tasks").json()["tasks"]
    assert [task["name"] for task in tasks] == list(JOB_NAMES)
    by_name = {task["name"]: task for task in tasks}
    assert by_name["restore"] == {
        "name": "restore",
        "route": "/v1/restore",
        "title": {"en": "photo restoration", "zh": "照片修复"},
        "frames": True,
        "step_of": None,
        "on_page": True,
        "models": [
            {"name": "gfpgan-v1.4", "options": []},
            {"name": "codeformer", "options": ["fidelity"]},
            {"name": "gpen-bfr-512", "options": []},
            {"name": "gpen-bfr-256", "options": []},
        ],
    }
    assert by_name["idphoto-matte"] == {
        "name": "idphoto-matte",
        "route": "/v1/idphoto/matte",
        "title": {"en": "ID photo: cut-out", "zh": "证件照：抠图"},
        "frames": False,
        "step_of": "idphoto",
        "on_page": True,
        "models": [],
    }
    assert [task["name"] for task in tasks if task["frames"]] == ["restore", "cartoon"]
    assert [task["name"] for task in tasks if task["step_of"] is None and task["on_page"]] == list(PAGE_JOBS)
