// portrait-serve web page: what every script shares: the routes, the page's state, the jobs the service runs,
// reading the service's answers and their errors, small DOM helpers. Classic scripts loaded in order by index.html; app.js (last) starts the page.
"use strict";

// Each job's own route (a generated portrait is sent to POST /v1/jobs instead: portrait.js).
const ROUTES = {
  restore: "/v1/restore", idphoto: "/v1/idphoto", cartoon: "/v1/cartoon", colorize: "/v1/colorize", edit: "/v1/edit",
  portrait: "/v1/portrait"
};

const state = {
  language: "en",
  items: [],
  running: false,
  engines: new Map(), // one entry per job, engine and weights that ran: {job, meta}
  specs: new Map(),
  specsError: null,
  styles: [],
  stylesError: null,
  attire: [], // the ID photo's attire templates (GET /v1/idphoto/attire): {name, title, colours, tiers}
  looks: [], // the edit job's film looks (GET /v1/edit/looks): {name, title, engine}
  portraitStyles: [], // the portrait styles (GET /v1/portrait/styles): {name, title, size, steps...}
  health: null, // {body} from /healthz (whatever its status code), or {error}
  instruction: null, // the last answer of the instruction box: {ok, task, filled, notes, interpreter} or {ok: false, error}
  instructionBusy: false,
  formStatus: null, // {key, job, vars}
  tasks: new Map(), // the jobs the service runs (GET /v1/tasks), by name: {route, title, frames, step_of, models}
  videoJobs: [], // the jobs that take a video (GET /v1/tasks: frames)
  ready: Promise.resolve(), // the standards, styles, attire, looks, portrait styles and jobs, loaded (or failed)
};

const byId = (id) => document.getElementById(id);

// ---------------------------------------------------------------- answers from the service

/** An answer of the service, never a rejection: {ok: true, status, body} or {ok: false, status, code, message, body}
 * (``message``: the API's own, null when it sent none; ``body``: the JSON it sent, if any). */
function parseAnswer(status, text) {
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null; // not JSON: a proxy's page, or a cut connection; the status code says the rest
  }
  if (status >= 200 && status < 300) {
    if (body === null) return { ok: false, status, code: "bad_response", message: null, body };
    return { ok: true, status, body };
  }
  const error = body && body.error && typeof body.error.message === "string" ? body.error : null;
  return { ok: false, status, code: error ? error.code : "http_error", message: error ? error.message : null, body };
}

const NETWORK_ERROR = { ok: false, status: 0, code: "network_error", message: null, body: null };

// ---------------------------------------------------------------- the jobs the service runs

/** GET /v1/tasks, the job registry: each job's names in English and Chinese, its models in the order of preference
 * (each with the options only it reads, CodeFormer's fidelity), whether it takes a video. None when it did not answer:
 * the page then names each job by its own name and offers only the default model. */
async function loadTasks() {
  const answer = await request("/v1/tasks");
  const tasks = answer.ok ? answer.body.tasks : [];
  state.tasks = new Map(tasks.map((task) => [task.name, task]));
  state.videoJobs = tasks.filter((task) => task.frames).map((task) => task.name);
}

/** A job's name in the page's language, as the service gives it (the registry's title). */
function jobTitle(name) {
  const task = state.tasks.get(name);
  return task ? task.title[state.language] : name;
}

/** The values of a job's ``model`` option, best first: [{name, options}]. */
function jobModels(job) {
  const task = state.tasks.get(job);
  return task ? task.models : [];
}

/** Whether ``model`` of ``job`` reads ``option`` (an option only some models read: CodeFormer's fidelity). */
function modelReads(job, model, option) {
  const found = jobModels(job).find((candidate) => candidate.name === model);
  return Boolean(found && found.options.includes(option));
}

// ---------------------------------------------------------------- the API key, when the service asks for one

const KEY_STORAGE = "portrait.apiKey";
let keyDeclined = false; // asked once and cancelled: do not ask again until the page reloads

function storedKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

function keyHeaders(key) {
  return key ? { Authorization: `Bearer ${key}` } : {};
}

/** After a 401 for a request sent with ``sentKey``: whether to send it again. Asks for a key once, keeps it in the
 * browser; when another request already got a new key meanwhile, just retries with it. */
function keyForRetry(sentKey) {
  if (storedKey() !== sentKey) return true;
  if (keyDeclined) return false;
  const given = (window.prompt(t("key.prompt")) || "").trim();
  if (!given) {
    keyDeclined = true;
    return false;
  }
  localStorage.setItem(KEY_STORAGE, given);
  return true;
}

/** ``options.blob``: a success's body is the bytes (a Blob), not JSON (a video job's result). */
async function request(url, options = {}) {
  const key = storedKey();
  const { blob, ...init } = options;
  let answer;
  try {
    const headers = { Accept: blob ? "*/*" : "application/json", ...keyHeaders(key), ...init.headers };
    answer = await fetch(url, { ...init, headers });
    if (blob && answer.ok) return { ok: true, status: answer.status, body: await answer.blob() };
  } catch {
    return NETWORK_ERROR;
  }
  const parsed = parseAnswer(answer.status, await answer.text());
  return parsed.status === 401 && keyForRetry(key) ? request(url, options) : parsed;
}

/** What went wrong, in the current language (the API's message, in English, is shown beside it). */
function errorSummary(error) {
  return tOr(`error.${error.code}`, t("error.http", { status: error.status || "—" }), error.vars);
}

function errorParts(error, summary = errorSummary(error)) {
  const parts = [document.createTextNode(summary)];
  if (error.message) parts.push(span("error-detail", error.message));
  parts.push(span("error-code", t("error.code_line", { status: error.status || "—", code: error.code })));
  return parts;
}

function span(className, text) {
  const element = document.createElement("span");
  element.className = className;
  element.textContent = text;
  return element;
}

// ---------------------------------------------------------------- small helpers

/** ``items`` in insertion order, grouped by ``keyOf``: a Map from key to the items with it. */
function groupBy(items, keyOf) {
  const groups = new Map();
  items.forEach((item) => groups.set(keyOf(item), [...(groups.get(keyOf(item)) || []), item]));
  return groups;
}

function paragraph(parts, className = "") {
  const element = document.createElement("p");
  element.className = className;
  element.append(...parts);
  return element;
}
