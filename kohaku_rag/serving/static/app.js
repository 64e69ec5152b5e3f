// The ask page: plain JavaScript against the JSON API (no framework, works offline).
// The page's state lives in its URL (?q=&config=&unit=&answer=): a reload, or the link sent
// to someone else, shows the same answer, following it live when it is still being written.
"use strict";

const $ = (id) => document.getElementById(id);
const STAGES = ["queued", "planning", "retrieving", "answering", "done"];
const HISTORY_KEY = "kohaku-history";
const history = readHistory();
let current = null;      // the answer shown
let conversation = [];   // earlier turns a follow-up continues: [{question, answer}]
let configs = [];

function readHistory() {
  try { return JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]"); } catch (e) { return []; }
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const key = sessionStorage.getItem("kohaku-key");
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function api(path, options) {
  const res = await fetch(path, Object.assign({}, options, { headers: headers((options || {}).headers) }));
  if (res.status === 401) { $("key-row").hidden = false; throw new Error("this server needs an API key: enter it and ask again"); }
  if (!res.ok) {
    let msg = res.status + " " + res.statusText;
    try { msg = (await res.json()).error.message; } catch (e) { /* not JSON */ }
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return res;
}

function el(tag, props, children) {
  const node = document.createElement(tag);
  const { dataset, ...rest } = props || {};
  Object.assign(node, rest);
  Object.assign(node.dataset, dataset || {});
  for (const c of children || []) node.append(c);
  return node;
}

// ---------------------------------------------------------------- configs and the URL

async function loadConfigs(wanted) {
  try {
    const body = await (await api("/api/configs")).json();
    configs = body.configs;
    const select = $("config");
    select.replaceChildren();
    for (const c of body.configs) {
      const score = c.final == null ? "" : " · " + Number(c.final).toFixed(3);
      const opt = el("option", { value: c.name, textContent: c.name + score });
      if (c.available === false) {
        opt.disabled = true;
        opt.textContent = c.name + " — unavailable (broken file)";
        opt.title = c.error || "";
      }
      if (wanted ? c.name === wanted : c.name === body.default) opt.selected = true;
      select.append(opt);
    }
    const broken = body.configs.filter((c) => c.available === false);
    $("config-warning").textContent = broken.map((c) => "Config " + c.name + " is unavailable: " + c.error).join("\n");
    $("config-warning").hidden = !broken.length;
    fillCodePanel();
  } catch (e) { showError(e.message); }
}

function stateFromUrl() {
  const p = new URLSearchParams(location.search);
  return { q: p.get("q") || "", config: p.get("config") || "", unit: p.get("unit") || "", answer: p.get("answer") || "" };
}

function setUrl(state) {
  const p = new URLSearchParams();
  if (state.q) p.set("q", state.q);
  if (state.config) p.set("config", state.config);
  if (state.unit) p.set("unit", state.unit);
  if (state.answer) p.set("answer", state.answer);
  const url = location.pathname + (p.toString() ? "?" + p.toString() : "");
  window.history.replaceState(null, "", url);
}

// ---------------------------------------------------------------- progress

function showError(message) { $("error").textContent = message; $("error").hidden = !message; }

// A stage is listed once it happens: "queued" only when the question had to wait, "planning"
// only when a planner or a follow-up's rewrite runs (the default config has no planner).
function showStage(stage, info) {
  const list = $("progress");
  for (const s of new Set(["retrieving", "answering", "done", stage])) {
    if (list.querySelector(`[data-stage=${s}]`)) continue;
    const later = [...list.children].find((li) => STAGES.indexOf(li.dataset.stage) > STAGES.indexOf(s));
    list.insertBefore(el("li", { textContent: s, dataset: { stage: s } }), later || null);
  }
  const at = STAGES.indexOf(stage);
  for (const li of list.children) {
    const i = STAGES.indexOf(li.dataset.stage);
    li.className = i < at ? "past" : i === at ? "now" : "";
    if (li.dataset.stage === "queued" && stage === "queued" && info && info.place) li.textContent = "queued #" + info.place;
  }
  if (stage === "done") list.lastChild.className = "past";
  // The live reply belongs to the answering stage: a new stage (a retry's planning) starts it afresh.
  if (stage !== "answering") stopLive();
  else if (!live.timer) startLive();
}

// A failure marks the stage it happened in (or the first one, before any stage began).
function showStageError() {
  const list = $("progress");
  const at = list.querySelector("li.now") || list.querySelector("li:not(.past)");
  if (at) { at.className = "error"; at.textContent = at.dataset.stage + " failed"; }
  stopLive();
}

// The live reply: the model writes JSON, but the asker reads its prose (the quoted evidence,
// the explanation, the answer) as it is written, under a clock of how long the model has been
// at it, since a CPU model reads its prompt for seconds before its first word.
const live = { raw: "", started: 0, timer: null };

function startLive() {
  live.raw = "";
  live.started = Date.now();
  $("live-text").replaceChildren();
  $("live-reply").hidden = false;
  tickLive();
  live.timer = setInterval(tickLive, 1000);
}

function stopLive() {
  clearInterval(live.timer);
  live.timer = null;
  live.raw = "";
  $("live-text").replaceChildren();
  $("live-reply").hidden = true;
}

function tickLive() {
  const seconds = Math.floor((Date.now() - live.started) / 1000);
  const doing = live.raw ? "writing" : "reading the question and its context";
  $("live-status").textContent = "The model has been at it for " + seconds + " s: " + doing + "…" + expectedWait();
}

// What to expect, from this server's own recent answers with the chosen config (the median
// of up to 20), so a slow CPU machine says so before the first word instead of looking stuck.
function expectedWait() {
  const c = configs.find((x) => x.name === $("config").value);
  if (!c || c.typical_seconds == null) return " (no answer with this config here yet: on a CPU a first answer can take minutes)";
  const n = c.typical_of;
  return " (answers here take about " + Math.round(c.typical_seconds) + " s, the median of the last " + (n === 1 ? "one" : n) + ")";
}

// After an answer, the expectation learns from it (the list of configs is not redrawn).
async function refreshTypical() {
  try { configs = (await (await api("/api/configs")).json()).configs; } catch (e) { /* keep the old figures */ }
}

function showReply(text) {
  if (!live.timer) startLive();
  live.raw += text;
  tickLive();
  const prose = replyProse(live.raw);
  const parts = [];
  if (prose.question) parts.push(el("p", { textContent: "Rewritten: " + prose.question }));
  if (prose.evidence) parts.push(el("blockquote", { textContent: prose.evidence }));
  if (prose.explanation) parts.push(el("p", { textContent: prose.explanation }));
  if (prose.answer) parts.push(el("p", { className: "live-answer", textContent: prose.answer }));
  $("live-text").replaceChildren(...parts);
}

// The string fields a reader wants from a JSON reply still being written, each decoded as far
// as it has come (a field cut mid-string shows what is there).
// Where one LLM call's time went: "· 1130 prompt tokens (830 evaluated, 300 reused) · 62 reply tokens · 9.1 s".
function callCost(x) {
  if (x.prompt_tokens == null) return "";
  if (x.cached) return " · from the response cache";
  let out = " · " + x.prompt_tokens + " prompt tokens";
  if (x.evaluated != null) out += " (" + x.evaluated + " evaluated, " + (x.prompt_tokens - x.evaluated) + " reused)";
  return out + " · " + x.reply_tokens + " reply tokens · " + Number(x.seconds).toFixed(1) + " s";
}

function replyProse(raw) {
  const out = {};
  const key = /"(evidence|explanation|answer|question)"\s*:\s*"/g;
  let m;
  while ((m = key.exec(raw))) {
    let i = key.lastIndex, text = "";
    for (; i < raw.length && raw[i] !== '"'; i++) {
      if (raw[i] !== "\\") { text += raw[i]; continue; }
      const next = raw[i + 1];
      if (next === undefined) break;
      if (next === "u") {
        if (i + 6 > raw.length) break;
        text += String.fromCharCode(parseInt(raw.slice(i + 2, i + 6), 16));
        i += 5;
      } else {
        text += { n: "\n", t: " ", r: "", b: "", f: "" }[next] ?? next;
        i += 1;
      }
    }
    out[m[1]] = text;
    key.lastIndex = i + 1;
  }
  return out;
}

// ---------------------------------------------------------------- asking

async function ask(event) {
  event.preventDefault();
  const key = $("api-key").value.trim();
  if (key) sessionStorage.setItem("kohaku-key", key);
  const question = $("question").value.trim();
  if (!question) {
    showError("Type a question first (it was empty).");
    $("question").focus();
    return;
  }
  showError("");
  const body = { question, config: $("config").value || null, unit: $("unit").value.trim() || null, stream: true };
  if (conversation.length) body.history = conversation.flatMap((t) => [{ role: "user", content: t.question }, { role: "assistant", content: t.answer }]);
  await follow(() => api("/api/ask", { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" } }));
}

// Follow an answer's events (a new question, or one resumed by id) until it is shown.
async function follow(request) {
  $("ask").disabled = true;
  $("progress").replaceChildren();
  showStage("retrieving");
  try {
    const result = await readEvents(await request());
    if (result) { remember(result); showAnswer(result); refreshTypical(); }
  } catch (e) {
    showStageError();
    showError(e.message);
  } finally {
    $("ask").disabled = false;
    $("resuming").hidden = true;
  }
}

async function resume(state) {
  $("question").value = state.q;
  $("unit").value = state.unit;
  $("resuming").textContent = "Showing answer " + state.answer.slice(0, 8) + "… (following it while it is still being written)";
  $("resuming").hidden = false;
  try {
    await follow(() => api("/api/answers/" + encodeURIComponent(state.answer) + "?stream=true", { headers: { Accept: "text/event-stream" } }));
  } catch (e) { showError(e.message); }
}

// Server-sent events over fetch: the answer's id, progress events, then done (the answer) or error.
async function readEvents(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return null;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue;
      const payload = JSON.parse(data);
      if (name === "answer") {
        setUrl({ q: payload.question, config: payload.config, unit: $("unit").value.trim(), answer: payload.answer_id });
        if (payload.standalone_question) showAnsweredAs(payload.standalone_question, payload.question, payload.rewrite_failed);
      } else if (name === "progress" && payload.reply !== undefined) showReply(payload.reply);
      else if (name === "progress") showStage(payload.stage, payload);
      else if (name === "done") { showStage("done"); return payload; }
      else if (name === "error") throw new Error(payload.error.message);
    }
  }
}

// ---------------------------------------------------------------- history

function remember(result) {
  const at = history.findIndex((r) => r.answer_id && r.answer_id === result.answer_id);
  if (at >= 0) history.splice(at, 1);
  history.unshift(result);
  history.length = Math.min(history.length, 30);
  saveHistory();
  renderHistory();
}

function saveHistory() {
  for (;;) {
    try { localStorage.setItem(HISTORY_KEY, JSON.stringify(history)); return; } catch (e) {
      if (history.length <= 1) return;  // full: keep in memory
      history.pop();
    }
  }
}

function renderHistory() {
  const list = $("history");
  list.replaceChildren();
  history.forEach((r) => {
    const li = el("li", { textContent: r.question }, [el("span", { className: "v", textContent: r.is_blank ? "—" : r.value + " " + unitText(r) })]);
    li.addEventListener("click", () => {
      $("question").value = r.question;
      showAnswer(r);
      setUrl({ q: r.question, config: r.config, unit: "", answer: r.answer_id });
    });
    list.append(li);
  });
}

// ---------------------------------------------------------------- the answer card

function unitText(r) { return r.unit && r.unit !== "is_blank" ? r.unit : ""; }

// A follow-up is answered as the model rewrote it; when the rewrite failed it is answered as
// typed, and the asker is told so (it may lean on a turn the answerer does not see).
function showAnsweredAs(standalone, asked, rewriteFailed) {
  const box = $("answered-as");
  box.textContent = rewriteFailed ? "answered as typed: the rewrite failed (" + rewriteFailed + ")"
    : standalone && standalone !== asked ? "answered as: " + standalone : "";
  box.hidden = !box.textContent;
}

// The answer line, unless it only repeats the value and unit the card shows above it.
// The answer's words, when they say more than the value in its unit: "23 W" beside the value
// 23.0 is the same value twice, in two spellings (the card shows one value, once).
function answerLine(r) {
  if (r.is_blank || !r.answer) return "";
  const squash = (t) => (t || "").toLowerCase().replace(/[\s.,;:]+/g, "");
  const rest = squash(r.answer).replace(squash(r.value), "").replace(squash(unitText(r)), "");
  if (!rest) return "";
  const number = /-?\d+(?:\.\d+)?(?:e[-+]?\d+)?/g;
  const plain = (t) => String(t || "").toLowerCase().replace(/,/g, "");
  const unit = plain(unitText(r)).trim();
  const words = unit ? plain(r.answer).split(unit).join(" ") : plain(r.answer);
  const said = (words.match(number) || []).map(Number);
  const value = (plain(r.value).match(number) || []).map(Number);
  const same = said.length > 0 && said.length === value.length
    && said.every((n, i) => Math.abs(n - value[i]) <= 1e-9 * Math.max(1, Math.abs(n)));
  return same && !words.replace(number, "").replace(/[\s.;:()\[\]~≈-]+/g, "") ? "" : r.answer;
}

// One chip per document, listing the pages its cited snippets are on. The evidence that
// states the answer's value comes first (its document, then within it its passage); the
// rest follow by page, so the buttons read in the document's order.
function citedDocuments(cited) {
  const docs = [];
  for (const c of cited) {
    let d = docs.find((x) => x.doc_id === c.doc_id);
    if (!d) { d = { doc_id: c.doc_id, title: c.title || c.doc_id, snippets: [] }; docs.push(d); }
    d.snippets.push(c);
  }
  const stating = (d) => d.snippets.some((c) => c.states_value);
  for (const d of docs) d.snippets = evidenceOrder(d.snippets);
  return docs.filter(stating).concat(docs.filter((d) => !stating(d)));
}

function evidenceOrder(snippets) {
  const first = snippets.find((c) => c.states_value);
  const rank = (c) => [first && c.page === first.page ? 0 : 1, c.states_value ? 0 : 1, c.page == null ? Infinity : c.page];
  const keyed = snippets.map((c, i) => ({ c, i, r: rank(c) }));
  keyed.sort((a, b) => a.r[0] - b.r[0] || a.r[1] - b.r[1] || (a.r[2] - b.r[2] || 0) || a.i - b.i);
  return keyed.map((k) => k.c);
}

// A passage's button label: its section heading, else its opening words (a phone has no
// tooltip to tell two passages of one page apart). Passages that would share a label get
// their opening words instead, as many as it takes to tell them apart, else a number.
function firstWords(text, n) {
  const words = (text || "").replace(/\s+/g, " ").trim().split(" ");
  return words.slice(0, n).join(" ") + (words.length > n ? "…" : "");
}

function passageLabels(snippets) {
  const labels = snippets.map((c) => c.section || firstWords(c.text, 5));
  for (const label of new Set(labels)) {
    const same = labels.map((l, i) => (l === label ? i : -1)).filter((i) => i >= 0);
    if (same.length < 2) continue;
    let n = 4;
    const words = () => same.map((i) => firstWords(snippets[i].text, n));
    while (n < 12 && new Set(words()).size < same.length) n += 1;
    const distinct = new Set(words()).size === same.length;
    same.forEach((i, k) => { labels[i] = distinct ? firstWords(snippets[i].text, n) : label + " (" + (k + 1) + ")"; });
  }
  return labels;
}

function cellText(cell) {
  return cell.table + ", row " + (cell.row || "(unnamed)") + (cell.column ? ", column " + cell.column : "");
}

function pagesText(d) {
  const pages = [...new Set(d.snippets.map((c) => c.page).filter((p) => p))];
  if (!pages.length) return d.snippets.length > 1 ? " · " + d.snippets.length + " passages" : "";
  return (pages.length > 1 ? " · pp. " : " · p. ") + pages.join(", ");
}

function showAnswer(r) {
  current = r;
  $("answer").hidden = false;
  showAnsweredAs(r.standalone_question, r.asked || r.question, r.rewrite_failed);
  $("value").textContent = r.is_blank ? "No answer in the documents" : r.value;
  $("unit-out").textContent = r.is_blank ? "" : unitText(r);
  $("answer-text").textContent = answerLine(r);
  $("explanation").textContent = r.explanation && r.explanation !== "is_blank" ? r.explanation : "";
  // An abstention says why when the reply's value was not of the asked form; a value the
  // cited passages do not state says to check it.
  $("why-blank").textContent = r.is_blank && r.abstained_because ? "Not shown as an answer: " + r.abstained_because + "." : "";
  $("why-blank").hidden = !$("why-blank").textContent;
  $("support-note").textContent = !r.is_blank && r.support && !r.support.stated ? r.support.note : "";
  $("support-note").hidden = !$("support-note").textContent;
  // a value read from a table: which cell ("Table 2, row text generation, column mean")
  const cells = r.is_blank ? [] : r.cited.flatMap((c) => (c.cells && c.cells.length ? c.cells : c.cell ? [c.cell] : [])).map(cellText);
  $("cell").textContent = [...new Set(cells)].join("; ");
  $("cell").hidden = !cells.length;
  const chips = $("chips");
  chips.replaceChildren();
  citedDocuments(r.cited).forEach((d, i) => {
    const chip = el("button", { type: "button", className: "chip", textContent: "[" + (i + 1) + "] " + d.title + pagesText(d), title: d.snippets[0].quote });
    chip.addEventListener("click", () => { for (const x of chips.children) x.classList.remove("active"); chip.classList.add("active"); openDocument(d); });
    chips.append(chip);
  });
  $("meta").textContent = r.config + " · " + timeText(r);
  const ctx = $("context-list");
  ctx.replaceChildren();
  for (const item of r.context) {
    ctx.append(el("li", {}, [el("span", { className: "where", textContent: (item.title || item.doc_id) + (item.page ? " p. " + item.page : "") + " · " + item.node_id + " · " + item.score.toFixed(3) + " — " }), item.text]));
  }
  $("raw-text").textContent = r.raw.map((x) => "[" + x.kind + " #" + x.attempt + callCost(x) + "]\n" + x.reply).join("\n\n");
  $("evidence").hidden = true;
  $("feedback-form").hidden = true;
  $("feedback-status").hidden = true;
  fillFeedbackRefs(r);
}

// What the asker waited: the queue included (a stored answer came at once).
function timeText(r) {
  if (r.stored) return "stored answer";
  const waited = r.queued_seconds || 0;
  return r.seconds.toFixed(1) + " s" + (waited >= 0.1 ? " (" + waited.toFixed(1) + " s of it in the queue)" : "");
}

// The document's passages as buttons grouped under their page, the value's passage first.
function openDocument(d) {
  const tabs = $("evidence-pages");
  tabs.replaceChildren();
  if (d.snippets.length > 1) {
    const labels = passageLabels(d.snippets);
    const buttons = [];
    let group = null;
    d.snippets.forEach((c, i) => {
      const where = c.page ? "p. " + c.page : "passages";
      if (!group || group.dataset.page !== where) {
        group = el("div", { className: "page-group", dataset: { page: where } }, [el("span", { className: "page-label", textContent: where })]);
        tabs.append(group);
      }
      const tab = el("button", { type: "button", className: "page-tab" + (c.states_value ? " states" : ""), textContent: labels[i], title: c.quote });
      tab.addEventListener("click", () => { for (const x of buttons) x.classList.remove("active"); tab.classList.add("active"); openEvidence(c); });
      buttons.push(tab);
      group.append(tab);
    });
    buttons[0].classList.add("active");
  }
  openEvidence(d.snippets[0]);
}

// `url` when it is http(s), else "": a `javascript:` or `data:` href would run in this page
function webLink(url) {
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : "";
  } catch {
    return "";
  }
}

async function openEvidence(c) {
  const box = $("evidence");
  box.hidden = false;
  $("evidence-title").textContent = (c.title || c.doc_id) + (c.page ? ", page " + c.page : "") + (c.cells && c.cells.length ? " · " + c.cells.map(cellText).join("; ") : c.cell ? " · " + cellText(c.cell) : "");
  const link = $("evidence-link");
  // only a web link becomes the source link (the server sends no other; a stored answer might)
  const href = webLink(c.url);
  link.textContent = href ? "source" : "";
  link.href = href || "#";
  const img = $("page");
  img.hidden = true;
  const quote = $("evidence-text");
  quote.replaceChildren(c.text);
  // the answer's value: a cited table marks its caption and the row stating it
  // (or, for a value read from named cells and converted or computed, those cells)
  const marked = c.highlight_values && c.highlight_values.length ? c.highlight_values : [current && current.value];
  const value = current && !current.is_blank ? marked.filter(Boolean).map((v) => "&value=" + encodeURIComponent(v)).join("") : "";
  const id = encodeURIComponent(c.sentence_id || c.node_id) + value;
  const doc = encodeURIComponent(c.doc_id);
  try {
    const text = await (await api("/api/documents/" + doc + "/text?highlight=" + id)).json();
    quote.replaceChildren(...text.parts.map((p) => (p.marked ? el("mark", { textContent: p.text }) : p.text)));
    const info = await (await api("/api/documents/" + doc)).json();
    if (info.format === "pdf" && c.page) {
      const png = await (await api("/api/documents/" + doc + "/pages/" + c.page + ".png?highlight=" + id)).blob();
      if (img.src) URL.revokeObjectURL(img.src);
      img.src = URL.createObjectURL(png);
      img.hidden = false;
    }
  } catch (e) { showError(e.message); }
}

// ---------------------------------------------------------------- follow-ups

function startFollowUp() {
  if (!current) return;
  // a value read from table cells carries their names, so "and the other row?" can be rewritten
  const cells = current.is_blank ? [] : current.cited.flatMap((c) => c.cells || []).map(cellText);
  const said = (current.answer || current.value) + (cells.length ? " (" + [...new Set(cells)].join("; ") + ")" : "");
  conversation.push({ question: current.standalone_question || current.question, answer: current.is_blank ? "No answer in the documents." : said });
  renderConversation();
  $("question").value = "";
  $("question").focus();
}

function renderConversation() {
  $("conversation").hidden = !conversation.length;
  $("conversation-turns").textContent = conversation.map((t) => "“" + t.question + "” → " + t.answer).join("  ·  ");
}

function newConversation() { conversation = []; renderConversation(); }

// ---------------------------------------------------------------- feedback

function fillFeedbackRefs(r) {
  const select = $("fb-ref");
  select.replaceChildren(el("option", { value: "", textContent: "(none)" }));
  const cited = citedDocuments(r.cited);
  if (cited.length) {
    const group = el("optgroup", { label: "cited" });
    for (const d of cited) group.append(el("option", { value: d.doc_id, textContent: d.title }));
    select.append(group);
  }
  api("/api/documents").then((res) => res.json()).then((body) => {
    // each document once: the cited ones are listed above
    const group = el("optgroup", { label: "other documents" });
    for (const d of body.documents) {
      if (!cited.some((c) => c.doc_id === d.doc_id)) group.append(el("option", { value: d.doc_id, textContent: d.title || d.doc_id }));
    }
    if (group.children.length) select.append(group);
  }).catch(() => { /* the cited ones are enough */ });
}

async function sendFeedback(verdict) {
  if (!current || !current.answer_id) return;
  const body = { answer_id: current.answer_id, verdict };
  if (verdict === "wrong") {
    for (const [key, id] of [["correct_value", "fb-value"], ["correct_unit", "fb-unit"], ["correct_ref", "fb-ref"], ["comment", "fb-comment"]]) {
      const v = $(id).value.trim();
      if (v) body[key] = v;
    }
  }
  try {
    await api("/api/feedback", { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" } });
    $("feedback-status").textContent = verdict === "right" ? "Thanks: marked right." : "Thanks: your correction is kept for review.";
    $("feedback-status").hidden = false;
    $("feedback-form").hidden = true;
  } catch (e) { showError(e.message); }
}

// ---------------------------------------------------------------- use it from code

function fillCodePanel() {
  const origin = location.origin;
  const names = configs.filter((c) => c.available !== false).map((c) => c.name);
  const model = $("config").value || names[0] || "default";
  for (const node of document.querySelectorAll(".origin")) node.textContent = origin;
  $("code-models").textContent = names.join(", ");
  const auth = sessionStorage.getItem("kohaku-key") ? ' \\\n  -H "Authorization: Bearer $KOHAKU_API_KEY"' : "";
  $("code-curl").textContent =
    "curl -s " + origin + "/api/ask" + auth + " \\\n  -H 'Content-Type: application/json' \\\n" +
    "  -d '{\"question\": \"What was the PUE of the data center?\", \"config\": \"" + model + "\"}'\n\n" +
    "# OpenAI-compatible\ncurl -s " + origin + "/v1/chat/completions" + auth + " \\\n  -H 'Content-Type: application/json' \\\n" +
    "  -d '{\"model\": \"" + model + "\", \"messages\": [{\"role\": \"user\", \"content\": \"What was the PUE?\"}]}'";
  $("code-python").textContent =
    "from openai import OpenAI\n\n" +
    "client = OpenAI(base_url=\"" + origin + "/v1\", api_key=\"" + (sessionStorage.getItem("kohaku-key") ? "<your key>" : "unused") + "\")\n" +
    "reply = client.chat.completions.create(\n    model=\"" + model + "\",\n" +
    "    messages=[{\"role\": \"user\", \"content\": \"What was the PUE of the data center?\"}],\n)\n" +
    "message = reply.choices[0].message\nprint(message.content)\n" +
    "for ref in message.model_extra[\"references\"]:  # what each [n] marker cites\n" +
    "    print(ref[\"index\"], ref[\"title\"], ref[\"page\"], ref[\"quote\"])";
  $("code-webui").textContent =
    "Admin Panel → Settings → Connections → OpenAI API → add a connection:\n" +
    "  URL:     " + origin + "/v1\n" +
    "  Key:     " + (sessionStorage.getItem("kohaku-key") ? "this server's API key" : "any text (this server needs none)") + "\n" +
    "Models then listed: " + names.join(", ") + "\n" +
    "(run Open WebUI in Docker? use http://host.docker.internal:" + (location.port || "80") + "/v1)";
}

// ---------------------------------------------------------------- start

$("ask-form").addEventListener("submit", ask);
$("question").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask-form").requestSubmit(); } });
$("evidence-close").addEventListener("click", () => { $("evidence").hidden = true; });
$("api-key").addEventListener("change", () => { sessionStorage.setItem("kohaku-key", $("api-key").value.trim()); loadConfigs(); });
$("config").addEventListener("change", fillCodePanel);
$("follow-up").addEventListener("click", startFollowUp);
$("new-conversation").addEventListener("click", newConversation);
$("copy-link").addEventListener("click", () => { navigator.clipboard && navigator.clipboard.writeText(location.href); $("feedback-status").textContent = "Link: " + location.href; $("feedback-status").hidden = false; });
$("fb-right").addEventListener("click", () => sendFeedback("right"));
$("fb-wrong").addEventListener("click", () => { $("feedback-form").hidden = false; $("fb-unit").value = current ? unitText(current) : ""; });
$("feedback-form").addEventListener("submit", (e) => { e.preventDefault(); sendFeedback("wrong"); });
$("code-link").addEventListener("click", () => { $("code").open = true; });

(async () => {
  const state = stateFromUrl();
  await loadConfigs(state.config);
  renderHistory();
  if (state.answer) await resume(state);
  else if (state.q) $("question").value = state.q;
})();
