// portrait-serve web page: describe the job or pick it, add photos, run, compare before/after, download everything.
// Plain JavaScript, no build step, nothing loaded from outside this service. Strings live in i18n.js (I18N).
"use strict";

const ROUTES = { restore: "/v1/restore", idphoto: "/v1/idphoto", cartoon: "/v1/cartoon" };
const EXTENSIONS = { "image/png": "png", "image/jpeg": "jpg", "image/webp": "webp" };
const DIVIDER_STEP = 5;
const LANGUAGE_KEY = "portrait-serve.language";
// The named backgrounds of deployments/idphoto/params.py (NAMED_COLOURS): an instruction answers with the hex value,
// the form shows the name. Strict JSON, kept in step by tests/unit/serve_app/test_webpage.py.
const NAMED_COLOURS = {
  "white": "#ffffff", "blue": "#628bce", "red": "#d74532", "black": "#000000", "dark-blue": "#4b6190",
  "light-gray": "#f2f0f0"
};
// The order in which /healthz's unusable models are listed, by the manifest's task; others follow.
const MODEL_TASKS = ["face_restoration", "background_upscale", "cartoon_head", "cartoon_background", "portrait_matting",
  "face_detection", "face_landmarks"];

const state = {
  language: "en",
  items: [],
  running: false,
  engines: new Map(), // one entry per job, engine and weights that ran: {job, meta}
  specs: new Map(),
  specsError: null,
  styles: [],
  stylesError: null,
  health: null, // {body} from /healthz (whatever its status code), or {error}
  instruction: null, // the last answer of the instruction box: {ok, task, filled, notes, engine} or {ok: false, error}
  instructionBusy: false,
  formStatus: null, // {key, job, vars}
  ready: Promise.resolve(), // the ID-photo standards and cartoon styles, loaded (or failed)
};

const byId = (id) => document.getElementById(id);

// ---------------------------------------------------------------- languages

/** The text of ``key`` in the current language, with ``{name}`` replaced by ``vars.name``. */
function t(key, vars = {}) {
  const table = I18N[state.language];
  const text = key in table ? table[key] : key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

/** ``key``'s text when the table has it (names that come from the server: styles, checks, tasks), else ``fallback``. */
function tOr(key, fallback, vars = {}) {
  return key in I18N[state.language] ? t(key, vars) : fallback;
}

/** A name the server gives in both languages (ID-photo standards). */
function localName(chinese, english) {
  return state.language === "zh" ? chinese : english;
}

function preferredLanguage() {
  const saved = savedLanguage();
  if (saved) return saved;
  for (const tag of navigator.languages || [navigator.language || ""]) {
    const base = tag.toLowerCase().split("-")[0];
    if (base in I18N) return base;
  }
  return "en";
}

function savedLanguage() {
  try {
    const saved = localStorage.getItem(LANGUAGE_KEY);
    return saved in I18N ? saved : null;
  } catch {
    return null; // storage is blocked (a sandboxed frame): the browser's preference decides
  }
}

function chooseLanguage(language) {
  state.language = language;
  try {
    localStorage.setItem(LANGUAGE_KEY, language);
  } catch {
    // storage is blocked: the choice lasts until the page is reloaded
  }
  render();
}

/** Fill every ``data-i18n`` element (text) and ``data-i18n-placeholder`` / ``-aria-label`` attribute under ``root``. */
function translateStatic(root) {
  root.querySelectorAll("[data-i18n]").forEach((element) => {
    element.textContent = t(element.dataset.i18n);
  });
  for (const attribute of ["placeholder", "aria-label"]) {
    root.querySelectorAll(`[data-i18n-${attribute}]`).forEach((element) => {
      element.setAttribute(attribute, t(element.getAttribute(`data-i18n-${attribute}`)));
    });
  }
}

/** Everything the page shows, in the current language, from the state. */
function render() {
  document.documentElement.lang = t("lang.html");
  document.title = t("page.title");
  document.querySelectorAll("[data-lang]").forEach((button) => {
    button.setAttribute("aria-pressed", String(button.dataset.lang === state.language));
  });
  translateStatic(document);
  renderRestoreModels();
  renderSpecs();
  renderStyles();
  renderHealth();
  renderInstruction();
  renderFormStatus();
  renderEngines();
  state.items.forEach(renderCard);
  syncOptions();
}

// ---------------------------------------------------------------- start-up and answers from the service

function init() {
  state.language = preferredLanguage();
  document.querySelectorAll("[data-lang]").forEach((button) => {
    button.addEventListener("click", () => chooseLanguage(button.dataset.lang));
  });
  wireFilePicking();
  wireOptions();
  byId("instruction-form").addEventListener("submit", (event) => {
    event.preventDefault();
    interpret();
  });
  byId("job-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runAll();
  });
  byId("zip-button").addEventListener("click", downloadAll);
  byId("clear-button").addEventListener("click", () => [...state.items].forEach(removeItem));
  showJobOptions();
  render();
  loadHealth();
  state.ready = Promise.all([loadSpecs(), loadStyles()]);
}

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

async function request(url, options = {}) {
  let answer;
  try {
    answer = await fetch(url, { ...options, headers: { Accept: "application/json", ...options.headers } });
  } catch {
    return NETWORK_ERROR;
  }
  return parseAnswer(answer.status, await answer.text());
}

/** What went wrong, in the current language (the API's message, in English, is shown beside it). */
function errorSummary(error) {
  return tOr(`error.${error.code}`, t("error.http", { status: error.status || "—" }));
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

async function loadHealth() {
  const answer = await request("/healthz");
  // 503 still carries the report (status "failing"): read the body whatever the status code.
  state.health = answer.body && typeof answer.body.version === "string" ? { body: answer.body } : { error: answer };
  renderHealth();
  renderRestoreModels();
}

async function loadSpecs() {
  const answer = await request("/v1/idphoto/specs");
  const select = byId("idphoto-spec");
  if (!answer.ok) {
    state.specsError = answer;
  } else {
    const { specs } = answer.body;
    state.specs = new Map(specs.map((spec) => [spec.slug, spec]));
    const chosen = state.specs.has("cn-1inch") ? "cn-1inch" : specs[0].slug;
    // defaultSelected: what an instruction's fill starts from (the service's own default standard).
    select.replaceChildren(
      ...specs.map((spec) => new Option("", spec.slug, spec.slug === chosen, spec.slug === chosen)),
      new Option("", "custom"),
    );
  }
  renderSpecs();
  syncOptions();
}

async function loadStyles() {
  const answer = await request("/v1/cartoon/styles");
  const select = byId("cartoon-style");
  if (!answer.ok) {
    state.stylesError = answer;
  } else {
    state.styles = answer.body.styles;
    select.replaceChildren(...state.styles.map((style, index) => new Option("", style.name, index === 0, index === 0)));
  }
  renderStyles();
}

// ---------------------------------------------------------------- what the service runs (/healthz)

function renderHealth() {
  const target = byId("service-version");
  const health = state.health;
  if (!health) {
    target.textContent = t("footer.checking");
  } else if (health.error) {
    target.textContent = t("footer.unreachable", { message: errorSummary(health.error) });
  } else {
    const status = tOr(`health.${health.body.status}`, health.body.status);
    target.textContent = t("footer.version", { version: health.body.version, status });
    target.dataset.status = health.body.status;
  }
  renderUnusableModels(unusableModels());
}

/** The models /healthz reports unusable (each with the command that fixes it), once each, in task order. */
function unusableModels() {
  if (!state.health || !state.health.body) return [];
  const byName = new Map();
  for (const model of state.health.body.models || []) {
    if (model.fix) byName.set(model.name, model);
  }
  const rank = (task) => (MODEL_TASKS.includes(task) ? MODEL_TASKS.indexOf(task) : MODEL_TASKS.length);
  return [...byName.values()].sort((a, b) => rank(a.task) - rank(b.task) || a.name.localeCompare(b.name));
}

function renderUnusableModels(models) {
  byId("health-notice").hidden = models.length === 0;
  const list = (names) => names.join(t("instruction.list_separator"));
  const byTask = groupBy(models, (model) => model.task);
  byId("health-summary").textContent = t("health.summary", {
    tasks: list([...byTask.keys()].map((task) => tOr(`task.${task}`, task))),
  });
  byId("health-groups").replaceChildren(...[...byTask].map(([task, members]) => {
    const states = [...groupBy(members, (model) => model.state)].map(([modelState, same]) => t("health.models", {
      models: list(same.map((model) => model.name)),
      state: tOr(`state.${modelState}`, modelState),
    }));
    const entry = document.createElement("li");
    entry.append(
      document.createTextNode(t("health.group", { task: tOr(`task.${task}`, task), models: states.join("; ") })),
      document.createElement("br"),
      span("hint", t("health.fallback", { fallback: tOr(`fallback.${task}`, t("fallback.none")) })),
    );
    return entry;
  }));
  const restricted = models.filter((model) => model.commercial_use === false).map((model) => model.name);
  byId("health-restricted").hidden = restricted.length === 0;
  byId("health-restricted").textContent = t("health.restricted", { models: list(restricted) });
  byId("health-fix").textContent = models.length ? state.health.body.fix : "";
  byId("health-commands").textContent = [...new Set(models.map((model) => model.fix))].join("\n");
}

/** ``items`` in insertion order, grouped by ``keyOf``: a Map from key to the items with it. */
function groupBy(items, keyOf) {
  const groups = new Map();
  items.forEach((item) => groups.set(keyOf(item), [...(groups.get(keyOf(item)) || []), item]));
  return groups;
}

// ---------------------------------------------------------------- the options of each job

function renderRestoreModels() {
  const unusable = new Set(unusableModels().map((model) => model.name));
  for (const option of byId("restore-model").options) {
    const label = t(option.dataset.i18n);
    option.textContent = unusable.has(option.value) ? t("restore.model.unusable", { label }) : label;
  }
}

function renderSpecs() {
  const select = byId("idphoto-spec");
  if (state.specsError) {
    select.replaceChildren(new Option(t("idphoto.spec.unavailable"), ""));
    byId("idphoto-spec-info").replaceChildren(...errorParts(state.specsError));
    return;
  }
  for (const option of select.options) {
    const spec = state.specs.get(option.value);
    if (spec) {
      option.textContent = t("idphoto.spec.option", { name: localName(spec.name, spec.name_en), slug: spec.slug });
    } else if (option.value === "custom") {
      option.textContent = t("idphoto.spec.custom");
    }
  }
}

function describeSpec() {
  const spec = state.specs.get(byId("idphoto-spec").value);
  if (state.specsError) return;
  byId("idphoto-spec-info").textContent = spec
    ? t("idphoto.spec.info", { ...spec, background: tOr(`colour.${spec.background}`, spec.background) })
    : "";
}

function styleName(name) {
  return tOr(`cartoon.style.${name}`, name);
}

function renderStyles() {
  const select = byId("cartoon-style");
  const info = byId("cartoon-style-info");
  if (state.stylesError) {
    select.replaceChildren(new Option(t("cartoon.style.unavailable"), ""));
    info.textContent = t("cartoon.style.failed", { message: errorSummary(state.stylesError) });
    return;
  }
  state.styles.forEach((style, index) => {
    const known = style.engine && style.engine !== "unknown";
    select.options[index].textContent = known
      ? t("cartoon.style.option", { name: styleName(style.name), engine: style.engine })
      : styleName(style.name);
  });
}

function wireOptions() {
  document.querySelectorAll('input[name="job"]').forEach((radio) => radio.addEventListener("change", showJobOptions));
  const form = byId("job-form");
  const changed = (event) => {
    event.target.classList.remove("filled");
    syncOptions();
  };
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
  byId("idphoto-background").addEventListener("change", () => {
    if (byId("idphoto-background").value === "transparent") byId("idphoto-format").value = "png";
    syncOptions();
  });
}

/** Show, enable and label the controls that depend on others (CodeFormer's fidelity, the custom size...). */
function syncOptions() {
  byId("restore-fidelity-field").hidden = byId("restore-model").value !== "codeformer";
  byId("restore-fidelity-value").textContent = Number(byId("restore-fidelity").value).toFixed(2);
  byId("restore-blend-value").textContent = Number(byId("restore-blend").value).toFixed(2);
  const background = byId("idphoto-background").value;
  byId("idphoto-colour").disabled = background !== "custom";
  byId("idphoto-background-hint").hidden = background !== "transparent";
  byId("idphoto-cut-lines").disabled = byId("idphoto-layout").value === "none";
  const jpeg = byId("idphoto-format").value === "jpeg";
  byId("idphoto-min-kb").disabled = !jpeg;
  byId("idphoto-max-kb").disabled = !jpeg;
  byId("idphoto-custom-size").hidden = byId("idphoto-spec").value !== "custom";
  describeSpec();
}

function selectedJob() {
  return document.querySelector('input[name="job"]:checked').value;
}

function showJobOptions() {
  const job = selectedJob();
  document.querySelectorAll("fieldset.options").forEach((fieldset) => {
    fieldset.hidden = fieldset.dataset.job !== job;
  });
}

/** Controls that send more than their own value: the custom size (spec "custom"), a custom background colour. */
const COMPOUND_FIELDS = {
  "idphoto-spec": (control) => {
    if (control.value !== "custom") return [["spec", control.value]];
    const unit = byId("idphoto-size-unit").value;
    return [[`width_${unit}`, byId("idphoto-width").value], [`height_${unit}`, byId("idphoto-height").value]];
  },
  "idphoto-background": (control) => [
    ["background", control.value === "custom" ? byId("idphoto-colour").value : control.value],
  ],
};

/** The form fields the job's route takes, as [name, value] pairs: every shown, enabled ``data-param`` control. */
function jobFields(job) {
  const fieldset = byId(`options-${job}`);
  const fields = [["return", "json"]];
  for (const control of fieldset.querySelectorAll("[data-param]")) {
    if (control.disabled || hiddenInside(control, fieldset)) continue;
    const compound = COMPOUND_FIELDS[control.id];
    if (compound) fields.push(...compound(control));
    else fields.push([control.dataset.param, control.type === "checkbox" ? String(control.checked) : control.value]);
  }
  return fields.filter(([, value]) => value !== "");
}

function hiddenInside(element, container) {
  for (let node = element; node && node !== container; node = node.parentElement) {
    if (node.hidden) return true;
  }
  return false;
}

// ---------------------------------------------------------------- the instruction box (POST /v1/instructions)

async function interpret() {
  const prompt = byId("instruction-input").value.trim();
  if (!prompt) {
    state.instruction = { ok: false, error: { code: "empty" } };
    renderInstruction();
    return;
  }
  state.instructionBusy = true;
  renderInstruction();
  const answer = await request("/v1/instructions", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt }),
  });
  if (answer.ok) {
    await state.ready; // the standards and styles must be in their selects before one is chosen
    const { task, params, engine, notes } = answer.body;
    state.instruction = { ok: true, task, engine, notes, filled: fillJob(task, params) };
  } else {
    state.instruction = { ok: false, error: answer };
  }
  state.instructionBusy = false;
  renderInstruction();
}

/** Choose ``job`` and set its options to the defaults plus ``params``; the ids of the controls set. */
function fillJob(job, params) {
  document.querySelector(`input[name="job"][value="${job}"]`).checked = true;
  showJobOptions();
  const fieldset = byId(`options-${job}`);
  resetControls(fieldset);
  const filled = Object.entries(params).flatMap(([name, value]) => fillParam(fieldset, name, value));
  filled.forEach((control) => {
    control.classList.add("filled");
    const more = control.closest("details");
    if (more) more.open = true;
  });
  syncOptions();
  return [...new Set(filled.map((control) => control.id))];
}

function resetControls(fieldset) {
  for (const control of fieldset.querySelectorAll("input, select")) {
    control.classList.remove("filled");
    if (control.type === "checkbox") {
      control.checked = control.defaultChecked;
    } else if (control.tagName === "SELECT") {
      const chosen = [...control.options].find((option) => option.defaultSelected) || control.options[0];
      control.value = chosen ? chosen.value : "";
    } else {
      control.value = control.defaultValue;
    }
  }
}

/** Set the control(s) of one option; the controls set. */
function fillParam(fieldset, name, value) {
  const size = /^(width|height)_(px|mm)$/.exec(name);
  if (size) {
    byId("idphoto-spec").value = "custom";
    byId("idphoto-size-unit").value = size[2];
    byId(`idphoto-${size[1]}`).value = String(value);
    return [byId("idphoto-spec"), byId("idphoto-size-unit"), byId(`idphoto-${size[1]}`)];
  }
  const control = fieldset.querySelector(`[data-param="${name}"]`);
  if (!control) throw new Error(`the form has no control for option ${name} of ${fieldset.dataset.job}`);
  if (control.id === "idphoto-background") return fillBackground(control, value);
  if (control.type === "checkbox") control.checked = Boolean(value);
  else control.value = String(value);
  return [control];
}

/** An instruction answers a background as ``#rrggbb`` or ``transparent``: show the colour's name when it has one. */
function fillBackground(select, value) {
  const named = Object.keys(NAMED_COLOURS).find((name) => NAMED_COLOURS[name] === value);
  if (value === "transparent" || named) {
    select.value = named || value;
    return [select];
  }
  select.value = "custom";
  byId("idphoto-colour").value = value;
  return [select, byId("idphoto-colour")];
}

/** The visible label of a control, in the current language. */
function labelOf(control) {
  const label = control.labels[0];
  const keyed = label.matches("[data-i18n]") ? label : label.querySelector("[data-i18n]");
  return t(keyed.dataset.i18n);
}

function renderInstruction() {
  const button = byId("instruction-button");
  button.disabled = state.instructionBusy;
  button.textContent = t(state.instructionBusy ? "instruction.busy" : "instruction.submit");
  const box = byId("instruction-result");
  const outcome = state.instruction;
  box.hidden = !outcome;
  if (!outcome) return;
  box.className = `instruction-result ${outcome.ok ? "instruction-ok" : "instruction-error"}`;
  if (!outcome.ok) {
    box.replaceChildren(paragraph(instructionError(outcome.error)));
    return;
  }
  const labels = [...new Set(outcome.filled.map((id) => labelOf(byId(id))))];
  const job = t(`job.${outcome.task}`);
  const summary = labels.length
    ? t("instruction.filled", { job, fields: labels.join(t("instruction.list_separator")) })
    : t("instruction.nothing_filled", { job });
  const notes = document.createElement("ul");
  notes.className = "instruction-notes";
  notes.append(...outcome.notes.map((note) => {
    const entry = document.createElement("li");
    entry.textContent = note;
    return entry;
  }));
  const engine = tOr(`instruction.engine.${outcome.engine}`, outcome.engine);
  box.replaceChildren(
    paragraph([document.createTextNode(summary)]),
    paragraph([document.createTextNode(t("instruction.notes", { engine }))], "instruction-notes-label"),
    notes,
  );
}

function instructionError(error) {
  if (error.code === "empty") return [document.createTextNode(t("instruction.empty"))];
  const task = error.body && error.body.error && error.body.error.details && error.body.error.details.task;
  if (error.code === "invalid_parameter" && task in ROUTES) {
    return errorParts(error, t("error.instruction_refused", { job: t(`job.${task}`) }));
  }
  return errorParts(error);
}

function paragraph(parts, className = "") {
  const element = document.createElement("p");
  element.className = className;
  element.append(...parts);
  return element;
}

// ---------------------------------------------------------------- choosing files

function wireFilePicking() {
  const input = byId("file-input");
  const zone = byId("drop-zone");
  input.addEventListener("change", () => {
    addFiles(input.files);
    input.value = "";
  });
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("drag-over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("drag-over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("drag-over");
    addFiles(event.dataTransfer.files);
  });
  // A photo dropped beside the zone must not replace the page.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
}

// ---------------------------------------------------------------- one card per photo

function addFiles(files) {
  for (const file of files) {
    const item = { file, originalUrl: URL.createObjectURL(file), urls: [], outcome: null, view: { key: "card.ready" } };
    item.card = createCard(item);
    state.items.push(item);
    byId("results").append(item.card);
    renderCard(item);
  }
  updateControls();
}

function createCard(item) {
  const card = byId("card-template").content.firstElementChild.cloneNode(true);
  translateStatic(card);
  card.querySelector(".card-title").textContent = item.file.name;
  card.querySelector(".remove-button").addEventListener("click", () => removeItem(item));
  wireComparison(card.querySelector(".compare"));
  return card;
}

/** The card's texts in the current language: its state, its error or its result. */
function renderCard(item) {
  const card = item.card;
  card.querySelector(".remove-button").setAttribute("aria-label", t("card.remove.label", { name: item.file.name }));
  card.querySelector(".card-state-text").textContent = t(item.view.key, item.view.vars);
  if (item.outcome && !item.outcome.ok) {
    card.querySelector(".card-error").replaceChildren(...errorParts(item.outcome.answer));
  } else if (item.outcome) {
    renderResult(item);
  }
}

function removeItem(item) {
  state.items = state.items.filter((other) => other !== item);
  URL.revokeObjectURL(item.originalUrl);
  revokeResultUrls(item);
  item.card.remove();
  updateControls();
}

function revokeResultUrls(item) {
  item.urls.forEach((url) => URL.revokeObjectURL(url));
  item.urls = [];
}

function updateControls() {
  const hasItems = state.items.length > 0;
  byId("run-button").disabled = state.running || !hasItems;
  byId("clear-button").disabled = state.running || !hasItems;
  byId("zip-button").disabled = state.running || !state.items.some((item) => item.outcome);
  byId("results-empty").hidden = hasItems;
  document.querySelectorAll(".remove-button").forEach((button) => {
    button.disabled = state.running;
  });
}

function setCardState(item, key, vars, progress) {
  item.view = { key, vars };
  item.card.querySelector(".card-state-text").textContent = t(key, vars);
  const bar = item.card.querySelector(".card-progress");
  bar.hidden = progress === undefined;
  if (progress === null) bar.removeAttribute("value");
  else if (progress !== undefined) bar.value = progress;
}

function renderFormStatus() {
  const status = state.formStatus;
  byId("form-status").textContent = status ? t(status.key, { ...status.vars, job: t(`job.${status.job}`) }) : "";
}

function setFormStatus(key, job, vars) {
  state.formStatus = { key, job, vars };
  renderFormStatus();
}

// ---------------------------------------------------------------- running jobs

async function runAll() {
  const job = selectedJob();
  const fields = jobFields(job);
  state.running = true;
  updateControls();
  const items = [...state.items];
  let failed = 0;
  for (const [index, item] of items.entries()) {
    setFormStatus("status.progress", job, { index: index + 1, count: items.length });
    if (!(await runItem(item, job, fields))) failed += 1;
  }
  state.running = false;
  updateControls();
  setFormStatus("status.finished", job, { done: items.length - failed, failed });
}

/** Send one photo, show its progress, then its result or the API's error. True when it worked. */
async function runItem(item, job, fields) {
  item.card.classList.remove("failed", "done");
  item.card.querySelector(".card-error").hidden = true;
  item.card.querySelector(".card-result").hidden = true;
  setCardState(item, "card.uploading", { percent: 0 }, 0);
  const started = performance.now();
  const answer = await sendJob(item.file, job, fields, {
    uploading: (percent) => setCardState(item, "card.uploading", { percent }, percent),
    processing: () => setCardState(item, "card.processing", {}, null),
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (answer.ok) {
    showResult(item, job, answer.body);
    setCardState(item, "card.done", { seconds });
    return true;
  }
  showError(item, job, answer);
  setCardState(item, "card.failed", {});
  return false;
}

/** POST the photo as multipart with XMLHttpRequest (for upload progress); never rejects. */
function sendJob(file, job, fields, on) {
  const form = new FormData();
  form.append("image", file, file.name);
  fields.forEach(([name, value]) => form.append(name, value));
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", ROUTES[job]);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) on.uploading(Math.round((100 * event.loaded) / event.total));
    });
    xhr.upload.addEventListener("load", on.processing);
    xhr.addEventListener("load", () => resolve(parseAnswer(xhr.status, xhr.responseText)));
    xhr.addEventListener("error", () => resolve(NETWORK_ERROR));
    xhr.send(form);
  });
}

function showError(item, job, answer) {
  revokeResultUrls(item);
  const error = { code: answer.code, message: answer.message };
  item.outcome = { job, ok: false, answer, status: answer.status, error };
  item.card.classList.add("failed");
  const box = item.card.querySelector(".card-error");
  box.replaceChildren(...errorParts(answer));
  box.hidden = false;
}

// ---------------------------------------------------------------- results

function showResult(item, job, body) {
  const { image_b64: imageB64, sheet_b64: sheetB64, ...response } = body;
  revokeResultUrls(item);
  const result = base64ToBlob(imageB64, body.media_type);
  const sheet = sheetB64 ? base64ToBlob(sheetB64, body.sheet_media_type) : null;
  item.outcome = { job, ok: true, response, result, sheet };
  item.resultUrl = keepUrl(item, result);
  item.sheetUrl = sheet ? keepUrl(item, sheet) : null;
  item.card.classList.add("done");
  setComparison(item.card.querySelector(".compare"), item.originalUrl, item.resultUrl);
  renderResult(item);
  item.card.querySelector(".card-result").hidden = false;
  recordEngine(job, response.meta);
}

function renderResult(item) {
  const { response } = item.outcome;
  const card = item.card;
  card.querySelector(".compare-before").alt = t("card.before.alt", { name: item.file.name });
  card.querySelector(".compare-after").alt = t("card.after.alt", { name: item.file.name });
  const compare = card.querySelector(".compare");
  moveDivider(compare, Number(compare.querySelector(".compare-divider").getAttribute("aria-valuenow")));
  card.querySelector(".card-engine").replaceChildren(...engineLine(response.meta));
  card.querySelector(".card-report").replaceChildren(...(response.report ? [reportView(response.report)] : []));
  card.querySelector(".card-downloads").replaceChildren(...downloadLinks(item));
}

function keepUrl(item, blob) {
  const url = URL.createObjectURL(blob);
  item.urls.push(url);
  return url;
}

function base64ToBlob(b64, mediaType) {
  const binary = atob(b64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return new Blob([bytes], { type: mediaType });
}

function stem(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(0, dot) : name;
}

function resultName(item, suffix, blob) {
  return `${stem(item.file.name)}-${item.outcome.job}${suffix}.${EXTENSIONS[blob.type] || "bin"}`;
}

function downloadLinks(item) {
  const links = [link(item.resultUrl, resultName(item, "", item.outcome.result), t("card.download"))];
  if (item.outcome.sheet) {
    links.push(link(item.sheetUrl, resultName(item, "-sheet", item.outcome.sheet), t("card.download.sheet")));
  }
  return links;
}

function link(url, filename, text) {
  const anchor = document.createElement("a");
  anchor.href = url;
  anchor.download = filename;
  anchor.className = "button-link";
  anchor.textContent = text;
  return anchor;
}

function isNeural(meta) {
  return meta.weights.length > 0;
}

function describeWeights(meta) {
  if (!isNeural(meta)) return t("card.no_weights");
  return meta.weights.map((w) => t("card.weight", {
    name: w.name,
    hash: w.sha256 ? `sha256 ${w.sha256.slice(0, 12)}` : t("card.weight.unpinned"),
  })).join(", ");
}

function engineLine(meta) {
  const text = t("card.engine", {
    engine: meta.engine, weights: describeWeights(meta), width: meta.width, height: meta.height, faces: meta.faces,
  });
  const parts = [document.createTextNode(text)];
  if (!isNeural(meta)) {
    const badge = document.createElement("strong");
    badge.className = "badge-warning";
    badge.textContent = t("card.non_neural");
    parts.unshift(badge, document.createTextNode(" "));
  }
  return parts;
}

function recordEngine(job, meta) {
  const weights = meta.weights.map((w) => `${w.name}@${w.sha256}`).join(" ");
  state.engines.set(`${job} ${meta.engine} ${weights}`, { job, meta });
  renderEngines();
}

function renderEngines() {
  const list = byId("engines-used");
  if (state.engines.size === 0) {
    const entry = document.createElement("li");
    entry.className = "hint";
    entry.textContent = t("footer.nothing");
    list.replaceChildren(entry);
    return;
  }
  list.replaceChildren(...[...state.engines.values()].map(({ job, meta }) => {
    const entry = document.createElement("li");
    const line = t("footer.engine_line", { job: t(`job.${job}`), engine: meta.engine, weights: describeWeights(meta) });
    entry.textContent = line + (isNeural(meta) ? "" : t("footer.non_neural"));
    return entry;
  }));
}

// ---------------------------------------------------------------- ID-photo compliance report

function reportView(report) {
  const box = document.createElement("section");
  box.className = `report report-${report.verdict}`;
  const heading = document.createElement("h4");
  const spec = report.spec ? localName(report.spec.name, report.spec.name_en) || report.spec.slug : "";
  heading.textContent = t(report.verdict === "pass" ? "report.pass" : "report.fail", { spec });
  box.append(heading);
  if (report.reasons.length) box.append(textList(t("report.why"), report.reasons));
  box.append(checksTable(report.checks));
  if (report.notes.length) box.append(textList(t("report.notes"), report.notes));
  return box;
}

function textList(title, lines) {
  const wrapper = document.createElement("div");
  const label = document.createElement("p");
  label.className = "report-label";
  label.textContent = title;
  const list = document.createElement("ul");
  list.append(...lines.map((line) => {
    const entry = document.createElement("li");
    entry.textContent = line;
    return entry;
  }));
  wrapper.append(label, list);
  return wrapper;
}

function checksTable(checks) {
  const wrapper = document.createElement("div");
  wrapper.className = "table-scroll";
  const table = document.createElement("table");
  table.className = "checks";
  const caption = table.createCaption();
  caption.textContent = t("report.caption");
  const headRow = table.createTHead().insertRow();
  for (const key of ["report.check", "report.value", "report.allowed", "report.result"]) {
    const cell = document.createElement("th");
    cell.scope = "col";
    cell.textContent = t(key);
    headRow.append(cell);
  }
  const body = table.createTBody();
  body.append(...checks.map(checkRow));
  wrapper.append(table);
  return wrapper;
}

function checkRow(check) {
  const row = document.createElement("tr");
  row.className = check.passed ? "check-pass" : "check-fail";
  const cells = [
    tOr(`check.${check.name}`, humanize(check.name)),
    check.value === null ? t("report.not_measured") : formatValue(check.value, check.unit),
    formatRange(check),
    t(check.passed ? "report.passed" : "report.failed"),
  ];
  row.append(...cells.map((text, index) => {
    const cell = document.createElement(index === 0 ? "th" : "td");
    if (index === 0) cell.scope = "row";
    cell.textContent = text;
    return cell;
  }));
  return row;
}

function humanize(name) {
  const text = name.replace(/_(deg|ratio)$/, "").replace(/_/g, " ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function formatNumber(value, digits) {
  return String(Number(value.toFixed(digits)));
}

const UNIT_FORMATS = {
  fraction: (value) => `${formatNumber(value * 100, 1)}%`,
  deg: (value) => `${formatNumber(value, 1)}°`,
  bool: (value) => t(value ? "report.yes" : "report.no"),
  faces: (value) => formatNumber(value, 0),
};

function formatValue(value, unit) {
  const format = UNIT_FORMATS[unit];
  return format ? format(value) : `${formatNumber(value, 3)} ${unit.replace(/_/g, " ")}`.trim();
}

function formatRange({ range: [low, high], unit }) {
  if (low === null && high === null) return t("report.any");
  if (low === high) {
    return unit === "bool" ? formatValue(low, unit) : t("report.exactly", { value: formatValue(low, unit) });
  }
  if (low === null) return t("report.at_most", { value: formatValue(high, unit) });
  if (high === null) return t("report.at_least", { value: formatValue(low, unit) });
  const lowText = UNIT_FORMATS[unit] ? formatValue(low, unit) : formatNumber(low, 3);
  return t("report.between", { low: lowText, high: formatValue(high, unit) });
}

// ---------------------------------------------------------------- before/after comparison

function setComparison(compare, beforeUrl, afterUrl) {
  const after = compare.querySelector(".compare-after");
  compare.querySelector(".compare-before").src = beforeUrl;
  after.src = afterUrl;
  after.addEventListener("load", () => {
    compare.style.aspectRatio = `${after.naturalWidth} / ${after.naturalHeight}`;
  }, { once: true });
  moveDivider(compare, 50);
}

function moveDivider(compare, percent) {
  const value = Math.min(100, Math.max(0, Math.round(percent)));
  compare.style.setProperty("--split", `${value}%`);
  const divider = compare.querySelector(".compare-divider");
  divider.setAttribute("aria-valuenow", String(value));
  divider.setAttribute("aria-valuetext", t("card.divider.value", { before: value, after: 100 - value }));
}

function wireComparison(compare) {
  const divider = compare.querySelector(".compare-divider");
  const current = () => Number(divider.getAttribute("aria-valuenow"));
  const follow = (event) => {
    const box = compare.getBoundingClientRect();
    moveDivider(compare, (100 * (event.clientX - box.left)) / box.width);
  };
  compare.addEventListener("pointerdown", (event) => {
    compare.setPointerCapture(event.pointerId);
    divider.focus();
    follow(event);
  });
  compare.addEventListener("pointermove", (event) => {
    if (compare.hasPointerCapture(event.pointerId)) follow(event);
  });
  divider.addEventListener("keydown", (event) => {
    const keys = { ArrowLeft: -DIVIDER_STEP, ArrowDown: -DIVIDER_STEP, ArrowRight: DIVIDER_STEP, ArrowUp: DIVIDER_STEP,
      Home: -100, End: 100 };
    if (!(event.key in keys)) return;
    event.preventDefault();
    moveDivider(compare, current() + keys[event.key]);
  });
}

// ---------------------------------------------------------------- download all: a STORE zip

async function downloadAll() {
  const entries = [];
  for (const [index, item] of state.items.entries()) {
    const prefix = `${String(index + 1).padStart(2, "0")}-`;
    entries.push({ name: `originals/${prefix}${item.file.name}`, data: item.file });
    if (item.outcome && item.outcome.ok) {
      entries.push({ name: `results/${prefix}${resultName(item, "", item.outcome.result)}`, data: item.outcome.result });
      if (item.outcome.sheet) {
        entries.push({ name: `results/${prefix}${resultName(item, "-sheet", item.outcome.sheet)}`, data: item.outcome.sheet });
      }
    }
    const metadata = new Blob([JSON.stringify(metadataOf(item), null, 2)], { type: "application/json" });
    entries.push({ name: `metadata/${prefix}${stem(item.file.name)}.json`, data: metadata });
  }
  const zip = await zipStore(entries);
  const anchor = link(URL.createObjectURL(zip), "portrait-results.zip", "");
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(anchor.href), 60000);
}

function metadataOf(item) {
  const source = { name: item.file.name, size: item.file.size, type: item.file.type };
  if (!item.outcome) return { source, status: "not run" };
  const { job, ok } = item.outcome;
  if (!ok) return { source, job, status: "failed", http_status: item.outcome.status, error: item.outcome.error };
  return { source, job, status: "done", response: item.outcome.response };
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes) {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function dosDateTime(date) {
  const time = (date.getHours() << 11) | (date.getMinutes() << 5) | (date.getSeconds() >> 1);
  const day = ((date.getFullYear() - 1980) << 9) | ((date.getMonth() + 1) << 5) | date.getDate();
  return { time, day };
}

/** A ZIP with every entry STOREd (no compression): local headers, data, central directory, end record. */
async function zipStore(entries) {
  const encoder = new TextEncoder();
  const { time, day } = dosDateTime(new Date());
  const parts = [];
  const directory = [];
  let offset = 0;
  for (const entry of entries) {
    const name = encoder.encode(entry.name);
    const data = new Uint8Array(await entry.data.arrayBuffer());
    const fields = { name, crc: crc32(data), size: data.length, time, day, offset };
    const local = zipHeader(0x04034b50, fields, false);
    parts.push(local, data);
    directory.push(zipHeader(0x02014b50, fields, true));
    offset += local.length + data.length;
  }
  const directorySize = directory.reduce((sum, header) => sum + header.length, 0);
  return new Blob([...parts, ...directory, zipEnd(entries.length, directorySize, offset)], { type: "application/zip" });
}

function zipHeader(signature, f, central) {
  const header = new DataView(new ArrayBuffer((central ? 46 : 30) + f.name.length));
  let at = 0;
  const u16 = (value) => { header.setUint16(at, value, true); at += 2; };
  const u32 = (value) => { header.setUint32(at, value, true); at += 4; };
  u32(signature);
  if (central) u16(20);           // version made by
  u16(20);                        // version needed to extract
  u16(0x0800);                    // flags: names are UTF-8
  u16(0);                         // method: STORE
  u16(f.time);
  u16(f.day);
  u32(f.crc);
  u32(f.size);                    // compressed size
  u32(f.size);                    // uncompressed size
  u16(f.name.length);
  u16(0);                         // extra field length
  if (central) {
    u16(0);                       // comment length
    u16(0);                       // disk number
    u16(0);                       // internal attributes
    u32(0);                       // external attributes
    u32(f.offset);                // local header offset
  }
  const bytes = new Uint8Array(header.buffer);
  bytes.set(f.name, at);
  return bytes;
}

function zipEnd(count, directorySize, directoryOffset) {
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, count, true);
  end.setUint16(10, count, true);
  end.setUint32(12, directorySize, true);
  end.setUint32(16, directoryOffset, true);
  return new Uint8Array(end.buffer);
}

init();
