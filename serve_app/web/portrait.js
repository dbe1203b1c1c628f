// Generated portraits: a render takes seconds on a GPU and minutes on a CPU, longer than one request may wait, so
// the page sends the photo as a job (POST /v1/jobs, task=portrait: video.js's runAsJob), counts the render's steps on
// the card, then shows the result as a photo job's card shows its own (fetched with return=json): the engine, the
// style and who chose it, the seed, and how like the person the portrait is.
"use strict";

// The jobs the page runs through the jobs API, whatever the file.
const RENDER_JOBS = ["portrait"];

// How a card follows a render's job: a portrait's, and one a route took as a job (202: photos.js).
const RENDER_FLOW = {
  field: "image",
  progress: showRenderProgress,
  blob: false,
  show: (item, job, result, body) => showResult(item, job, body),
};

/** Queued; then preparing (the compliance gate, the face, the conditions); then the steps the render has done of
 * those it planned (``progress_detail``), with the bar at the job's progress. */
function showRenderProgress(item, body) {
  const detail = body.progress_detail;
  if (body.status === "queued") {
    showQueued(item, body, "card.render.queued");
  } else if (detail && detail.steps) {
    const percent = Math.round(100 * body.progress);
    setCardState(item, "card.render.steps", { done: detail.steps_done, steps: detail.steps }, percent);
  } else {
    setCardState(item, "card.render.preparing", {}, null);
  }
}

/** A portrait's lines on its card (``meta.report.portrait``, ``meta.identity``): the style in the page's language
 * and the seed that redraws it, how like the person it is, and the service's note on a prompt it left out. */
function portraitParts(portrait, identity) {
  const known = state.portraitStyles.find((style) => style.name === portrait.style);
  const style = known ? known.title[state.language] : portrait.style;
  const key = portrait.chosen_by === "prompt" ? "card.portrait.prompt" : "card.portrait";
  const parts = [paragraph([document.createTextNode(t(key, { style, seed: portrait.seed }))], "card-portrait")];
  if (identity) parts.push(paragraph([document.createTextNode(identityLine(identity))], "card-identity"));
  if (portrait.prompt_note) parts.push(paragraph([document.createTextNode(portrait.prompt_note)], "hint"));
  return parts;
}

/** ``meta.identity``: the similarity to the photo's face and the judge's verdict, or why the judge could not say. */
function identityLine(identity) {
  if (identity.unavailable) return t("card.identity.unavailable", { reason: identity.unavailable });
  const { similarity, threshold, judge } = identity;
  return t(identity.same_person ? "card.identity.same" : "card.identity.changed", { similarity, threshold, judge });
}
