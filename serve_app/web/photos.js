// The photos: choosing them, one card per photo (or video: video.js), running the chosen job on each (upload
// progress, errors; a generated portrait through the jobs API: portrait.js).
"use strict";

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
  byId("form-status").textContent = status ? t(status.key, { ...status.vars, job: jobTitle(status.job) }) : "";
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
  if (isVideo(item.file)) return runVideoItem(item, job, fields);
  if (RENDER_JOBS.includes(job)) return runAsJob(item, job, fields, RENDER_FLOW);
  setCardState(item, "card.uploading", { percent: 0 }, 0);
  const started = performance.now();
  const answer = await sendJob(item.file, { route: ROUTES[job], field: "image" }, fields, {
    uploading: (percent) => setCardState(item, "card.uploading", { percent }, percent),
    processing: () => setCardState(item, "card.processing", {}, null),
  });
  // More rendering than the route allows one request (a neural edit, generated clothes) is taken as a job: 202.
  if (answer.status === 202) return finishJob(item, job, answer.body.status_url, RENDER_FLOW, started);
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

/** POST the file as multipart field ``to.field`` to ``to.route`` with XMLHttpRequest (for upload progress); never
 * rejects. */
function sendJob(file, to, fields, on) {
  const form = new FormData();
  form.append(to.field, file, file.name);
  fields.forEach(([name, value]) => form.append(name, value));
  const key = storedKey();
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", to.route);
    xhr.setRequestHeader("Accept", "application/json");
    if (key) xhr.setRequestHeader("Authorization", `Bearer ${key}`);
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) on.uploading(Math.round((100 * event.loaded) / event.total));
    });
    xhr.upload.addEventListener("load", on.processing);
    xhr.addEventListener("load", () => {
      const answer = parseAnswer(xhr.status, xhr.responseText);
      resolve(answer.status === 401 && keyForRetry(key) ? sendJob(file, to, fields, on) : answer);
    });
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
