// The translation page. Plain JavaScript, no build step; it calls the service's HTTP API
// with relative URLs, so the page also works behind a proxy that serves it under a path.
"use strict";

const $ = (id) => document.getElementById(id);
const el = {
  source: $("source"), target: $("target"), swap: $("swap"), q: $("q"), out: $("out"),
  count: $("count"), detected: $("detected"), retarget: $("retarget"), status: $("status"),
  copy: $("copy"),
  staleNote: $("stale-note"), announce: $("announce"),
  alts: $("alternatives"), altsList: $("alternatives-list"), translate: $("translate"),
  error: $("error"), files: $("files"), fileForm: $("file-form"), file: $("file"),
  fileResult: $("file-result"), download: $("download"), downloadNote: $("download-note"),
  keyBox: $("key-box"),
  apiKey: $("api-key"), theme: $("theme"),
  fileError: $("file-error"), fileSubmit: $("file-submit"), fileStatus: $("file-status"),
};
const config = document.body.dataset;
let charLimit = Number(config.charLimit) || 0; // 0 or less: no limit
let maxFileBytes = Number(config.maxFileBytes) || 0;
const alternatives = Math.min(3, Number(config.maxAlternatives) || 0);
// alternatives are asked for a short text only: of a long one each is the whole text again,
// which made the page thousands of pixels high, and the server decoded them all
const ALTERNATIVES_UP_TO = 200; // characters
// a text of HTML (pasted from a page's source) is sent as HTML, its markup kept: sent as
// text, the tags' words were translated with it ("<p>Hallo <b>Die Weltwählungs...")
const HTML_TAG = new RegExp(
  "<\\/?(?:p|br|hr|b|i|u|s|em|strong|a|span|div|h[1-6]|ul|ol|li|table|thead|tbody|tr|td|th|" +
  "img|code|pre|blockquote|sup|sub|small|mark|q|cite|abbr|dl|dt|dd|section|article|header|" +
  "footer|nav|main|aside|figure|figcaption|label|button)(?:\\s[^<>]*)?\\/?>", "i");
const thousands = (n) => n.toLocaleString("en");
const stored = (name) => { try { return localStorage.getItem(name); } catch { return null; } };
const store = (name, value) => { try { localStorage.setItem(name, value); } catch { /* private mode */ } };
// The text is kept for a reload in this tab only (sessionStorage: it goes with the tab, and
// stays out of the URL and the browser's history); the languages and the theme in localStorage.
const keepText = () => { try { sessionStorage.setItem("mt-text", el.q.value); } catch { /* none */ } };
const keptText = () => { try { return sessionStorage.getItem("mt-text"); } catch { return null; } };

let languages = []; // [{code, name, targets}] from GET /languages
let detected = null; // the language the server detected for the current text
let pending = null; // AbortController of the translation in flight
let timer = 0;
let lastSent = "";
let shownFor = ""; // the request (text, languages) whose translation the output shows
let pause = 700; // ms of no typing before the page translates (the server's frontendTimeout)
const request = () => el.q.value + "\u0000" + el.source.value + "\u0000" + el.target.value;

// ---- theme ----
const dark = window.matchMedia("(prefers-color-scheme: dark)");
function isDark() {
  const chosen = document.documentElement.dataset.theme;
  return chosen ? chosen === "dark" : dark.matches;
}
// a toggle button: its label ("Dark", in its name "Dark mode") stays; aria-pressed tells the state
function showTheme() {
  el.theme.setAttribute("aria-pressed", String(isDark()));
  el.theme.title = isDark() ? "Switch to light mode" : "Switch to dark mode";
}
if (stored("mt-theme")) document.documentElement.dataset.theme = stored("mt-theme");
el.theme.addEventListener("click", () => {
  const next = isDark() ? "light" : "dark";
  document.documentElement.dataset.theme = next;
  store("mt-theme", next);
  showTheme();
});
dark.addEventListener("change", showTheme);
showTheme();

// ---- talking to the API ----
async function api(path, options) {
  let res;
  try {
    res = await fetch(path, options);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new Error("The server cannot be reached. Check the connection and retry.");
  }
  let data = null;
  try {
    data = await res.json();
  } catch (err) {
    if (err.name === "AbortError") throw err; // cancelled while the answer was read
  }
  if (!res.ok) {
    // an answer without the API's {"error": ...} (a proxy's page; HTTP/2 has no status text)
    const answered = `the server answered ${res.status} ${res.statusText}`.trim();
    const why = data && data.error ? data.error
      : res.status >= 500 ? `${answered}; retry in a moment` : answered;
    const after = res.headers.get("Retry-After");
    const error = new Error(after && !/retry in/i.test(why) ? `${why} (retry in ${after} s)` : why);
    error.status = res.status;
    error.retryAfter = Number(after) || 0;
    throw error;
  }
  return data;
}
let shownError = ""; // the message the page's error line shows (as sent: backticks and all)
function showError(message, where = el.error) {
  if (where === el.error) shownError = message || "";
  // the server's words, its `source: en` and `q` set as code (they read as backticks)
  const parts = message ? `Error: ${message}`.split(/`([^`]+)`/) : [];
  where.replaceChildren(...parts.map((part, i) => {
    if (i % 2 === 0) return document.createTextNode(part);
    const code = document.createElement("code");
    code.textContent = part;
    return code;
  }));
  where.hidden = !message;
}
// A button that is busy stays focusable (a disabled one would drop the keyboard focus to the
// page): it is marked aria-disabled and ignores clicks meanwhile.
function setBusy(button, busy) {
  button.setAttribute("aria-disabled", String(busy));
}
const busy = (button) => button.getAttribute("aria-disabled") === "true";
function withKey(fields) {
  const key = el.apiKey.value.trim();
  if (key) fields.api_key = key;
  return fields;
}

// ---- languages ----
const nameOf = (code) => (languages.find((l) => l.code === code) || {}).name || code;
function option(code, name) {
  const o = document.createElement("option");
  o.value = code;
  o.textContent = name;
  return o;
}
function fillTargets(wanted) {
  const src = languages.find((l) => l.code === el.source.value);
  const codes = src ? src.targets : [...new Set(languages.flatMap((l) => l.targets))].sort();
  el.target.replaceChildren(...codes.map((c) => option(c, nameOf(c))));
  const fallback = codes.find((c) => c !== el.source.value) || codes[0] || "";
  el.target.value = codes.includes(wanted) ? wanted : fallback;
}
function updateSourceLang() {
  // the text says its language (chosen, or detected), as the translation says its own
  el.q.lang = el.source.value !== "auto" ? el.source.value : detected || "";
}
function updateSwap() {
  // nothing to swap before the language list is there (no target, no source to swap to)
  el.swap.disabled = !languages.length || (el.source.value === "auto" && !detected);
}
let loadError = ""; // the error of the last failed load, shown until a load succeeds
const linked = new URLSearchParams(location.search);
async function loadLanguages() {
  let why = "";
  try {
    languages = await api("languages");
  } catch (err) {
    // 503 while the server starts (its models load): said in the status line, not an error
    why = err.status === 503 && /loading/.test(err.message) ? "" : err.message;
    languages = [];
  }
  if (!languages.length) {
    updateSwap();
    loadError = why;
    showError(why);
    el.status.textContent = why ? "Retrying…" : "The server is loading its models…";
    setTimeout(loadLanguages, 2000);
    return;
  }
  if (loadError && shownError === loadError) showError("");
  loadError = "";
  el.status.textContent = "";
  el.source.replaceChildren(
    option("auto", "Detect language"),
    ...languages.map((l) => option(l.code, l.name)),
  );
  // a link's languages (`?source=de&target=en`, as LibreTranslate's page takes them) first;
  // the text is never read from the URL (it stays out of the history and the server's logs)
  const src = linked.get("source") || stored("mt-source");
  el.source.value = languages.some((l) => l.code === src) ? src : "auto";
  fillTargets(linked.get("target") || stored("mt-target"));
  updateSwap();
  updateSourceLang();
  // a text typed while the list was loading could not be sent (no target): it is now
  if (el.q.value.trim() && shownFor !== request()) translate();
}
async function loadFrontendSettings() {
  // LibreTranslate's /frontend/settings, where the server has it: limits and whether keys are needed
  // (retried until it answers: without it a server that needs keys shows no key field)
  let s;
  try {
    const res = await fetch("frontend/settings");
    if (res.status === 404) return; // a server without it: the page's own defaults
    if (!res.ok) throw new Error(res.statusText);
    s = await res.json();
  } catch {
    setTimeout(loadFrontendSettings, 2000);
    return;
  }
  if (typeof s.charLimit === "number") charLimit = serverCharLimit = s.charLimit;
  if (typeof s.frontendTimeout === "number" && s.frontendTimeout >= 0) pause = s.frontendTimeout;
  if (s.keyRequired || s.apiKeys) el.keyBox.hidden = false;
  keys = Boolean(s.apiKeys);
  if (s.filesTranslation === false) el.files.hidden = true;
  if (typeof s.maxFileBytes === "number") maxFileBytes = s.maxFileBytes;
  showCount();
  if (keys && el.apiKey.value.trim()) loadKeyLimit();
}
let serverCharLimit = charLimit; // the server's; charLimit is the key's where it has its own
let keys = false; // the server has API keys (/frontend/settings' apiKeys)
async function loadKeyLimit() {
  // a key's own characters per request: POST /frontend/settings with the key in the body
  // (never in the URL); the server's limit without a key, for a key the server does not
  // know (the translation says so) or from a server that cannot tell
  const key = el.apiKey.value.trim();
  let limit = serverCharLimit;
  if (key && keys) {
    try {
      const s = await api("frontend/settings", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ api_key: key }),
      });
      if (s && typeof s.charLimit === "number") limit = s.charLimit;
    } catch { /* the server's limit */ }
  }
  if (key !== el.apiKey.value.trim()) return; // another key was entered meanwhile
  charLimit = limit;
  showCount();
}
const limitOf = () => (charLimit !== serverCharLimit ? "your API key allows" : "this server translates");

// ---- translating text ----
const length = (text) => [...text].length; // code points, as the server counts them
function showCount() {
  const n = length(el.q.value);
  const over = charLimit > 0 && n > charLimit;
  el.count.textContent = charLimit > 0
    ? `${thousands(n)} / ${thousands(charLimit)}`
    : `${thousands(n)} characters`;
  el.count.classList.toggle("over", over);
  el.count.title = over ? `Too long: ${limitOf()} at most ${thousands(charLimit)} characters at once` : "";
  return !over;
}
// the target a text detected in the target language is offered instead (null: none)
function otherTarget() {
  if (!detected || el.source.value !== "auto" || detected !== el.target.value) return null;
  const from = languages.find((l) => l.code === detected);
  return (from && from.targets.find((c) => c !== detected)) || null;
}
function showDetected(found) {
  detected = found && found.language ? found.language : null;
  el.detected.textContent = detected
    ? `Detected: ${nameOf(detected)} (${Math.round(found.confidence)}%)`
    : "";
  // a German text with German as the target comes back as it is: one click translates it
  // into a language it can go to (the page's first target is German: a German reader met
  // their own text, with "Detected: German" alone)
  const other = otherTarget();
  el.retarget.hidden = !other;
  el.retarget.textContent = other ? `Translate into ${nameOf(other)}` : "";
  el.retarget.dataset.target = other || "";
  updateSwap();
  updateSourceLang();
}
function showAlternatives(list) {
  // each once, and none the same as the translation shown (a text already in the target
  // language comes back as it is, alternatives included)
  const unique = [...new Set(list)].filter((text) => text !== el.out.value);
  el.altsList.replaceChildren(...unique.map((text) => {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    b.dir = "auto";
    b.textContent = text;
    b.title = "Use this translation";
    b.addEventListener("click", () => {
      // the chosen one and the translation shown change places: neither is lost
      const shown = el.out.value;
      el.out.value = text;
      b.textContent = shown;
      const copy = [...el.altsList.querySelectorAll("button")].map((x) => x.textContent);
      showAlternatives(copy);
      // the keyboard focus goes to the translation now shown, and it is said (on the list,
      // rebuilt, the focus landed on another alternative, and nothing was said)
      el.out.focus();
      announce(text, el.target.value);
    });
    li.append(b);
    return li;
  }));
  el.alts.hidden = unique.length === 0;
}
function markStale() {
  // a translation, its alternatives and the detected language of another text (or other
  // languages) are dimmed until the new translation replaces them
  const stale = el.out.value !== "" && shownFor !== request();
  for (const e of [el.out, el.alts, el.detected, el.retarget]) e.classList.toggle("stale", stale);
  // said in words too, beside the translation and in its description for a screen reader
  el.staleNote.hidden = !stale;
  // nothing to copy but the translation of the text as it is (an outdated one copied would
  // pass for the new text's)
  el.copy.disabled = el.out.value === "" || stale;
  el.copy.title = stale ? "The translation is outdated: the new one is on its way" : "";
  if (stale) el.out.setAttribute("aria-describedby", "stale-note");
  else el.out.removeAttribute("aria-describedby");
}
const SAID_CHARS = 300; // a longer translation is said in part: the rest is in the box
function announce(text, lang) {
  // once per finished translation, in its language, in the polite live region (new nodes each
  // time: the same translation asked for again is said again)
  const said = length(text) > SAID_CHARS ? `${[...text].slice(0, SAID_CHARS).join("")}…` : text;
  const words = document.createElement("span");
  words.lang = lang;
  words.textContent = said;
  el.announce.replaceChildren(`Translation (${nameOf(lang)}): `, words);
}
function clearOutput() {
  // what the output showed belongs to another text: it goes, with its alternatives
  el.out.value = "";
  el.out.lang = el.altsList.lang = "";
  el.announce.replaceChildren(); // nothing said: a removal is not announced
  shownFor = "";
  showAlternatives([]);
  showDetected(null);
  markStale();
}
const NO_TARGET = "No target language: the server has no models loaded yet.";
async function translate() {
  clearTimeout(timer);
  const text = el.q.value;
  const sent = (lastSent = request());
  if (pending) pending.abort();
  showError("");
  if (!text.trim()) {
    clearOutput();
    return;
  }
  if (!showCount()) {
    clearOutput();
    const n = length(text);
    showError(
      `The text has ${thousands(n)} characters, ${thousands(n - charLimit)} more than ` +
      `${limitOf()} at once (${thousands(charLimit)}). Shorten it` +
      (el.files.hidden ? "." : ", or translate it as a .txt file below."),
    );
    return;
  }
  if (!el.target.value) {
    clearOutput();
    showError(NO_TARGET);
    return;
  }
  markStale();
  const mine = (pending = new AbortController());
  el.status.textContent = "Translating…";
  setBusy(el.translate, true);
  try {
    const format = HTML_TAG.test(text) ? "html" : "text";
    const body = withKey({ q: text, source: el.source.value, target: el.target.value, format });
    if (alternatives && length(text) <= ALTERNATIVES_UP_TO) body.alternatives = alternatives;
    const data = await api("translate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: mine.signal,
    });
    if (pending !== mine) return; // a newer request was sent meanwhile: this answer is old
    el.out.value = data.translatedText;
    el.out.lang = el.altsList.lang = el.target.value; // read out in its own language
    shownFor = sent;
    showAlternatives(data.alternatives || []);
    showDetected(el.source.value === "auto" ? data.detectedLanguage : null);
    markStale();
    // (one of a text changed since it was sent is outdated already: not said)
    if (sent === request()) announce(data.translatedText, el.target.value);
  } catch (err) {
    if (err.name === "AbortError" || pending !== mine) return;
    clearOutput();
    showError(err.message);
    retryLater(err, sent);
    // a key missing or refused: the field for it is shown beside this error
    if (err.status === 403 || /api.key/i.test(err.message)) el.keyBox.hidden = false;
  } finally {
    if (pending === mine) {
      pending = null;
      el.status.textContent = "";
      setBusy(el.translate, false);
    }
  }
}
// a server busy or loading (503), or a rate limit (429), with a Retry-After: the same text is
// sent again then, three times at most (the page said "retry in 3 s" and did nothing)
const RETRIES = 3;
let retried = { request: "", times: 0 };
function retryLater(err, sent) {
  const seconds = err.retryAfter;
  if (![429, 503].includes(err.status) || !(seconds > 0) || seconds > 120) return;
  if (retried.request !== sent) retried = { request: sent, times: 0 };
  if (retried.times >= RETRIES) return;
  retried.times += 1;
  clearTimeout(timer);
  timer = setTimeout(() => {
    if (request() === sent && shownFor !== sent) translate();
  }, seconds * 1000);
}
function translateSoon() {
  clearTimeout(timer);
  timer = setTimeout(() => {
    if (request() !== lastSent) translate();
  }, pause);
}

el.q.addEventListener("input", () => {
  keepText();
  showCount();
  // an emptied text empties the translation at once (not "Outdated" until the typing pause)
  if (!el.q.value.trim()) translate();
  else { markStale(); translateSoon(); }
});
el.q.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); }
});
el.translate.addEventListener("click", () => {
  // busy: the text (or a language) changed since is sent now, the same request not again
  if (!busy(el.translate) || request() !== lastSent) translate();
});
el.source.addEventListener("change", () => {
  store("mt-source", el.source.value);
  showDetected(null);
  fillTargets(el.target.value);
  translate();
});
el.target.addEventListener("change", () => {
  store("mt-target", el.target.value);
  el.retarget.hidden = true; // (offered for the target it replaces)
  translate();
});
el.retarget.addEventListener("click", () => {
  el.target.value = el.retarget.dataset.target;
  store("mt-target", el.target.value);
  el.retarget.hidden = true;
  translate();
});
el.swap.addEventListener("click", () => {
  const from = el.source.value === "auto" ? detected : el.source.value;
  const to = el.target.value;
  if (!from || !languages.some((l) => l.code === to)) {
    showError(`No model translates from ${nameOf(to)}.`);
    return;
  }
  // the translation becomes the text only if it is the translation of the text as it is now
  // (not of an earlier text, while the new one waits or failed): the text is never lost
  const current = shownFor === request() && el.out.value;
  el.source.value = to;
  fillTargets(from);
  store("mt-source", el.source.value);
  store("mt-target", el.target.value);
  if (current) el.q.value = el.out.value;
  keepText();
  clearOutput(); // the alternatives of the other direction go with the translation
  showCount();
  translate();
});
el.copy.addEventListener("click", async () => {
  if (el.copy.disabled) return;
  let said = "Copied";
  try {
    await navigator.clipboard.writeText(el.out.value);
  } catch { // no clipboard API (a page over plain HTTP on another host): select and copy
    el.out.select();
    // the keyboard focus back on the button (select() moved it to the translation), or left
    // on the translation, selected, where the browser copied nothing
    if (document.execCommand("copy")) el.copy.focus();
    else said = "Not copied: press Ctrl+C";
  }
  el.copy.textContent = said;
  setTimeout(() => { el.copy.textContent = "Copy"; }, said === "Copied" ? 1500 : 5000);
});

// ---- translating a file ----
let expires = 0; // when the server drops the translated file (0: not said)
function keptFor(seconds) {
  // (at least as long as said: rounded down)
  const plural = (n, unit) => (n === 1 ? `1 ${unit}` : `${n} ${unit}s`);
  if (seconds >= 3600 && seconds % 3600 === 0) return plural(seconds / 3600, "hour");
  if (seconds >= 60) return plural(Math.floor(seconds / 60), "minute");
  return plural(Math.floor(seconds), "second");
}
el.download.addEventListener("click", (e) => {
  if (expires && Date.now() > expires) {
    e.preventDefault();
    el.fileResult.hidden = true;
    showError("The translated file is no longer kept on the server: translate the file again.", el.fileError);
  }
});
el.file.addEventListener("change", () => {
  // the link and the error of the file chosen before go: they are not this file's
  el.fileResult.hidden = true;
  el.fileStatus.textContent = "";
  showError("", el.fileError);
});
el.fileForm.addEventListener("submit", async (e) => {
  e.preventDefault();
  if (busy(el.fileSubmit)) return;
  const fail = (message) => showError(message, el.fileError);
  fail("");
  el.fileResult.hidden = true;
  el.fileStatus.textContent = "";
  const file = el.file.files[0];
  if (!file) { fail("Choose a file first."); return; }
  if (!el.target.value) { fail(NO_TARGET); return; } // (the server: "`target` is missing")
  if (maxFileBytes > 0 && file.size > maxFileBytes) {
    const inBytes = (n) => `${n.toLocaleString("en")} bytes`;
    fail(`${file.name} has ${inBytes(file.size)}; this server takes files of at most ${inBytes(maxFileBytes)}.`);
    return;
  }
  // a status of its own: a text translated meanwhile does not blank it, nor it the text's
  el.fileStatus.textContent = `Translating ${file.name}…`;
  setBusy(el.fileSubmit, true);
  try {
    // read first: a file moved or removed since it was chosen fails the upload as a network
    // error would ("The server cannot be reached")
    let bytes;
    try {
      bytes = await file.arrayBuffer();
    } catch {
      throw new Error(`${file.name} cannot be read: it was moved, removed or changed since it was chosen. Choose it again.`);
    }
    const form = new FormData();
    form.append("file", new Blob([bytes], { type: file.type }), file.name);
    for (const [k, v] of Object.entries(withKey({ source: el.source.value, target: el.target.value }))) {
      form.append(k, v);
    }
    const data = await api("translate_file", { method: "POST", body: form });
    const url = data.translatedFileUrl;
    // the link taken relative to this page, as the API's URLs are: behind a proxy that serves
    // the service under a path, the answer's absolute link may name the service's own address
    const at = new URL(url, location.href).pathname.lastIndexOf("/download_file/");
    el.download.href = at >= 0 ? new URL(url, location.href).pathname.slice(at + 1) : url;
    el.download.textContent = `Download ${decodeURIComponent(url.split("/").pop())}`;
    // the server keeps the file for a while only: said, and a click after that says so (it
    // downloaded nothing, without a word)
    const ttl = Number(config.fileTtl) || 0;
    expires = ttl > 0 ? Date.now() + ttl * 1000 : 0;
    el.downloadNote.textContent = ttl > 0 ? `(kept for ${keptFor(ttl)})` : "";
    el.fileResult.hidden = false;
    el.fileStatus.textContent = `${file.name} is translated.`; // said once (aria-live)
  } catch (err) {
    el.fileStatus.textContent = "";
    fail(err.message);
  } finally {
    setBusy(el.fileSubmit, false);
  }
});

// the shortcut as a Mac's keyboard writes it
if (/Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent)) {
  $("shortcut").textContent = "or ⌘+Enter; the page also translates when you stop typing";
}
el.apiKey.value = stored("mt-api-key") || "";
let keyUsed = el.apiKey.value.trim();
async function useKey(again = false) {
  // a key entered (Enter, or leaving the field changed) is kept, its own limit shown, and the
  // text that failed without it is translated again
  const key = el.apiKey.value.trim();
  if (key === keyUsed && !again) return;
  keyUsed = key;
  store("mt-api-key", key);
  await loadKeyLimit();
  if (el.q.value.trim() && shownFor !== request()) translate();
}
el.apiKey.addEventListener("change", () => useKey());
el.apiKey.addEventListener("keydown", (e) => {
  if (e.key === "Enter") { e.preventDefault(); useKey(true); }
});
if (keptText() !== null) el.q.value = keptText(); // translated once the languages are there
showCount();
loadLanguages();
loadFrontendSettings();
