// The ask page: plain JavaScript against the JSON API (no framework, works offline).
"use strict";

const $ = (id) => document.getElementById(id);
const STAGES = ["queued", "planning", "retrieving", "answering", "done"];
const history = JSON.parse(sessionStorage.getItem("kohaku-history") || "[]");
let current = null;

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
    throw new Error(msg);
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

async function loadConfigs() {
  try {
    const body = await (await api("/api/configs")).json();
    const select = $("config");
    select.replaceChildren();
    for (const c of body.configs) {
      const score = c.final == null ? "" : " · " + Number(c.final).toFixed(3);
      const opt = el("option", { value: c.name, textContent: c.name + score });
      if (c.name === body.default) opt.selected = true;
      select.append(opt);
    }
  } catch (e) { showError(e.message); }
}

function showError(message) { $("error").textContent = message; $("error").hidden = !message; }

function showStage(stage, info) {
  const list = $("progress");
  if (!list.children.length) {  // "queued" shows only when the question had to wait
    for (const s of STAGES.slice(1)) list.append(el("li", { textContent: s, dataset: { stage: s } }));
  }
  if (stage === "queued" && !list.querySelector("[data-stage=queued]")) {
    list.prepend(el("li", { textContent: "queued", dataset: { stage: "queued" } }));
  }
  const at = STAGES.indexOf(stage);
  for (const li of list.children) {
    const i = STAGES.indexOf(li.dataset.stage);
    li.className = i < at ? "past" : i === at ? "now" : "";
    if (li.dataset.stage === "queued" && stage === "queued" && info && info.place) li.textContent = "queued #" + info.place;
  }
  if (stage === "done") list.lastChild.className = "past";
  // The live reply belongs to the answering stage: a new stage (a retry's planning) starts it afresh.
  if (stage !== "answering") { $("live-reply").textContent = ""; $("live-reply").hidden = true; }
}

// The model's reply as it is generated (the bundled model streams it): what the answer will say.
function showReply(text) {
  const box = $("live-reply");
  box.hidden = false;
  box.textContent += text;
  box.scrollTop = box.scrollHeight;
}

async function ask(event) {
  event.preventDefault();
  const key = $("api-key").value.trim();
  if (key) sessionStorage.setItem("kohaku-key", key);
  const question = $("question").value.trim();
  if (!question) return;
  showError("");
  $("ask").disabled = true;
  const body = { question, config: $("config").value || null, unit: $("unit").value.trim() || null, stream: true };
  try {
    $("progress").replaceChildren();
    showStage("planning");
    const res = await api("/api/ask", { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" } });
    const result = await readEvents(res);
    if (result) { remember(result); showAnswer(result); }
  } catch (e) {
    showError(e.message);
  } finally {
    $("ask").disabled = false;
  }
}

// Server-sent events over fetch: progress events, then done (the answer) or error.
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
      if (name === "progress" && payload.reply !== undefined) showReply(payload.reply);
      else if (name === "progress") showStage(payload.stage, payload);
      else if (name === "done") { showStage("done"); return payload; }
      else if (name === "error") throw new Error(payload.error.message);
    }
  }
}

function remember(result) {
  history.unshift(result);
  history.length = Math.min(history.length, 30);
  try { sessionStorage.setItem("kohaku-history", JSON.stringify(history)); } catch (e) { /* full: keep in memory */ }
  renderHistory();
}

function renderHistory() {
  const list = $("history");
  list.replaceChildren();
  history.forEach((r) => {
    const li = el("li", { textContent: r.question }, [el("span", { className: "v", textContent: r.is_blank ? "—" : r.value + " " + unitText(r) })]);
    li.addEventListener("click", () => { $("question").value = r.question; showAnswer(r); });
    list.append(li);
  });
}

function unitText(r) { return r.unit && r.unit !== "is_blank" ? r.unit : ""; }

function showAnswer(r) {
  current = r;
  $("answer").hidden = false;
  $("value").textContent = r.is_blank ? "No answer in the documents" : r.value;
  $("unit-out").textContent = r.is_blank ? "" : unitText(r);
  $("answer-text").textContent = r.is_blank ? "" : r.answer;
  $("explanation").textContent = r.explanation && r.explanation !== "is_blank" ? r.explanation : "";
  const chips = $("chips");
  chips.replaceChildren();
  r.cited.forEach((c, i) => {
    const label = "[" + (i + 1) + "] " + (c.title || c.doc_id) + (c.page ? " · p. " + c.page : "");
    const chip = el("button", { type: "button", className: "chip", textContent: label, title: c.quote });
    chip.addEventListener("click", () => { for (const x of chips.children) x.classList.remove("active"); chip.classList.add("active"); openEvidence(c); });
    chips.append(chip);
  });
  $("meta").textContent = r.config + " · " + (r.stored ? "stored answer" : r.seconds.toFixed(1) + " s");
  const ctx = $("context-list");
  ctx.replaceChildren();
  for (const item of r.context) {
    ctx.append(el("li", {}, [el("span", { className: "where", textContent: (item.title || item.doc_id) + (item.page ? " p. " + item.page : "") + " · " + item.node_id + " · " + item.score.toFixed(3) + " — " }), item.text]));
  }
  $("raw-text").textContent = r.raw.map((x) => "[" + x.kind + " #" + x.attempt + "]\n" + x.reply).join("\n\n");
  $("evidence").hidden = true;
}

async function openEvidence(c) {
  const box = $("evidence");
  box.hidden = false;
  $("evidence-title").textContent = (c.title || c.doc_id) + (c.page ? ", page " + c.page : "");
  const link = $("evidence-link");
  link.textContent = c.url ? "source" : "";
  link.href = c.url || "#";
  const img = $("page");
  img.hidden = true;
  const quote = $("evidence-text");
  quote.replaceChildren(c.text);
  const id = encodeURIComponent(c.sentence_id || c.node_id);
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

$("ask-form").addEventListener("submit", ask);
$("question").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask-form").requestSubmit(); } });
$("evidence-close").addEventListener("click", () => { $("evidence").hidden = true; });
$("api-key").addEventListener("change", () => { sessionStorage.setItem("kohaku-key", $("api-key").value.trim()); loadConfigs(); });
loadConfigs();
renderHistory();
