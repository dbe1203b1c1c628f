// portrait-serve web page: pick photos, run a job on each, compare before/after, download everything.
// Plain JavaScript, no build step, nothing loaded from outside this service.
"use strict";

const ROUTES = { restore: "/v1/restore", idphoto: "/v1/idphoto", cartoon: "/v1/cartoon" };
const JOB_NAMES = { restore: "Restore", idphoto: "ID photo", cartoon: "Cartoon" };
const EXTENSIONS = { "image/png": "png", "image/jpeg": "jpg", "image/webp": "webp" };
const DIVIDER_STEP = 5;

const state = { items: [], running: false, engines: new Set(), specs: new Map() };

const byId = (id) => document.getElementById(id);

// ---------------------------------------------------------------- start-up

function init() {
  wireFilePicking();
  wireOptions();
  byId("job-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runAll();
  });
  byId("zip-button").addEventListener("click", downloadAll);
  byId("clear-button").addEventListener("click", () => [...state.items].forEach(removeItem));
  showJobOptions();
  loadHealth();
  loadSpecs();
  loadStyles();
}

async function getJson(url) {
  const answer = await fetch(url, { headers: { Accept: "application/json" } });
  const text = await answer.text();
  if (!answer.ok) throw new Error(apiErrorMessage(answer.status, text));
  return JSON.parse(text);
}

async function loadHealth() {
  const target = byId("service-version");
  try {
    const health = await getJson("/healthz");
    target.textContent = `portrait-serve ${health.version} (status: ${health.status})`;
  } catch (error) {
    target.textContent = `unreachable: ${error.message}`;
  }
}

async function loadSpecs() {
  const select = byId("idphoto-spec");
  try {
    const { specs } = await getJson("/v1/idphoto/specs");
    select.replaceChildren(...specs.map(specOption));
    select.value = specs.some((spec) => spec.slug === "cn-1inch") ? "cn-1inch" : specs[0].slug;
    state.specs = new Map(specs.map((spec) => [spec.slug, spec]));
    describeSpec();
  } catch (error) {
    select.replaceChildren(new Option("Standards unavailable", ""));
    byId("idphoto-spec-info").textContent = error.message;
  }
}

function specOption(spec) {
  return new Option(`${spec.name_en} · ${spec.name} (${spec.slug})`, spec.slug);
}

function describeSpec() {
  const spec = state.specs.get(byId("idphoto-spec").value);
  byId("idphoto-spec-info").textContent = spec
    ? `${spec.width_px}×${spec.height_px} px · ${spec.width_mm}×${spec.height_mm} mm · ${spec.dpi} dpi · ` +
      `background ${spec.background}`
    : "";
}

async function loadStyles() {
  const select = byId("cartoon-style");
  try {
    const { styles } = await getJson("/v1/cartoon/styles");
    select.replaceChildren(...styles.map((style) => new Option(styleLabel(style), style.name)));
    byId("cartoon-style-info").textContent = "";
  } catch (error) {
    select.replaceChildren(new Option("Styles unavailable", ""));
    byId("cartoon-style-info").textContent = `The cartoon styles could not be loaded: ${error.message}`;
  }
}

function styleLabel(style) {
  return style.engine && style.engine !== "unknown" ? `${style.name} (${style.engine})` : style.name;
}

// ---------------------------------------------------------------- choosing files and options

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

function wireOptions() {
  document.querySelectorAll('input[name="job"]').forEach((radio) => radio.addEventListener("change", showJobOptions));
  const blend = byId("restore-blend");
  blend.addEventListener("input", () => {
    byId("restore-blend-value").textContent = Number(blend.value).toFixed(2);
  });
  byId("idphoto-spec").addEventListener("change", describeSpec);
  byId("idphoto-background").addEventListener("change", () => {
    byId("idphoto-colour").disabled = byId("idphoto-background").value !== "custom";
  });
  byId("idphoto-layout").addEventListener("change", () => {
    byId("idphoto-cut-lines").disabled = byId("idphoto-layout").value === "none";
  });
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

/** The form fields the chosen job's route takes, as [name, value] pairs. */
function jobFields(job) {
  const fields = [["return", "json"]];
  if (job === "restore") {
    fields.push(["model", byId("restore-model").value], ["upscale", byId("restore-upscale").value]);
    fields.push(["blend", byId("restore-blend").value]);
  } else if (job === "idphoto") {
    fields.push(["spec", byId("idphoto-spec").value], ["render", byId("idphoto-render").value]);
    const layout = byId("idphoto-layout").value;
    fields.push(["layout", layout]);
    if (layout !== "none" && byId("idphoto-cut-lines").checked) fields.push(["cut_lines", "true"]);
    const background = idphotoBackground();
    if (background) fields.push(["background", background]);
  } else {
    fields.push(["style", byId("cartoon-style").value]);
  }
  return fields.filter(([, value]) => value !== "");
}

function idphotoBackground() {
  const choice = byId("idphoto-background").value;
  return choice === "custom" ? byId("idphoto-colour").value : choice;
}

// ---------------------------------------------------------------- one card per photo

function addFiles(files) {
  for (const file of files) {
    const item = { file, originalUrl: URL.createObjectURL(file), urls: [], outcome: null };
    item.card = createCard(item);
    state.items.push(item);
    byId("results").append(item.card);
  }
  updateControls();
}

function createCard(item) {
  const card = byId("card-template").content.firstElementChild.cloneNode(true);
  card.querySelector(".card-title").textContent = item.file.name;
  const remove = card.querySelector(".remove-button");
  remove.setAttribute("aria-label", `Remove ${item.file.name}`);
  remove.addEventListener("click", () => removeItem(item));
  wireComparison(card.querySelector(".compare"));
  return card;
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

function setCardState(item, text, progress) {
  const bar = item.card.querySelector(".card-progress");
  item.card.querySelector(".card-state-text").textContent = text;
  bar.hidden = progress === undefined;
  if (progress === null) bar.removeAttribute("value");
  else if (progress !== undefined) bar.value = progress;
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
    byId("form-status").textContent = `${JOB_NAMES[job]}: photo ${index + 1} of ${items.length}…`;
    if (!(await runItem(item, job, fields))) failed += 1;
  }
  state.running = false;
  updateControls();
  byId("form-status").textContent =
    `${JOB_NAMES[job]} finished: ${items.length - failed} done, ${failed} failed.`;
}

/** Send one photo, show its progress, then its result or the API's error. True when it worked. */
async function runItem(item, job, fields) {
  item.card.classList.remove("failed", "done");
  item.card.querySelector(".card-error").hidden = true;
  item.card.querySelector(".card-result").hidden = true;
  setCardState(item, "Uploading… 0%", 0);
  const started = performance.now();
  const answer = await sendJob(item.file, job, fields, {
    uploading: (percent) => setCardState(item, `Uploading… ${percent}%`, percent),
    processing: () => setCardState(item, "Processing on the server…", null),
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (answer.ok) {
    showResult(item, job, answer.body);
    setCardState(item, `Done in ${seconds} s`);
    return true;
  }
  showError(item, job, answer);
  setCardState(item, "Failed");
  return false;
}

/** POST the photo as multipart with XMLHttpRequest (for upload progress); never rejects. */
function sendJob(file, job, fields, on) {
  const form = new FormData();
  form.append("image", file, file.name);
  fields.forEach(([name, value]) => form.append(name, value));
  return new Promise((resolve) => {
    const request = new XMLHttpRequest();
    request.open("POST", ROUTES[job]);
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) on.uploading(Math.round((100 * event.loaded) / event.total));
    });
    request.upload.addEventListener("load", on.processing);
    request.addEventListener("load", () => resolve(parseAnswer(request.status, request.responseText)));
    request.addEventListener("error", () =>
      resolve({ ok: false, status: 0, code: "network_error", message: "The service could not be reached." }));
    request.send(form);
  });
}

function parseAnswer(status, text) {
  if (status >= 200 && status < 300) {
    try {
      return { ok: true, status, body: JSON.parse(text) };
    } catch {
      return { ok: false, status, code: "bad_response", message: "The service answered something that is not JSON." };
    }
  }
  const error = apiError(text);
  return { ok: false, status, code: error ? error.code : "http_error", message: apiErrorMessage(status, text) };
}

function apiError(text) {
  try {
    const error = JSON.parse(text).error;
    return error && typeof error.message === "string" ? error : null;
  } catch {
    return null;
  }
}

function apiErrorMessage(status, text) {
  const error = apiError(text);
  return error ? error.message : `The service answered HTTP ${status}.`;
}

function showError(item, job, answer) {
  revokeResultUrls(item);
  item.outcome = { job, ok: false, status: answer.status, error: { code: answer.code, message: answer.message } };
  item.card.classList.add("failed");
  const box = item.card.querySelector(".card-error");
  const detail = document.createElement("span");
  detail.className = "card-error-code";
  detail.textContent = `HTTP ${answer.status || "—"} · ${answer.code}`;
  box.replaceChildren(document.createTextNode(answer.message), detail);
  box.hidden = false;
}

// ---------------------------------------------------------------- results

function showResult(item, job, body) {
  const { image_b64: imageB64, sheet_b64: sheetB64, ...response } = body;
  revokeResultUrls(item);
  const result = base64ToBlob(imageB64, body.media_type);
  const sheet = sheetB64 ? base64ToBlob(sheetB64, body.sheet_media_type) : null;
  item.outcome = { job, ok: true, response, result, sheet };
  const resultUrl = keepUrl(item, result);
  item.card.classList.add("done");
  const compare = item.card.querySelector(".compare");
  setComparison(compare, item.originalUrl, resultUrl, item.file.name);
  item.card.querySelector(".card-engine").replaceChildren(...engineLine(response.meta));
  item.card.querySelector(".card-report").replaceChildren(...(response.report ? [reportView(response.report)] : []));
  item.card.querySelector(".card-downloads").replaceChildren(...downloadLinks(item, resultUrl));
  item.card.querySelector(".card-result").hidden = false;
  recordEngine(job, response.meta);
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

function downloadLinks(item, resultUrl) {
  const links = [link(resultUrl, resultName(item, "", item.outcome.result), "Download result")];
  if (item.outcome.sheet) {
    const sheetUrl = keepUrl(item, item.outcome.sheet);
    links.push(link(sheetUrl, resultName(item, "-sheet", item.outcome.sheet), "Download print sheet"));
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
  if (!isNeural(meta)) return "no model weights";
  return meta.weights.map((w) => `${w.name} (${w.sha256 ? `sha256 ${w.sha256.slice(0, 12)}` : "unpinned"})`).join(", ");
}

function engineLine(meta) {
  const parts = [document.createTextNode(`Engine: ${meta.engine} · weights: ${describeWeights(meta)} · `)];
  parts.push(document.createTextNode(`${meta.width}×${meta.height} px, ${meta.faces} face(s)`));
  if (!isNeural(meta)) {
    const badge = document.createElement("strong");
    badge.className = "badge-warning";
    badge.textContent = "non-neural engine";
    parts.unshift(badge, document.createTextNode(" "));
  }
  return parts;
}

function recordEngine(job, meta) {
  const line = `${JOB_NAMES[job]}: ${meta.engine} — ${describeWeights(meta)}${isNeural(meta) ? "" : " (non-neural)"}`;
  state.engines.add(line);
  byId("engines-used").replaceChildren(...[...state.engines].map((text) => {
    const entry = document.createElement("li");
    entry.textContent = text;
    return entry;
  }));
}

// ---------------------------------------------------------------- ID-photo compliance report

function reportView(report) {
  const box = document.createElement("section");
  box.className = `report report-${report.verdict}`;
  const heading = document.createElement("h4");
  const specName = report.spec && (report.spec.name_en || report.spec.slug);
  heading.textContent = report.verdict === "pass"
    ? `Meets the ${specName} standard`
    : `Does not meet the ${specName} standard`;
  box.append(heading);
  if (report.reasons.length) box.append(textList("Why", report.reasons));
  box.append(checksTable(report.checks));
  if (report.notes.length) box.append(textList("Notes", report.notes));
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
  table.innerHTML = "<caption>Compliance checks</caption>" +
    '<thead><tr><th scope="col">Check</th><th scope="col">Value</th>' +
    '<th scope="col">Allowed</th><th scope="col">Result</th></tr></thead>';
  const body = document.createElement("tbody");
  body.append(...checks.map(checkRow));
  table.append(body);
  wrapper.append(table);
  return wrapper;
}

function checkRow(check) {
  const row = document.createElement("tr");
  row.className = check.passed ? "check-pass" : "check-fail";
  const cells = [
    humanize(check.name),
    check.value === null ? "not measured" : formatValue(check.value, check.unit),
    formatRange(check),
    check.passed ? "✓ pass" : "✗ fail",
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
  bool: (value) => (value ? "yes" : "no"),
  faces: (value) => formatNumber(value, 0),
};

function formatValue(value, unit) {
  const format = UNIT_FORMATS[unit];
  return format ? format(value) : `${formatNumber(value, 3)} ${unit.replace(/_/g, " ")}`.trim();
}

function formatRange({ range: [low, high], unit }) {
  if (low === null && high === null) return "any";
  if (low === high) return unit === "bool" ? formatValue(low, unit) : `exactly ${formatValue(low, unit)}`;
  if (low === null) return `at most ${formatValue(high, unit)}`;
  if (high === null) return `at least ${formatValue(low, unit)}`;
  const lowText = UNIT_FORMATS[unit] ? formatValue(low, unit) : formatNumber(low, 3);
  return `${lowText} to ${formatValue(high, unit)}`;
}

// ---------------------------------------------------------------- before/after comparison

function setComparison(compare, beforeUrl, afterUrl, name) {
  const before = compare.querySelector(".compare-before");
  const after = compare.querySelector(".compare-after");
  before.src = beforeUrl;
  before.alt = `${name}, before`;
  after.src = afterUrl;
  after.alt = `${name}, after`;
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
  divider.setAttribute("aria-valuetext", `${value}% before, ${100 - value}% after`);
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
