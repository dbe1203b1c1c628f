// What the service runs: its version and health (/healthz), the notice of models it cannot use, and the list of
// engines and weights that made this page's results.
"use strict";

// ---------------------------------------------------------------- what the service runs (/healthz)

// The order in which /healthz's unusable models are listed, by the manifest's task; others follow.
const MODEL_TASKS = ["face_restoration", "background_upscale", "cartoon_head", "cartoon_background", "portrait_matting",
  "face_detection", "face_landmarks"];

async function loadHealth() {
  const answer = await request("/healthz");
  // 503 still carries the report (status "failing"): read the body whatever the status code.
  state.health = answer.body && typeof answer.body.version === "string" ? { body: answer.body } : { error: answer };
  renderHealth();
  renderModels();
}

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

// ---------------------------------------------------------------- engines used

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
    const line = t("footer.engine_line", { job: jobTitle(job), engine: meta.engine, weights: describeWeights(meta) });
    entry.textContent = line + (isNeural(meta) ? "" : t("footer.non_neural"));
    return entry;
  }));
}
