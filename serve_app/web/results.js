// A card's result: before/after comparison (a video: its player), the engine that ran, downloads, the ID-photo
// compliance report, an edit's look and a generated portrait's style, seed and likeness.
"use strict";

const EXTENSIONS = { "image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "video/mp4": "mp4" };
const DIVIDER_STEP = 5;

// ---------------------------------------------------------------- results

function showResult(item, job, body) {
  const { image_b64: imageB64, sheet_b64: sheetB64, hd_b64: hdB64, ...response } = body;
  revokeResultUrls(item);
  const result = base64ToBlob(imageB64, body.media_type);
  const sheet = sheetB64 ? base64ToBlob(sheetB64, body.sheet_media_type) : null;
  const hd = hdB64 ? base64ToBlob(hdB64, body.hd_media_type) : null;
  item.outcome = { job, ok: true, response, result, sheet, hd };
  item.resultUrl = keepUrl(item, result);
  item.sheetUrl = sheet ? keepUrl(item, sheet) : null;
  item.hdUrl = hd ? keepUrl(item, hd) : null;
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
  card.querySelector(".card-video").setAttribute("aria-label", t("card.video.label", { name: item.file.name }));
  const compare = card.querySelector(".compare");
  moveDivider(compare, Number(compare.querySelector(".compare-divider").getAttribute("aria-valuenow")));
  card.querySelector(".card-engine").replaceChildren(...engineLine(response.meta));
  card.querySelector(".card-report").replaceChildren(...reportParts(response));
  card.querySelector(".card-downloads").replaceChildren(...downloadLinks(item));
}

/** What the job reports beside its image: the ID photo's compliance, the look an edit laid and who chose it, a
 * portrait's style, seed and identity (portrait.js). */
function reportParts(response) {
  if (response.report) return [reportView(response.report)];
  const report = response.meta.report || {};
  if (report.portrait) return portraitParts(report.portrait, response.meta.identity);
  const edit = report.edit;
  if (!edit || !edit.look) return [];
  const known = state.looks.find((look) => look.name === edit.look);
  const look = known ? known.title[state.language] : edit.look;
  const line = t(edit.chosen_by === "prompt" ? "card.look.prompt" : "card.look", { look });
  return [paragraph([document.createTextNode(line)], "card-look")];
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
  if (item.outcome.hd) {
    links.push(link(item.hdUrl, resultName(item, "-hd", item.outcome.hd), t("card.download.hd")));
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

// ---------------------------------------------------------------- ID-photo compliance report

function reportView(report) {
  const box = document.createElement("section");
  box.className = `report report-${report.verdict}`;
  const heading = document.createElement("h4");
  const spec = report.spec ? localName(report.spec.name, report.spec.name_en) || report.spec.slug : "";
  heading.textContent = t(report.verdict === "pass" ? "report.pass" : "report.fail", { spec });
  box.append(heading);
  // What to do about it first, where the eye lands: a photo cut by its own border can only be fixed by a retake.
  if (report.advice && report.advice.length) {
    const advice = textList(t("report.advice"), report.advice);
    advice.className = "report-advice";
    advice.setAttribute("role", "alert");
    box.append(advice);
  }
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
