"use strict";
// The pgmr page: POST /ask, then draw what came back. Every text from the server goes in via textContent,
// never innerHTML, so labels and model output cannot inject markup.

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Placeholders (entity0, relation1, ...) highlighted wherever they occur in the query text.
function highlighted(text, placeholders) {
  const kinds = Object.fromEntries(placeholders.map((p) => [p.name, p.kind]));
  const frag = document.createDocumentFragment();
  for (const part of text.split(/\b((?:entity|relation)\d+)\b/)) {
    if (/^(entity|relation)\d+$/.test(part)) {
      const kind = kinds[part] || (part.startsWith("entity") ? "entity" : "relation");
      frag.append(el("mark", { class: `ph ${kind}`, "data-placeholder": part }, part));
    } else if (part) {
      frag.append(part);
    }
  }
  return frag;
}

function candidateTable(p) {
  const table = el("table", { class: "candidate-table", "data-placeholder": p.name },
    el("caption", {}, el("mark", { class: `ph ${p.kind}` }, p.name), ` "${p.label}"`,
       p.description ? el("span", { class: "muted" }, ` ${p.description}`) : null,
       p.supported ? null : el("span", { class: "bad" }, `  no candidate reaches the threshold ${p.threshold.toFixed(3)}`)));
  table.append(el("thead", {}, el("tr", {}, ...["", "id", "label", "description", "score", "similarity"].map((h) => el("th", {}, h)))));
  const body = el("tbody");
  p.candidates.forEach((c) => {
    const chosen = c.id === p.chosen;
    const below = c.similarity < p.threshold;
    body.append(el("tr", { class: [chosen ? "chosen" : "", below ? "below" : ""].join(" ").trim() || null },
      el("td", {}, chosen ? "\u2713" : ""),
      el("td", { class: "id" }, c.id),
      el("td", {}, c.label),
      el("td", {}, c.description || ""),
      el("td", { class: "num" }, c.score.toFixed(3)),
      el("td", { class: "num" }, c.similarity.toFixed(3))));
  });
  table.append(body);
  return table;
}

function answerItem(a) {
  if (a.id) {
    return el("li", { class: "answer" }, el("strong", {}, a.label || a.id), " ", el("span", { class: "id" }, `(${a.id})`),
      a.description ? el("span", { class: "muted" }, ` ${a.description}`) : null);
  }
  const tag = a.language ? `@${a.language}` : (a.datatype ? `  ${a.datatype.replace(/^.*[#/]/, "xsd:")}` : "");
  return el("li", { class: "answer" }, a.value, tag ? el("span", { class: "muted" }, tag) : null);
}

const STATUS_TEXT = {
  answered: "Answered.",
  empty: "The query ran but found nothing.",
  resolved: "Resolved; no store is configured to run it.",
  refused: "Refused: ",
  invalid: "The model output is not a valid query: ",
  error: "The knowledge graph did not answer: ",
};

function render(r) {
  $("result").hidden = false;
  const status = $("status");
  status.textContent = r.status;
  status.className = `badge ${r.status}`;
  const message = $("message");
  message.textContent = STATUS_TEXT[r.status] + (["refused", "invalid", "error"].includes(r.status) ? (r.reason || "") : "");
  message.className = ["refused", "invalid", "error"].includes(r.status) ? "bad" : "";

  const inter = $("intermediate");
  inter.replaceChildren(highlighted(r.intermediate || "", r.placeholders));

  const cands = $("candidates");
  cands.replaceChildren(...r.placeholders.map(candidateTable));
  $("placeholders-section").hidden = r.placeholders.length === 0;

  $("sparql").textContent = r.sparql || "";
  $("sparql-section").hidden = !r.sparql;

  const answers = $("answers");
  if (r.boolean !== null && r.boolean !== undefined) {
    answers.replaceChildren(el("li", { class: "answer boolean" }, r.boolean ? "yes (true)" : "no (false)"));
  } else {
    answers.replaceChildren(...r.answers.map(answerItem));
  }
  const shown = r.answers.length;
  $("answer-count").textContent = r.answer_count > shown ? `(${shown} of ${r.answer_count})` : (shown ? `(${shown})` : "");
  $("answers-section").hidden = !["answered", "empty"].includes(r.status);

  const probes = $("probes").querySelector("tbody");
  probes.replaceChildren(...r.probes.map((p, i) => el("tr", { class: p.has_result ? "chosen" : null },
    el("td", {}, i + 1),
    el("td", { class: "id" }, Object.entries(p.mapping).map(([k, v]) => `${k}=${v}`).join(" ")),
    el("td", { class: "num" }, p.score.toFixed(3)),
    el("td", { class: "num" }, p.count === null ? "" : p.count),
    el("td", {}, p.error || ""))));
  const choice = { top: "the top candidates", kg: "a lower-ranked combination with results", fallback: "none had results; the top candidates kept" }[r.choice] || "";
  $("probe-summary").textContent = `${r.probes.length} quer${r.probes.length === 1 ? "y" : "ies"} tried; chose ${choice}`;
  $("probes-section").hidden = r.probes.length === 0;

  $("timings").textContent = Object.entries(r.timings).map(([k, v]) => `${k} ${(v * 1000).toFixed(0)} ms`).join(" \u00b7 ");
}

function renderError(message) {
  $("result").hidden = false;
  const status = $("status");
  status.textContent = "error";
  status.className = "badge error";
  $("message").textContent = message;
  $("message").className = "bad";
  for (const id of ["intermediate", "sparql"]) $(id).textContent = "";
  for (const id of ["candidates", "answers"]) $(id).replaceChildren();
  for (const id of ["placeholders-section", "sparql-section", "answers-section", "probes-section"]) $(id).hidden = true;
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const button = $("ask");
  button.disabled = true;
  button.textContent = "Asking\u2026";
  document.body.dataset.state = "busy";
  try {
    const response = await fetch("/ask", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question }),
    });
    const data = await response.json();
    if (response.ok) render(data); else renderError(data.error ? data.error.message : `HTTP ${response.status}`);
  } catch (err) {
    renderError(`cannot reach the service: ${err}`);
  } finally {
    button.disabled = false;
    button.textContent = "Ask";
    document.body.dataset.state = "done";
  }
}

async function health() {
  try {
    const h = await (await fetch("/health")).json();
    $("health").textContent = `model: ${h.mode} \u00b7 memory: ${h.memory.entities} entities, ${h.memory.relations} relations \u00b7 store: ${h.store || "none"}${h.kg_check ? " (KG check on)" : ""}`;
  } catch (err) {
    $("health").textContent = "";
  }
}

$("ask-form").addEventListener("submit", ask);
health();
