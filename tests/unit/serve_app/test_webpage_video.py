"""The page's video flow without a browser: video.js's polling of ``GET /v1/jobs/{id}`` (progress until an end
state, then the result or the job's error) and which files count as videos (common.js + video.js run by Node with a
fake ``fetch`` and timers; skipped without Node)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from serve_app.webpage import WEB_DIR

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")

FAKES = r"""
globalThis.localStorage = { getItem: () => null, setItem: () => {} };
globalThis.window = { prompt: () => null };
globalThis.t = (key) => key;
globalThis.document = { getElementById: () => null };
const waits = [];
globalThis.setTimeout = (resolve, ms) => { waits.push(ms); resolve(); };
const sent = [];
function serve(answers) {
  globalThis.fetch = async (url, options) => {
    sent.push([url, options.headers.Accept]);
    const [status, body] = answers.shift();
    return { status, ok: status < 300, text: async () => JSON.stringify(body), blob: async () => `blob of ${url}` };
  };
}
"""


def _run(scenario: str) -> dict:
    script = "".join((WEB_DIR / name).read_text(encoding="utf-8") for name in ("common.js", "video.js"))
    run = subprocess.run(["node", "-e", script + FAKES + scenario], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _job(status: str, progress: float, **more) -> dict:
    return {"id": "j1", "status": status, "progress": progress, **more}


def test_a_job_is_polled_each_second_with_its_progress_until_it_succeeds():
    result = {"url": "/v1/jobs/j1/result", "media_type": "video/mp4", "bytes": 9, "meta": {}}
    answers = [[200, _job("queued", 0)], [200, _job("running", 0.25)], [200, _job("running", 0.5)]]
    answers.append([200, _job("succeeded", 1, result=result)])
    outcome = _run(f"""
serve({json.dumps(answers)});
(async () => {{
  const seen = [];
  const answer = await followJob("/v1/jobs/j1", (body) => seen.push([body.status, body.progress]));
  console.log(JSON.stringify({{ ok: answer.ok, result: answer.body.result, seen, waits, polls: sent.length }}));
}})();
""")
    assert outcome == {
        "ok": True,
        "result": result,
        "seen": [["queued", 0], ["running", 0.25], ["running", 0.5]],
        "waits": [1000, 1000, 1000],
        "polls": 4,
    }


def test_a_failed_job_stops_the_polling_and_answers_its_error():
    error = {
        "code": "video_too_large",
        "message": "over the limit max_frames=15000",
        "details": {"limit": "max_frames"},
    }
    answers = [[200, _job("running", 0.1)], [200, _job("failed", 1, error=error)], [200, _job("running", 0)]]
    outcome = _run(f"""
serve({json.dumps(answers)});
(async () => {{
  const answer = await followJob("/v1/jobs/j1", () => {{}});
  console.log(JSON.stringify({{ answer, polls: sent.length }}));
}})();
""")
    assert outcome == {
        "answer": {
            "ok": False,
            "status": 0,
            "code": "video_too_large",
            "message": error["message"],
            "body": {"error": error},
        },
        "polls": 2,
    }


def test_a_cancelled_job_and_a_refused_poll_end_it_too():
    answers = [[200, _job("cancelled", 0.3)], [404, {"error": {"code": "not_found", "message": "no job j2"}}]]
    outcome = _run(f"""
serve({json.dumps(answers)});
(async () => {{
  const cancelled = await followJob("/v1/jobs/j1", () => {{}});
  const missing = await followJob("/v1/jobs/j2", () => {{}});
  const answers = [cancelled, missing];
  console.log(JSON.stringify({{ codes: answers.map((a) => a.code), statuses: answers.map((a) => a.status) }}));
}})();
""")
    assert outcome == {"codes": ["job_cancelled", "not_found"], "statuses": [0, 404]}


def test_the_result_is_fetched_as_bytes_and_videos_are_told_from_photos():
    outcome = _run("""
serve([[200, null]]);
(async () => {
  const answer = await request("/v1/jobs/j1/result", { blob: true });
  const files = [["a.MP4", ""], ["b.mkv", ""], ["c", "video/webm"], ["d.mov", "video/quicktime"],
    ["e.png", "image/png"], ["f.jpg", ""]];
  const videos = files.map(([name, type]) => isVideo({ name, type }));
  console.log(JSON.stringify({ body: answer.body, sent, videos }));
})();
""")
    assert outcome == {
        "body": "blob of /v1/jobs/j1/result",
        "sent": [["/v1/jobs/j1/result", "*/*"]],
        "videos": [True, True, True, True, False, False],
    }
