// portrait-serve web page: describe the job or pick it, add photos, run, compare before/after, download everything.
// Plain JavaScript, no build step, nothing loaded from outside this service. Strings live in i18n.js (I18N); each
// part of the page has its own script (index.html loads them in order); this one, last, renders and wires them.
"use strict";

/** Everything the page shows, in the current language, from the state. */
function render() {
  document.documentElement.lang = t("lang.html");
  document.title = t("page.title");
  document.querySelectorAll("[data-lang]").forEach((button) => {
    button.setAttribute("aria-pressed", String(button.dataset.lang === state.language));
  });
  translateStatic(document);
  renderJobTitles();
  renderModels();
  renderSpecs();
  renderStyles();
  renderAttire();
  renderLooks();
  renderPortraitStyles();
  renderHealth();
  renderInstruction();
  renderFormStatus();
  renderEngines();
  state.items.forEach(renderCard);
  syncOptions();
}

// ---------------------------------------------------------------- start-up

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
  const tasks = loadTasks().then(() => {
    fillModels();
    renderJobTitles();
    syncOptions();
  });
  state.ready = Promise.all([loadSpecs(), loadStyles(), loadAttire(), loadLooks(), loadPortraitStyles(), tasks]);
}

init();
