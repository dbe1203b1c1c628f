"""The page learns the jobs from the service, not from its own lists: their names in both languages (the registry's
titles), each job's models in the order of preference and the options only some of them read (CodeFormer's
fidelity, from its architecture), and which jobs take a video. common.js + language.js run by Node on the real
``GET /v1/tasks`` answer (skipped without Node)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from fastapi.testclient import TestClient

from deployments.colorize.params import COLORIZE_MODELS
from deployments.restore.params import FIDELITY_MODELS, RESTORE_MODELS
from serve_app.registry import JOB_ENTRIES
from serve_app.routes import create_api
from serve_app.webpage import WEB_DIR

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")

SCENARIO = r"""
globalThis.localStorage = { getItem: () => null, setItem: () => {} };
globalThis.window = { prompt: () => null };
globalThis.document = { getElementById: () => null };
globalThis.fetch = async (url) => ({ status: url === "/v1/tasks" ? STATUS : 404, text: async () => ANSWER });
(async () => {
  const before = jobTitle("restore");
  await loadTasks();
  const titles = {};
  for (const language of ["en", "zh"]) {
    state.language = language;
    titles[language] = Object.fromEntries([...state.tasks.keys()].map((name) => [name, jobTitle(name)]));
  }
  const names = (job) => jobModels(job).map((model) => model.name);
  const models = Object.fromEntries(["restore", "colorize", "cartoon"].map((job) => [job, names(job)]));
  const fidelity = names("restore").filter((name) => modelReads("restore", name, "fidelity"));
  console.log(JSON.stringify({ before, titles, models, fidelity, video: state.videoJobs }));
})();
"""


def _run(status: int, answer: str) -> dict:
    script = "".join((WEB_DIR / name).read_text(encoding="utf-8") for name in ("i18n.js", "common.js", "language.js"))
    scenario = f"const STATUS = {status}; const ANSWER = {json.dumps(answer)};" + SCENARIO
    run = subprocess.run(["node", "-e", script + scenario], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_page_names_the_jobs_and_offers_the_models_the_service_lists():
    outcome = _run(200, TestClient(create_api()).get("/v1/tasks").text)
    assert outcome["before"] == "restore"  # until the service answers: the job's own name
    for index, language in enumerate(("en", "zh")):
        assert outcome["titles"][language] == {entry.name: entry.title[index] for entry in JOB_ENTRIES}
    assert outcome["models"] == {"restore": list(RESTORE_MODELS), "colorize": list(COLORIZE_MODELS), "cartoon": []}
    assert outcome["fidelity"] == list(FIDELITY_MODELS) == ["codeformer"]
    assert outcome["video"] == [entry.name for entry in JOB_ENTRIES if entry.frames]


def test_without_the_task_list_the_page_keeps_the_names_and_the_default_model():
    outcome = _run(503, json.dumps({"error": {"code": "unavailable", "message": "starting"}}))
    assert outcome["titles"] == {"en": {}, "zh": {}}
    assert outcome["models"] == {"restore": [], "colorize": [], "cartoon": []} and outcome["fidelity"] == []
    assert outcome["video"] == []
