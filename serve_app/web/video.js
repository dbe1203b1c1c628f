// Videos: a video goes to POST /v1/jobs (only the jobs GET /v1/tasks marks ``frames``: restore, cartoon); its card
// shows the job's progress, polled from GET /v1/jobs/{id} about once a second until it ends, then plays the result
// (video/mp4) in a <video controls> with a download link, or shows the job's error. A generated portrait takes the
// same way through the jobs API (runAsJob; portrait.js).
"use strict";

const VIDEO_SUFFIXES = [".mp4", ".mov", ".m4v", ".mkv", ".webm"];
const POLL_INTERVAL_MS = 1000;

function isVideo(file) {
  const name = file.name.toLowerCase();
  return file.type.startsWith("video/") || VIDEO_SUFFIXES.some((suffix) => name.endsWith(suffix));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Send one video as a job, follow it, then show the result or the error. True when it worked. */
async function runVideoItem(item, job, fields) {
  if (!state.videoJobs.includes(job)) {
    const jobs = state.videoJobs.map(jobTitle).join(t("instruction.list_separator"));
    return failJob(item, job, { ok: false, status: 0, code: "video_job", message: null, vars: { jobs } });
  }
  const sent = fields.filter(([name]) => name !== "return");
  return runAsJob(item, job, sent, { field: "video", progress: showJobProgress, blob: true, show: showVideoResult });
}

/** Send one file as a job (POST /v1/jobs), follow it, then show its result or its error. True when it worked.
 * ``flow``: the file's form field, how the card shows the job's progress, whether the result is bytes (``blob``) or
 * JSON, and ``show(item, job, result, body)``: the job's ``result`` and the result's own ``body`` on the card. */
async function runAsJob(item, job, fields, flow) {
  setCardState(item, "card.uploading", { percent: 0 }, 0);
  const started = performance.now();
  const accepted = await sendJob(item.file, { route: "/v1/jobs", field: flow.field }, [["task", job], ...fields], {
    uploading: (percent) => setCardState(item, "card.uploading", { percent }, percent),
    processing: () => setCardState(item, "card.processing", {}, null),
  });
  if (!accepted.ok) return failJob(item, job, accepted);
  return finishJob(item, job, accepted.body.status_url, flow, started);
}

/** Follow the job at ``statusUrl`` until it ends, then show its result or its error. True when it worked. */
async function finishJob(item, job, statusUrl, flow, started) {
  const finished = await followJob(statusUrl, (body) => flow.progress(item, body));
  if (!finished.ok) return failJob(item, job, finished);
  const result = await request(finished.body.result.url, { blob: flow.blob });
  if (!result.ok) return failJob(item, job, result);
  flow.show(item, job, finished.body.result, result.body);
  setCardState(item, "card.done", { seconds: ((performance.now() - started) / 1000).toFixed(1) });
  return true;
}

/** Poll the job until it ends: the answer with the job's body once it succeeded, else its error as an answer. */
async function followJob(url, onProgress) {
  for (;;) {
    const answer = await request(url);
    if (!answer.ok) return answer;
    const body = answer.body;
    if (body.status === "succeeded") return answer;
    if (body.status === "failed") return jobError(body.error);
    if (body.status === "cancelled") return { ok: false, status: 0, code: "job_cancelled", message: null, body };
    onProgress(body);
    await sleep(POLL_INTERVAL_MS);
  }
}

/** A failed job's error as an answer: the record's code and message (a job's record has no HTTP status). */
function jobError(error) {
  return { ok: false, status: 0, code: error.code, message: error.message, body: { error } };
}

function showJobProgress(item, body) {
  if (body.status === "queued") {
    showQueued(item, body, "card.video.queued");
    return;
  }
  const percent = Math.round(100 * body.progress);
  setCardState(item, "card.video.progress", { percent }, percent);
}

/** A queued job: the card says so, and what it waits for when the runner sent it back to the queue (``waiting``:
 * a model whose weights are not there yet names the command that fetches them). */
function showQueued(item, body, key) {
  if (body.waiting) setCardState(item, "card.waiting", { message: body.waiting.message }, null);
  else setCardState(item, key, {}, null);
}

function failJob(item, job, answer) {
  showError(item, job, answer);
  setCardState(item, "card.failed", {});
  return false;
}

/** The finished job's video in the card's player (the photo comparison stays hidden), its engine and download. */
function showVideoResult(item, job, result, blob) {
  revokeResultUrls(item);
  item.outcome = { job, ok: true, response: { meta: result.meta }, result: blob, sheet: null };
  item.resultUrl = keepUrl(item, blob);
  item.sheetUrl = null;
  item.card.classList.add("done");
  item.card.querySelector(".compare").hidden = true;
  item.card.querySelector(".card-video").hidden = false;
  item.card.querySelector(".card-video").src = item.resultUrl;
  renderResult(item);
  item.card.querySelector(".card-result").hidden = false;
  recordEngine(job, result.meta);
}
