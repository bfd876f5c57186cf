// The durable-agents inbox. Everything shown is untrusted text (model output, tool results,
// arguments): it is put in the page with textContent only, never as HTML. No inline script,
// nothing fetched from anywhere but this server.
"use strict";

const main = document.getElementById("main");
let me = null;
let ticker = null;
let source = null;

// -- DOM helpers ----------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "onclick" || key === "onsubmit" || key === "oninput" || key === "onchange") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "href") {
      el.setAttribute("href", safeHref(value));
    } else if (key === "class") {
      el.className = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function safeHref(value) {
  const text = String(value);
  if (text.startsWith("#")) return text;
  try {
    const url = new URL(text, location.href);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : "#";
  } catch (e) {
    return "#";
  }
}

// Replace an element's children: nested lists are flattened, null and false left out.
function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
}

function show(...children) {
  if (ticker) { clearInterval(ticker); ticker = null; }
  if (source) { source.close(); source = null; }
  fill(main, children);
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

function prettyText(text) {
  if (text === null || text === undefined) return "";
  try { return pretty(JSON.parse(text)); } catch (e) { return String(text); }
}

function ago(iso) {
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return `${Math.floor(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  return `${Math.floor(seconds / 86400)} d ${Math.floor((seconds % 86400) / 3600)} h`;
}

function until(iso) {
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  if (seconds <= 0) return "timed out";
  return `in ${ago(new Date(Date.now() - seconds * 1000).toISOString())}`;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

// -- the API ---------------------------------------------------------------------------------
function csrf() {
  const found = document.cookie.split("; ").find((c) => c.startsWith("da_csrf="));
  return found ? decodeURIComponent(found.slice("da_csrf=".length)) : "";
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

async function api(path, options) {
  const init = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
  if (init.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(init.body);
  }
  if (init.method && init.method !== "GET") init.headers["X-CSRF-Token"] = csrf();
  const response = await fetch(path, init);
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = { message: text }; }
  if (!response.ok) {
    if (response.status === 401 && path !== "api/login") { me = null; renderLogin(); }
    throw new ApiError(response.status, body);
  }
  return body;
}

const enc = encodeURIComponent;

// -- signing in ------------------------------------------------------------------------------
function renderLogin(message) {
  document.getElementById("nav").hidden = true;
  document.getElementById("me").replaceChildren();
  const error = h("p", { class: "error", id: "login-error" }, message || "");
  const input = h("input", { type: "password", id: "token", autocomplete: "off", placeholder: "da_…" });
  const form = h("form", {
    id: "login",
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        me = await api("api/login", { method: "POST", body: { token: input.value.trim() } });
        input.value = "";
        signedIn();
        route();
      } catch (e) {
        error.textContent = e.message;
      }
    },
  }, h("h1", {}, "Sign in"),
  h("label", { for: "token" }, "API token ", h("span", { class: "hint" }, "(durable-agents web-token add NAME --role approver)")),
  input, h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")), error);
  show(form);
}

function signedIn() {
  document.getElementById("nav").hidden = false;
  const out = h("button", {
    type: "button", id: "logout",
    onclick: async () => { await api("api/logout", { method: "POST" }).catch(() => {}); me = null; renderLogin(); },
  }, "Sign out");
  const canSignOut = me.via === "token";
  fill(document.getElementById("me"),
    h("span", { id: "whoami" }, `${me.name} (${me.roles.join(", ")})`), canSignOut ? out : null);
}

// -- the inbox -------------------------------------------------------------------------------
async function renderInbox(params) {
  const agent = h("input", { type: "search", id: "f-agent", placeholder: "agent", value: params.get("agent") || "" });
  const tool = h("input", { type: "search", id: "f-tool", placeholder: "tool", value: params.get("tool") || "" });
  const apply = () => {
    const q = new URLSearchParams();
    if (agent.value) q.set("agent", agent.value);
    if (tool.value) q.set("tool", tool.value);
    location.hash = `#/inbox?${q}`;
  };
  const list = h("div", { id: "approvals" }, "Loading…");
  show(h("h1", {}, "Waiting for a decision"),
    h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); apply(); } },
      agent, tool, h("button", { type: "submit" }, "Filter")), list);
  await loadApprovals(list, params, null);
}

async function loadApprovals(list, params, cursor) {
  const q = new URLSearchParams();
  for (const key of ["agent", "tool"]) if (params.get(key)) q.set(key, params.get(key));
  if (cursor) q.set("cursor", cursor);
  let page;
  try {
    page = await api(`api/approvals?${q}`);
  } catch (e) {
    list.replaceChildren(h("p", { class: "error" }, e.message));
    return;
  }
  if (!cursor) list.replaceChildren(h("p", { class: "hint" }, `${page.total} waiting`));
  for (const item of page.items) {
    const waited = h("span", { class: "waited", "data-since": item.requestedAt }, `waiting ${ago(item.requestedAt)}`);
    list.append(h("div", { class: "card approval", "data-session": item.sessionId },
      h("h3", {}, h("a", { href: `#/approval/${enc(item.sessionId)}` }, item.toolName), " ",
        h("span", { class: "hint" }, item.subagentAgent ? `${item.agent} › ${item.subagentAgent}` : item.agent)),
      h("div", { class: "meta" }, h("span", {}, `session ${item.sessionId}`), waited,
        item.timeoutAt ? h("span", {}, `times out ${until(item.timeoutAt)}`) : null),
      h("pre", { class: "arguments" }, pretty(item.arguments))));
  }
  if (page.nextCursor) {
    const more = h("button", { type: "button", onclick: () => { more.remove(); loadApprovals(list, params, page.nextCursor); } }, "More");
    list.append(more);
  }
  if (!ticker) ticker = setInterval(() => {
    for (const el of document.querySelectorAll(".waited")) el.textContent = `waiting ${ago(el.dataset.since)}`;
  }, 1000);
}

// -- one approval ------------------------------------------------------------------------------
function renderMessage(message, subagent) {
  const role = message.role;
  const classes = ["msg", role, message.isError ? "is-error" : ""].join(" ");
  const parts = [h("div", { class: "role" }, role === "tool" ? `tool result: ${message.toolName || ""}` : role)];
  if (message.content) parts.push(h("pre", { class: "content" }, role === "tool" ? prettyText(message.content) : message.content));
  for (const call of message.toolCalls || []) {
    parts.push(h("div", { class: "hint" }, `calls ${call.name}`), h("pre", {}, pretty(call.arguments)));
  }
  if (subagent) parts.push(renderTranscript(subagent, true));
  return h("div", { class: classes }, parts);
}

function renderTranscript(transcript, nested) {
  const box = h("div", { class: nested ? "subagent" : "transcript" });
  if (nested) box.append(h("div", { class: "hint" }, `sub-agent ${transcript.agent || ""} (session ${transcript.sessionId})`));
  for (const item of transcript.messages) box.append(renderMessage(item.message, item.subagent));
  return box;
}

// A small JSON Schema subset, checked in the form before anything is sent; the server checks
// the whole schema again (and the run does too).
function problemsOf(value, schema, where) {
  const problems = [];
  if (!schema || typeof schema !== "object") return problems;
  const type = schema.type;
  const types = Array.isArray(type) ? type : type ? [type] : [];
  const isType = (t) => (t === "integer" ? Number.isInteger(value) : t === "number" ? typeof value === "number" && isFinite(value)
    : t === "string" ? typeof value === "string" : t === "boolean" ? typeof value === "boolean"
    : t === "null" ? value === null : t === "array" ? Array.isArray(value)
    : t === "object" ? value !== null && typeof value === "object" && !Array.isArray(value) : true);
  if (types.length && !types.some(isType)) return [`${where}: must be ${types.join(" or ")}`];
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) problems.push(`${where}: one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${where}: at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${where}: at most ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) problems.push(`${where}: more than ${schema.exclusiveMinimum}`);
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) problems.push(`${where}: less than ${schema.exclusiveMaximum}`);
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) problems.push(`${where}: at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${where}: at most ${schema.maxLength} characters`);
    if (schema.pattern !== undefined) {
      try { if (!new RegExp(schema.pattern, "u").test(value)) problems.push(`${where}: must match ${schema.pattern}`); } catch (e) { /* the server checks it */ }
    }
  }
  if (value !== null && typeof value === "object" && !Array.isArray(value) && schema.properties) {
    for (const name of schema.required || []) if (!(name in value)) problems.push(`${where}.${name}: required`);
    for (const [name, sub] of Object.entries(schema.properties)) {
      if (name in value) problems.push(...problemsOf(value[name], sub, `${where}.${name}`));
    }
  }
  return problems;
}

function fieldFor(name, schema, value, required) {
  const id = `arg-${name}`;
  const type = schema && schema.type;
  const label = h("label", { for: id }, name, required ? " *" : "",
    schema && schema.description ? h("span", { class: "hint" }, ` ${schema.description}`) : null);
  let input;
  let read;
  if (schema && Array.isArray(schema.enum)) {
    input = h("select", { id, name }, schema.enum.map((option) => h("option", { value: JSON.stringify(option), selected: JSON.stringify(option) === JSON.stringify(value) }, String(option))));
    read = () => JSON.parse(input.value);
  } else if (type === "boolean") {
    input = h("input", { type: "checkbox", id, name, checked: value === true });
    read = () => input.checked;
  } else if (type === "integer" || type === "number") {
    input = h("input", { type: "text", inputmode: "decimal", id, name, value: value === undefined ? "" : String(value) });
    read = () => (input.value.trim() === "" ? undefined : Number(input.value.trim()));
  } else if (type === "string") {
    const long = typeof value === "string" && (value.length > 60 || value.includes("\n"));
    input = long ? h("textarea", { id, name }, value) : h("input", { type: "text", id, name, value: value === undefined ? "" : value });
    read = () => input.value;
  } else {
    input = h("textarea", { id, name, class: "json" }, value === undefined ? "" : pretty(value));
    read = () => {
      const text = input.value.trim();
      if (text === "") return undefined;
      try { return JSON.parse(text); } catch (e) { throw new Error(`${name}: not JSON (${e.message})`); }
    };
  }
  return { element: h("div", { class: "field" }, label, input), read };
}

function argumentsForm(detail) {
  const schema = detail.inputSchema || { type: "object" };
  const properties = schema.properties || {};
  const required = new Set(schema.required || []);
  const fields = [];
  const names = Object.keys(properties);
  for (const name of Object.keys(detail.arguments)) if (!names.includes(name)) names.push(name);
  for (const name of names) fields.push([name, fieldFor(name, properties[name], detail.arguments[name], required.has(name))]);
  const read = () => {
    const value = {};
    for (const [name, field] of fields) {
      const v = field.read();
      if (v !== undefined) value[name] = v;
    }
    return value;
  };
  return { element: h("fieldset", { id: "edit-arguments", hidden: true }, h("legend", {}, "Edited arguments"), fields.map(([, f]) => f.element)), read, schema };
}

async function renderApproval(sessionId) {
  show(h("p", {}, "Loading…"));
  let detail;
  try {
    detail = await api(`api/sessions/${enc(sessionId)}/approval`);
  } catch (e) {
    show(h("h1", {}, "Nothing waits here"), h("p", { class: "error" }, e.message),
      h("p", {}, h("a", { href: `#/session/${enc(sessionId)}` }, "See the session")));
    return;
  }
  const error = h("p", { class: "error", id: "decision-error" });
  const done = h("p", { class: "notice", id: "decision-done" });
  const note = h("textarea", { id: "note", placeholder: "a note the model sees (optional)" });
  const form = argumentsForm(detail);
  const buttons = [];
  // "Approve and stop asking": the approval also grants the calls like this one to come (never
  // with edited arguments; the server refuses a grant wider than what this approver may decide)
  const grantScope = h("select", { id: "grant-scope" },
    h("option", { value: "" }, "this call only"),
    h("option", { value: "session" }, "and stop asking in this session"),
    h("option", { value: "agent" }, `and stop asking for ${detail.subagentAgent || detail.agent} (any session)`),
    h("option", { value: "tool" }, `and stop asking for ${detail.toolName} (every agent)`));
  const grantFor = h("select", { id: "grant-for" },
    h("option", { value: "600" }, "for 10 minutes"), h("option", { value: "3600" }, "for 1 hour"),
    h("option", { value: "86400" }, "for 1 day"), h("option", { value: "" }, "until revoked"));
  const decide = async (approved, edited) => {
    error.textContent = "";
    if (approved && edited && grantScope.value) {
      error.textContent = "Not sent: a grant approves calls as the model makes them, never edited arguments.";
      return;
    }
    let args;
    if (edited) {
      try {
        args = form.read();
      } catch (e) {
        error.textContent = e.message;
        return;
      }
      const problems = problemsOf(args, form.schema, "arguments");
      if (problems.length) {
        error.textContent = `Not sent: the edited arguments do not fit ${detail.toolName}'s schema:\n${problems.join("\n")}`;
        return;
      }
    }
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const body = { approvalId: detail.approvalId, approved, argumentsDigest: detail.argumentsDigest };
      if (note.value.trim()) body.note = note.value.trim();
      if (edited) body.arguments = args;
      if (approved && grantScope.value) {
        body.grant = { scope: grantScope.value, expiresInSeconds: grantFor.value ? Number(grantFor.value) : null };
      }
      const result = await api(`api/sessions/${enc(sessionId)}/decision`, { method: "POST", body });
      const next = result.outcome ? `the run's next outcome: ${result.outcome.finishReason}` : "the run goes on";
      const granted = body.grant ? ` Calls like it are approved without asking (${grantScope.selectedOptions[0].textContent.replace("and stop asking ", "")}, ${grantFor.selectedOptions[0].textContent}).` : "";
      done.textContent = `${approved ? "Approved" : "Rejected"} by ${result.decision.decidedBy}; ${next}.${granted}`;
    } catch (e) {
      error.textContent = e.status === 409 ? `Not decided: ${e.message}` : e.message;
      if (e.status === 422 || e.status === 403) buttons.forEach((b) => { b.disabled = false; });
    }
  };
  const approve = h("button", { type: "button", class: "approve", id: "approve", onclick: () => decide(true, !form.element.hidden) }, "Approve");
  const edit = h("button", { type: "button", id: "edit", onclick: () => { form.element.hidden = !form.element.hidden; approve.textContent = form.element.hidden ? "Approve" : "Approve with these arguments"; } }, "Edit arguments");
  const reject = h("button", { type: "button", class: "reject", id: "reject", onclick: () => decide(false, false) }, "Reject");
  buttons.push(approve, edit, reject, grantScope, grantFor);
  if (!detail.mayDecide) buttons.forEach((b) => { b.disabled = true; });
  const waited = h("span", {}, `waiting ${ago(detail.requestedAt)}`);
  show(
    h("h1", {}, `${detail.toolName} waits for a decision`),
    h("div", { class: "meta" },
      h("span", {}, `agent ${detail.subagentAgent ? `${detail.agent} › ${detail.subagentAgent}` : detail.agent}`),
      h("span", {}, h("a", { href: `#/session/${enc(sessionId)}` }, `session ${sessionId}`)),
      waited,
      h("span", {}, detail.timeoutAt ? `times out ${until(detail.timeoutAt)} (${when(detail.timeoutAt)})` : "no timeout"),
      detail.temporalUrl ? h("a", { href: detail.temporalUrl, target: "_blank", rel: "noopener noreferrer" }, "run in the Temporal UI") : null),
    detail.toolDescription ? h("p", { class: "hint" }, detail.toolDescription) : null,
    h("h2", {}, "Arguments"),
    h("pre", { id: "arguments" }, pretty(detail.arguments)),
    (detail.remainingToolCalls || []).length ? h("p", { class: "hint" }, `then: ${detail.remainingToolCalls.map((c) => c.name).join(", ")}`) : null,
    h("h2", {}, "Decision"),
    detail.mayDecide ? null : h("p", { class: "error" }, `${me.name} may not decide this call (viewer, or another agent's or tool's approver).`),
    form.element,
    h("label", { for: "note" }, "Note"), note,
    h("div", { class: "grant", id: "grant" }, h("label", { for: "grant-scope" }, "Approve"), grantScope, grantFor),
    h("div", { class: "actions" }, approve, edit, reject),
    error, done,
    h("h2", {}, "The conversation that led to it"),
    h("div", { id: "conversation" }, detail.conversation.map((m) => renderMessage(m, null))),
  );
  ticker = setInterval(() => { waited.textContent = `waiting ${ago(detail.requestedAt)}`; }, 1000);
}

// -- sessions --------------------------------------------------------------------------------
async function renderSessions(params) {
  const q = h("input", { type: "search", id: "q", placeholder: "search session id or agent", value: params.get("q") || "" });
  const status = h("select", { id: "status" }, ["", "in-progress", "awaiting-approval", "finished"].map((s) => h("option", { value: s, selected: s === (params.get("status") || "") }, s || "any status")));
  const rows = h("tbody", {});
  show(h("h1", {}, "Sessions"),
    h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); const p = new URLSearchParams(); if (q.value) p.set("q", q.value); if (status.value) p.set("status", status.value); location.hash = `#/sessions?${p}`; } },
      q, status, h("button", { type: "submit" }, "Search")),
    h("table", {}, h("thead", {}, h("tr", {}, ["session", "agent", "status", "step", "saved"].map((t) => h("th", {}, t)))), rows));
  const load = async (cursor) => {
    const p = new URLSearchParams(params);
    if (cursor) p.set("cursor", cursor);
    const page = await api(`api/sessions?${p}`);
    for (const s of page.items) {
      rows.append(h("tr", {}, h("td", {}, h("a", { href: `#/session/${enc(s.sessionId)}` }, s.sessionId)), h("td", {}, s.agent || ""),
        h("td", {}, s.status), h("td", {}, String(s.stepIndex)), h("td", {}, when(s.updatedAt))));
    }
    if (page.nextCursor) {
      const more = h("tr", {}, h("td", { colspan: 5 }, h("button", { type: "button", onclick: () => { more.remove(); load(page.nextCursor); } }, "More")));
      rows.append(more);
    }
  };
  await load(null).catch((e) => rows.append(h("tr", {}, h("td", { class: "error", colspan: 5 }, e.message))));
}

async function renderSession(sessionId) {
  show(h("p", {}, "Loading…"));
  let view, transcript;
  try {
    [view, transcript] = await Promise.all([api(`api/sessions/${enc(sessionId)}`), api(`api/sessions/${enc(sessionId)}/transcript`)]);
  } catch (e) {
    show(h("h1", {}, "No such session"), h("p", { class: "error" }, e.message));
    return;
  }
  const header = view.header;
  const decisions = h("table", {}, h("thead", {}, h("tr", {}, ["decided", "by", "call", "decision", "note", "why"].map((t) => h("th", {}, t)))),
    h("tbody", {}, (header.decisions || []).map((d) => h("tr", {}, h("td", {}, when(d.decidedAt)), h("td", {}, decider(d)),
      h("td", {}, d.toolName), h("td", {}, h("span", { class: `badge ${d.approved ? "ok" : "bad"}` }, verdict(d)),
        d.arguments ? " (edited arguments)" : ""), h("td", {}, d.note || ""), h("td", {}, why(d))))));
  const events = h("div", { class: "events", id: "events" });
  const parts = [
    h("h1", {}, `Session ${sessionId}`),
    h("div", { class: "meta" }, h("span", {}, `agent ${header.agent || "?"}`), h("span", {}, `status ${header.status}`),
      h("span", {}, `step ${header.stepIndex}`), h("span", {}, `saved ${when(header.updatedAt)}`),
      view.temporalUrl ? h("a", { href: view.temporalUrl, target: "_blank", rel: "noopener noreferrer" }, "run in the Temporal UI") : null,
      h("a", { href: `#/diff?a=${enc(sessionId)}` }, "diff with…")),
    view.pending ? h("p", {}, h("a", { href: `#/approval/${enc(sessionId)}` }, `${view.pending.toolName} waits for a decision`)) : null,
    header.lastError ? h("p", { class: "error" }, `last error: ${header.lastError.message || JSON.stringify(header.lastError)}`) : null,
    h("h2", {}, "Transcript"), renderTranscript(transcript, false),
    (header.decisions || []).length ? [h("h2", {}, "Decisions"), decisions] : null,
  ];
  if (me.roles.includes("operator") && view.history.length) parts.push(forkForm(sessionId, view.history));
  parts.push(h("h2", {}, "Live events"), events);
  show(parts);
  source = new EventSource(`api/sessions/${enc(sessionId)}/events`);
  source.onmessage = null;
  const onEvent = (event) => {
    let data = {};
    try { data = JSON.parse(event.data); } catch (e) { /* shown as it is */ }
    const line = data.type === "text-delta" ? data.text : data.type === "tool-call-finished" ? `${data.name}: ${data.result}` : "";
    events.append(h("div", { class: "hint" }, `#${event.lastEventId} ${event.type} ${line || ""}`));
    events.scrollTop = events.scrollHeight;
  };
  for (const type of ["run-started", "model-turn-started", "text-delta", "turn-stored", "tool-call-started", "tool-call-finished",
    "approval-requested", "approval-decided", "subagent-started", "run-finished", "run-paused", "run-failed", "drift", "step-retried", "message"]) {
    source.addEventListener(type, onEvent);
  }
}

function forkForm(sessionId, history) {
  const steps = [...new Set(history.map((e) => e.step))].sort((a, b) => a - b);
  const step = h("select", { id: "fork-step" }, steps.map((s) => h("option", { value: String(s) }, `step ${s}`)));
  const input = h("textarea", { id: "fork-input", placeholder: "input appended to the fork (optional)" });
  const out = h("p", { id: "fork-result" });
  return h("form", { class: "card", onsubmit: async (e) => {
    e.preventDefault();
    out.className = "";
    const body = { fromStep: Number(step.value) };
    if (input.value.trim()) body.patch = { appendInput: input.value.trim() };
    try {
      const forked = await api(`api/sessions/${enc(sessionId)}/fork`, { method: "POST", body });
      out.replaceChildren("Forked as ", h("a", { href: `#/session/${enc(forked.sessionId)}` }, forked.sessionId));
    } catch (err) {
      out.className = "error";
      out.textContent = err.message;
    }
  } }, h("h3", {}, "Fork from a step"), h("label", { for: "fork-step" }, "From"), step, h("label", { for: "fork-input" }, "Patch"), input,
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Fork")), out);
}

// -- diff ------------------------------------------------------------------------------------
function stepCell(step) {
  if (!step) return h("div", { class: "hint" }, "—");
  return h("div", {}, step.text ? h("pre", {}, step.text) : null,
    (step.toolCalls || []).map((c) => h("div", {}, h("strong", {}, c.name), h("pre", {}, pretty(c.arguments)),
      c.result !== undefined ? h("pre", { class: c.isError ? "error" : "" }, `→ ${typeof c.result === "string" ? c.result : pretty(c.result)}`) : null)));
}

async function renderDiff(params) {
  const a = h("input", { type: "text", id: "diff-a", placeholder: "session A", value: params.get("a") || "" });
  const b = h("input", { type: "text", id: "diff-b", placeholder: "session B", value: params.get("b") || "" });
  const out = h("div", { id: "diff" });
  show(h("h1", {}, "Compare two sessions"),
    h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); location.hash = `#/diff?a=${enc(a.value)}&b=${enc(b.value)}`; } },
      a, b, h("button", { type: "submit" }, "Compare")), out);
  if (!params.get("a") || !params.get("b")) return;
  let cmp;
  try {
    cmp = await api(`api/diff?a=${enc(params.get("a"))}&b=${enc(params.get("b"))}`);
  } catch (e) {
    out.replaceChildren(h("p", { class: "error" }, e.message));
    return;
  }
  const rows = [];
  const count = Math.max(cmp.a.length, cmp.b.length);
  for (let i = 0; i < count; i++) {
    const index = i + 1;
    rows.push(h("div", { class: `diff-row${cmp.divergedAt && index >= cmp.divergedAt ? " diverged" : ""}` },
      h("div", {}, String(index)), stepCell(cmp.a[i]), stepCell(cmp.b[i])));
  }
  const drift = cmp.drift || {};
  const notes = [];
  for (const d of drift.toolOrder || []) notes.push(`step ${d.step}: tools ${d.a.join(", ")} vs ${d.b.join(", ")}`);
  for (const d of drift.arguments || []) notes.push(`step ${d.step}: ${d.tool} arguments differ`);
  if (drift.stepCount) notes.push(`steps: ${drift.stepCount.a} vs ${drift.stepCount.b}`);
  if (drift.finishReason) notes.push(`finish: ${drift.finishReason.a} vs ${drift.finishReason.b}`);
  fill(out,
    h("p", {}, cmp.divergedAt ? `They diverge at step ${cmp.divergedAt}.` : "Same steps."),
    notes.length ? h("ul", {}, notes.map((n) => h("li", {}, n))) : null,
    h("div", { class: "diff-row" }, h("strong", {}, "step"), h("strong", {}, params.get("a")), h("strong", {}, params.get("b"))),
    rows);
}

// -- audit -----------------------------------------------------------------------------------
async function renderAudit() {
  const rows = h("tbody", {});
  show(h("h1", {}, "Decisions"), h("table", { id: "audit" },
    h("thead", {}, h("tr", {}, ["decided", "by", "session", "call", "decision", "note", "why"].map((t) => h("th", {}, t)))), rows));
  try {
    const page = await api("api/decisions?limit=200");
    for (const e of page.items) {
      const d = e.decision;
      rows.append(h("tr", {}, h("td", {}, when(d.decidedAt)), h("td", {}, decider(d)),
        h("td", {}, h("a", { href: `#/session/${enc(e.sessionId)}` }, e.sessionId)), h("td", {}, d.toolName),
        h("td", {}, h("span", { class: `badge ${d.approved ? "ok" : "bad"}` }, verdict(d))), h("td", {}, d.note || ""),
        h("td", {}, why(d))));
    }
  } catch (e) {
    rows.append(h("tr", {}, h("td", { class: "error", colspan: 7 }, e.message)));
  }
}

// Grants ("approve and stop asking"): the live ones (or all), each revocable by an approver
// who may decide its calls (the server refuses the others).
async function renderGrants(params) {
  const all = params.get("all") === "true";
  const rows = h("tbody", {});
  const error = h("p", { class: "error", id: "grants-error" });
  const toggle = h("a", { href: all ? "#/grants" : "#/grants?all=true" }, all ? "live grants only" : "all grants (expired, used up, revoked too)");
  show(h("h1", {}, all ? "Grants" : "Live grants"), h("p", {}, toggle), error, h("table", { id: "grants" },
    h("thead", {}, h("tr", {}, ["tool", "where", "when", "uses", "expires", "made by", ""].map((t) => h("th", {}, t)))), rows));
  let page;
  try {
    page = await api(`api/grants${all ? "" : "?live=true"}`);
  } catch (e) {
    error.textContent = e.message;
    return;
  }
  if (!page.grants.length) rows.append(h("tr", {}, h("td", { colspan: 7 }, "no grants")));
  for (const g of page.grants) {
    const s = g.scope;
    const where = s.kind === "session" ? h("a", { href: `#/session/${enc(s.sessionId)}` }, `session ${s.sessionId}`)
      : s.kind === "agent" ? `agent ${s.agent}` : "every agent";
    const conditions = (s.when || []).map((c) => `${c.arg} ${c.op} ${JSON.stringify(c.value)}`).join(" and ");
    const revoke = h("button", { type: "button", class: "reject", "data-grant": g.id }, "Revoke");
    revoke.onclick = async () => {
      revoke.disabled = true;
      try {
        await api(`api/grants/${enc(g.id)}`, { method: "DELETE" });
        revoke.replaceWith(h("span", { class: "badge bad" }, "revoked"));
      } catch (e) {
        error.textContent = e.message;
        revoke.disabled = false;
      }
    };
    const state = g.revokedAt ? h("span", { class: "badge bad" }, `revoked by ${g.revokedBy}`) : me.roles.includes("approver") ? revoke : null;
    rows.append(h("tr", { "data-grant": g.id }, h("td", {}, s.tool), h("td", {}, where), h("td", {}, conditions),
      h("td", {}, g.maxUses != null ? `${g.uses || 0} / ${g.maxUses}` : `${g.uses || 0}`),
      h("td", {}, g.expiresAt ? when(g.expiresAt) : "until revoked"), h("td", {}, g.createdBy), h("td", {}, state)));
  }
}

// Approval policies: an agent's (every session of it) or one session's, read by anyone signed in and
// changed by an operator. A change goes through the server to a worker serving the agent, which
// checks it against the agent's tools; it is written against the version shown, so a change made
// meanwhile by someone else is refused (409) rather than overwritten.
const POLICY_EXAMPLE = '{"deny": [], "allow": [{"name": "small payments", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}]}';

// The document as an operator edits it: without its version (the server's to give) and unset fields.
function policyText(policy) {
  const { version, ...rest } = policy;
  return JSON.stringify(rest, (key, value) => (value === null ? undefined : value), 2);
}

async function renderPolicies(params) {
  const kind = params.get("session") != null ? "session" : "agent";
  const name = (params.get(kind) || "").trim();
  const which = h("select", { id: "policy-kind" }, h("option", { value: "agent" }, "agent"), h("option", { value: "session" }, "session"));
  which.value = kind;
  const target = h("input", { type: "search", id: "policy-target", placeholder: "agent name or session id", value: name });
  const pick = h("form", {
    class: "filters", id: "policy-pick",
    onsubmit: (e) => { e.preventDefault(); if (target.value.trim()) location.hash = `#/policies?${which.value}=${enc(target.value.trim())}`; },
  }, which, target, h("button", { type: "submit" }, "Open"));
  const body = h("div", { id: "policy" });
  const changes = h("tbody", {});
  show(h("h1", {}, "Approval policies"), pick, body,
    h("h2", {}, name ? `Changes of ${kind} ${name}` : "Latest changes"),
    h("table", { id: "policy-changes" },
      h("thead", {}, h("tr", {}, ["changed", "by", "of", "version", ""].map((t) => h("th", {}, t)))), changes));
  if (name) await loadPolicy(body, kind, name, () => loadPolicyChanges(changes, kind, name));
  await loadPolicyChanges(changes, kind, name);
}

async function loadPolicy(body, kind, name, changed) {
  const path = `api/policies/${kind === "agent" ? "agents" : "sessions"}/${enc(name)}`;
  let stored;
  try {
    stored = await api(path);
  } catch (e) {
    body.replaceChildren(h("p", { class: "error", id: "policy-error" }, e.message));
    return;
  }
  const operator = me.roles.includes("operator");
  const state = h("p", { id: "policy-state" });
  const editor = h("textarea", { id: "policy-text", rows: "16", spellcheck: "false", placeholder: POLICY_EXAMPLE });
  editor.readOnly = !operator;
  const error = h("p", { class: "error", id: "policy-error" });
  const done = h("p", { class: "notice", id: "policy-done" });
  const shown = (kept) => {
    stored = kept;
    editor.value = kept.policy ? policyText(kept.policy) : "";
    state.textContent = kept.version
      ? `version ${kept.version}${kept.policy ? "" : " (cleared: every gated call asks a person)"}, by ${kept.changedBy} ${when(kept.changedAt)}`
      : "no policy: every gated call asks a person";
    if (clear) clear.disabled = !kept.policy;
  };
  const change = async (button, request, what) => {
    error.textContent = ""; done.textContent = "";
    button.disabled = true;
    try {
      shown(await request());
      done.textContent = what(stored);
      changed();
    } catch (e) {
      error.textContent = e.status === 409 ? `${e.message} Reload to see it, then change it again.` : e.message;
    } finally {
      button.disabled = false;
      if (clear) clear.disabled = !stored.policy;
    }
  };
  const save = operator ? h("button", { type: "button", class: "approve", id: "policy-save" }, "Save") : null;
  const clear = operator ? h("button", { type: "button", class: "reject", id: "policy-clear" }, "Clear") : null;
  if (operator) {
    save.onclick = () => {
      let policy;
      try {
        policy = JSON.parse(editor.value);
      } catch (e) {
        error.textContent = `not JSON: ${e.message}`;
        done.textContent = "";
        return;
      }
      change(save, () => api(path, { method: "PUT", body: { policy, expectedVersion: stored.version } }),
        (kept) => `saved as version ${kept.version}: it decides the next gated call`);
    };
    clear.onclick = () => change(clear, () => api(`${path}?expectedVersion=${stored.version}`, { method: "DELETE" }),
      (kept) => `cleared (version ${kept.version}): every gated call asks a person`);
  }
  shown(stored);
  body.replaceChildren(h("h2", {}, `${kind} ${name}`), state,
    h("label", { for: "policy-text" }, "Policy ",
      h("span", { class: "hint" }, operator ? "(JSON: deny rules, allow rules, approveAll, auto; see the docs' approval policy reference)" : "(read only: an operator changes it)")),
    editor, operator ? h("div", { class: "actions" }, save, clear) : null, error, done);
}

async function loadPolicyChanges(rows, kind, name) {
  const q = new URLSearchParams({ limit: "50" });
  if (name) q.set(kind, name);
  let page;
  try {
    page = await api(`api/policies/changes?${q}`);
  } catch (e) {
    rows.replaceChildren(h("tr", {}, h("td", { class: "error", colspan: 5 }, e.message)));
    return;
  }
  rows.replaceChildren();
  if (!page.changes.length) rows.append(h("tr", {}, h("td", { colspan: 5 }, "no changes")));
  for (const c of page.changes) {
    const of = h("a", { href: `#/policies?${c.scope.kind}=${enc(c.scope.name)}` }, `${c.scope.kind} ${c.scope.name}`);
    rows.append(h("tr", { "data-version": String(c.toVersion) }, h("td", {}, when(c.changedAt)), h("td", {}, c.changedBy), h("td", {}, of),
      h("td", {}, `v${c.fromVersion} → v${c.toVersion}`), h("td", {}, c.newPolicy ? "set" : "cleared")));
  }
}

// Who or what decided a call (a person, a rule, a grant, the auto mode's evaluator, a timeout), and
// under which policy version: nothing the policy approved is shown as if nobody had.
function decider(d) {
  const source = d.source || "person";
  const by = {
    "person": d.decidedBy || "—",
    "deny-rule": `deny rule “${d.rule}”`,
    "allow-rule": `allow rule “${d.rule}”`,
    "approve-all": "policy: approve all",
    "grant": `grant ${d.grantId}`,
    "evaluator": `evaluator (${d.criteria}${d.evaluation && d.evaluation.confidence != null ? `, ${d.evaluation.confidence.toFixed(2)}` : ""})`,
    "timeout": "timeout",
  }[source] || source;
  return d.policyVersion != null ? `${by} · policy v${d.policyVersion}` : by;
}

function verdict(d) {
  if (d.approved) return "approved";
  return ["person", "timeout", undefined, null].includes(d.source) ? "rejected" : "denied";
}

function why(d) {
  const parts = [];
  if (d.source && !["person", "timeout"].includes(d.source) && d.reason) parts.push(d.reason);
  const ev = d.evaluation;
  if (ev && !ev.decided && ev.escalated) parts.push(`evaluator left it to a person: ${ev.escalated}`);
  if (ev && !ev.decided && ev.reasoning) parts.push(`its reasoning: ${ev.reasoning}`);
  if (ev) {
    const took = ev.latencyMs != null ? ` in ${Math.round(ev.latencyMs)} ms` : "";
    const cost = ev.costUsd != null ? `, $${ev.costUsd.toFixed(4)}` : "";
    parts.push(`the evaluator's verdict ${ev.verdict || "none"}${took}${cost}`);
  }
  if (d.grantCreated) parts.push(`made grant ${d.grantCreated}`);
  return parts.join("; ");
}

// -- routing -----------------------------------------------------------------------------------
function route() {
  if (!me) return;
  const [path, query] = (location.hash.slice(1) || "/inbox").split("?");
  const params = new URLSearchParams(query || "");
  const [, view, ...rest] = path.split("/");
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : null;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.view === view);
  if (view === "approval" && arg) return renderApproval(arg);
  if (view === "sessions") return renderSessions(params);
  if (view === "session" && arg) return renderSession(arg);
  if (view === "diff") return renderDiff(params);
  if (view === "audit") return renderAudit();
  if (view === "grants") return renderGrants(params);
  if (view === "policies") return renderPolicies(params);
  return renderInbox(params);
}

window.addEventListener("hashchange", route);
(async () => {
  try {
    me = await api("api/me");
    signedIn();
    route();
  } catch (e) {
    if (e.status !== 401) renderLogin(e.message);
  }
})();
