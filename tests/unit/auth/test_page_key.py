"""The page asks for a key once when the service answers 401, keeps it in the browser and sends it from then on
(common.js run by Node with a fake ``fetch``, ``localStorage`` and ``prompt``; skipped without Node)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from serve_app.webpage import WEB_DIR

SCENARIO = r"""
const store = new Map();
globalThis.localStorage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, v) };
let prompts = 0;
globalThis.window = { prompt: () => { prompts += 1; return " pk_given "; } };
globalThis.t = (key) => key;
globalThis.document = { getElementById: () => null };
const sent = [];
globalThis.fetch = async (url, options) => {
  const auth = options.headers.Authorization || null;
  sent.push([url, auth]);
  const ok = auth === "Bearer pk_given";
  const body = ok ? { fine: true } : { error: { code: "unauthorized", message: "m" } };
  return { status: ok ? 200 : 401, text: async () => JSON.stringify(body) };
};
(async () => {
  const answers = await Promise.all([request("/v1/idphoto/specs"), request("/v1/cartoon/styles")]);
  const later = await request("/v1/models");
  const statuses = [...answers, later].map((a) => a.status);
  console.log(JSON.stringify({ prompts, sent, statuses, kept: store.get("portrait.apiKey") }));
})();
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")
def test_the_page_asks_for_a_key_once_keeps_it_and_sends_it():
    script = (WEB_DIR / "common.js").read_text(encoding="utf-8") + SCENARIO
    run = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout)
    assert outcome["prompts"] == 1
    assert outcome["statuses"] == [200, 200, 200]
    assert outcome["kept"] == "pk_given"
    assert outcome["sent"] == [
        ["/v1/idphoto/specs", None],
        ["/v1/cartoon/styles", None],
        ["/v1/idphoto/specs", "Bearer pk_given"],
        ["/v1/cartoon/styles", "Bearer pk_given"],
        ["/v1/models", "Bearer pk_given"],
    ]
