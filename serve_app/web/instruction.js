// The instruction box: POST /v1/instructions, fill the form from its answer, say what was filled or what went wrong.
"use strict";

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
    // ``engine``: the answer's wire name for the interpreter that read the prompt (rules, llm, rules-fallback).
    const { task, params, engine: interpreter, notes } = answer.body;
    state.instruction = { ok: true, task, interpreter, notes, filled: fillJob(task, params) };
  } else {
    state.instruction = { ok: false, error: answer };
  }
  state.instructionBusy = false;
  renderInstruction();
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
  const job = jobTitle(outcome.task);
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
  const interpreter = tOr(`instruction.interpreter.${outcome.interpreter}`, outcome.interpreter);
  box.replaceChildren(
    paragraph([document.createTextNode(summary)]),
    paragraph([document.createTextNode(t("instruction.notes", { interpreter }))], "instruction-notes-label"),
    notes,
  );
}

function instructionError(error) {
  if (error.code === "empty") return [document.createTextNode(t("instruction.empty"))];
  const task = error.body && error.body.error && error.body.error.details && error.body.error.details.task;
  if (error.code === "invalid_parameter" && task in ROUTES) {
    return errorParts(error, t("instruction.options_refused", { job: jobTitle(task) }));
  }
  return errorParts(error);
}
