// The options of each job: one control per option of the job's params model (index.html), the ID-photo standards,
// cartoon styles, film looks, portrait styles and models loaded from the service, the fields a run sends, and filling
// the form from an instruction or an example prompt.
"use strict";

// The named backgrounds of deployments/idphoto/params.py (NAMED_COLOURS): an instruction answers with the hex value,
// the form shows the name. Strict JSON, kept in step by tests/unit/serve_app/test_webpage.py.
const NAMED_COLOURS = {
  "white": "#ffffff", "blue": "#628bce", "red": "#d74532", "black": "#000000", "dark-blue": "#4b6190",
  "light-gray": "#f2f0f0"
};

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

/** A picker filled with named entries (``{name, title: {zh, en}}``) from ``field`` of ``url``'s answer, kept in
 * ``state[key]``; without the list the picker keeps its first choice only (the page's own, or the prompt's). */
async function loadNamed(url, field, key, selectId) {
  const answer = await request(url);
  state[key] = answer.ok ? answer.body[field] : [];
  const select = byId(selectId);
  select.replaceChildren(select.options[0], ...state[key].map((entry) => new Option("", entry.name)));
}

/** A picker's entries by their titles in the page's language. */
function renderTitles(selectId, entries) {
  const select = byId(selectId);
  entries.forEach((entry, index) => {
    select.options[index + 1].textContent = entry.title[state.language];
  });
}

async function loadAttire() {
  await loadNamed("/v1/idphoto/attire", "attire", "attire", "idphoto-attire");
  renderAttire();
}

/** The templates by their titles in the page's language, and the colours the chosen one offers. */
function renderAttire() {
  const select = byId("idphoto-attire");
  renderTitles("idphoto-attire", state.attire);
  const chosen = state.attire.find((template) => template.name === select.value);
  const colours = byId("idphoto-attire-color");
  const keep = colours.value;
  const offered = Object.keys(chosen ? chosen.colours : {});
  colours.replaceChildren(colours.options[0], ...offered.map((colour) => new Option(colour, colour)));
  colours.value = [...colours.options].some((option) => option.value === keep) ? keep : "";
  colours.disabled = !chosen;
}

async function loadLooks() {
  await loadNamed("/v1/edit/looks", "looks", "looks", "edit-look");
  renderLooks();
}

function renderLooks() {
  renderTitles("edit-look", state.looks);
}

async function loadPortraitStyles() {
  await loadNamed("/v1/portrait/styles", "styles", "portraitStyles", "portrait-style");
  renderPortraitStyles();
}

function renderPortraitStyles() {
  renderTitles("portrait-style", state.portraitStyles);
}

/** The chosen style's own size and steps: what the empty width, height and steps fields leave to it. */
function describePortraitStyle() {
  const style = state.portraitStyles.find((known) => known.name === byId("portrait-style").value);
  const [width, height] = style ? style.size : [];
  const info = style ? t("portrait.style.info", { width, height, steps: style.steps }) : "";
  byId("portrait-style-info").textContent = info;
}

/** The model choice of each job that has one: the page's default (the service chooses), then the job's models from
 * GET /v1/tasks in its order of preference (only the default when it did not answer). */
function fillModels() {
  for (const select of modelSelects()) {
    const job = select.closest("fieldset").dataset.job;
    select.replaceChildren(select.options[0], ...jobModels(job).map((model) => new Option("", model.name)));
  }
  renderModels();
}

function modelSelects() {
  return document.querySelectorAll('fieldset.options select[data-param="model"]');
}

// ---------------------------------------------------------------- the options of each job

/** The job's (shorter) label of a model when i18n.js has one, else its name; a model /healthz reports without its
 * weights says so. */
function renderModels() {
  const unusable = new Set(unusableModels().map((model) => model.name));
  for (const select of modelSelects()) {
    const job = select.closest("fieldset").dataset.job;
    for (const option of select.options) {
      const label = option.value ? tOr(`${job}.model.${option.value}`, option.value) : t(`${job}.model.default`);
      option.textContent = unusable.has(option.value) ? t(`${job}.model.unusable`, { label }) : label;
    }
  }
}

/** Each job's radio button named as the service names the job (capitalized: it starts a label). */
function renderJobTitles() {
  document.querySelectorAll('input[name="job"]').forEach((radio) => {
    const title = jobTitle(radio.value);
    radio.parentElement.querySelector(".job-title").textContent = title.charAt(0).toUpperCase() + title.slice(1);
  });
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
  byId("idphoto-attire").addEventListener("change", renderAttire);
  byId("edit-examples").addEventListener("click", (event) => {
    const example = event.target.closest("button");
    if (example) useExample(example.textContent);
  });
  byId("idphoto-background").addEventListener("change", () => {
    if (byId("idphoto-background").value === "transparent") byId("idphoto-format").value = "png";
    syncOptions();
  });
}

/** Show, enable and label the controls that depend on others (options only some models read, a custom size...). */
function syncOptions() {
  for (const field of document.querySelectorAll("[data-model-option]")) {
    const fieldset = field.closest("fieldset");
    const model = fieldset.querySelector('[data-param="model"]').value;
    field.hidden = !modelReads(fieldset.dataset.job, model, field.dataset.modelOption);
  }
  byId("restore-fidelity-value").textContent = Number(byId("restore-fidelity").value).toFixed(2);
  byId("restore-blend-value").textContent = Number(byId("restore-blend").value).toFixed(2);
  byId("edit-strength-value").textContent = Number(byId("edit-strength").value).toFixed(2);
  byId("edit-identity-keep-value").textContent = Number(byId("edit-identity-keep").value).toFixed(2);
  byId("edit-look").disabled = byId("edit-model").value !== ""; // an editor edits by the prompt alone, never a look
  describePortraitStyle();
  const background = byId("idphoto-background").value;
  byId("idphoto-background-hint").hidden = background !== "transparent";
  // the job refuses an engine without clothes to draw
  byId("idphoto-attire-engine").disabled = byId("idphoto-attire").value === "none";
  const backdrop = byId("idphoto-backdrop").value !== "";
  byId("idphoto-background").disabled = backdrop;
  byId("idphoto-render").disabled = backdrop;
  byId("idphoto-colour").disabled = backdrop || background !== "custom";
  byId("idphoto-cut-lines").disabled = byId("idphoto-layout").value === "none";
  byId("idphoto-canvas").hidden = byId("idphoto-layout").value !== "custom";
  for (const output of byId("options-idphoto").querySelectorAll("details output")) {
    const value = Number(byId(output.htmlFor.value).value);
    output.textContent = output.id === "idphoto-watermark-opacity-value" ? value.toFixed(2) : String(value);
  }
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

/** Controls that send more than their own value: the custom size (spec "custom"), a custom background colour,
 * the page's language. */
const COMPOUND_FIELDS = {
  "idphoto-spec": (control) => {
    if (control.value !== "custom") return [["spec", control.value]];
    const unit = byId("idphoto-size-unit").value;
    return [[`width_${unit}`, byId("idphoto-width").value], [`height_${unit}`, byId("idphoto-height").value]];
  },
  // The report's texts (reasons, advice) in the page's language.
  "idphoto-lang": () => [["lang", state.language]],
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

// ---------------------------------------------------------------- filling the form (an instruction, an example)

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
  for (const control of fieldset.querySelectorAll("input, select, textarea")) {
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

/** An example prompt into the edit's prompt box, as written: the job reads Chinese and English alike. */
function useExample(prompt) {
  const box = byId("edit-prompt");
  box.value = prompt;
  box.classList.remove("filled");
  box.focus();
}
