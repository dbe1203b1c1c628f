// The page's languages: the current one (saved in the browser), its texts from I18N (i18n.js), and the static
// texts of the page (data-i18n attributes).
"use strict";

const LANGUAGE_KEY = "portrait-serve.language";

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
