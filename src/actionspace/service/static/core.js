/* actionspace console: the API client (bearer token from sessionStorage), DOM helpers, polling.
 *
 * All text from the API is inserted as text nodes, never as HTML.
 */

export const TOKEN_KEY = "actionspace.token";
export const SVG_NS = "http://www.w3.org/2000/svg";
export const RUN_POLL_MS = 1000;
export const LIST_POLL_MS = 3000;
export const PAGE_SIZE = 50;

let pollTimer = null;
let renderSerial = 0;

/** A new page render starts: earlier renders and their polls become stale. */
export function nextSerial() {
  stopPolling();
  renderSerial += 1;
  return renderSerial;
}

/** True while `serial` is the page on screen. */
export function isCurrent(serial) {
  return serial === renderSerial;
}

// ------------------------------------------------------------------ token
export function takeTokenFromUrl() {
  const url = new URL(window.location.href);
  const token = url.searchParams.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, message, category) {
    super(message);
    this.status = status;
    this.category = category;
  }
}

/** A JSON number whose text a JavaScript number cannot hold exactly: it keeps the text as sent. */
export class ExactNumber {
  constructor(source) {
    this.source = source;
  }

  toJSON() {
    return this.source;
  }
}

/** JSON.parse reviver keeping the source text of every number that would not round-trip. */
function exactNumbers(key, value, context) {
  if (typeof value === "number" && context && typeof context.source === "string" && String(value) !== context.source) {
    return new ExactNumber(context.source);
  }
  return value;
}

/** One path segment of an API URL, percent-encoded. "", "." and ".." are refused: the URL parser
 * would resolve them against the path and the request would reach another endpoint. */
export function segment(value) {
  const text = String(value);
  if (text === "" || text === "." || text === "..") {
    throw new ApiError(0, "the id " + JSON.stringify(text) + " cannot be sent in a URL path", "invalid_arguments");
  }
  return encodeURIComponent(text);
}

/** GET/POST `/api` + path; `options.exactNumbers` keeps numbers that would lose digits as ExactNumber. */
export async function api(path, options) {
  const opts = options || {};
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch("/api" + path, {
    method: opts.method || "GET",
    headers: headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    cache: "no-store",
  });
  let payload = null;
  const text = await response.text();
  if (text) {
    try {
      payload = opts.exactNumbers ? JSON.parse(text, exactNumbers) : JSON.parse(text);
    } catch (_) {
      payload = { error: { message: text.slice(0, 300) } };
    }
  }
  if (!response.ok) {
    const err = (payload && payload.error) || {};
    const message = err.message || (payload && payload.detail) || response.statusText;
    throw new ApiError(response.status, String(message), err.category);
  }
  return payload;
}

// ------------------------------------------------------------------ DOM helpers
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace the page's content (null / false children are left out). */
export function show(view, ...children) {
  view.replaceChildren(...children.flat().filter(function (c) { return c !== null && c !== undefined && c !== false; }));
}

export function link(href, ...children) {
  return h("a", { href: href, "data-link": true }, ...children);
}

export function cls(text) {
  return String(text || "").replace(/[^A-Za-z0-9_-]/g, "_");
}

export function badge(status, text) {
  return h("span", { class: "badge s-" + cls(status), "data-status": status }, text || status || "—");
}

export function toDate(value) {
  if (value === null || value === undefined || value === "") return null;
  const d = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return isNaN(d.getTime()) ? null : d;
}

export function seconds(value) {
  const d = toDate(value);
  return d ? d.getTime() / 1000 : null;
}

export function when(value) {
  const d = toDate(value);
  if (!d) return "—";
  return d.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

export function pct(value) {
  return value === null || value === undefined ? "—" : (100 * value).toFixed(0) + "%";
}

export function short(value, limit) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  const max = limit || 140;
  return text && text.length > max ? text.slice(0, max - 1) + "…" : text;
}

export function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

export function provMark(source) {
  const raw = source || "model_inferred";
  const kind = raw.startsWith("tool_result") ? "tool_result" : raw;
  const labels = {
    user: "from the user",
    tool_result: "from a tool result",
    model_inferred: "inferred by the model",
    default: "default value",
  };
  const title = raw.startsWith("tool_result:") ? "from the result of call " + raw.slice(12) : labels[kind];
  return h("span", { class: "prov prov-" + cls(kind), title: title || raw, "data-provenance": raw },
    labels[kind] || raw);
}

export function notice(text, bad) {
  return h("p", { class: bad ? "notice bad" : "notice", role: bad ? "alert" : "status" }, text);
}

export function stopPolling() {
  if (pollTimer !== null) {
    clearTimeout(pollTimer);
    pollTimer = null;
  }
}

export function schedule(serial, ms, fn) {
  stopPolling();
  pollTimer = setTimeout(function () {
    if (isCurrent(serial) && document.visibilityState !== "hidden") fn();
    else if (isCurrent(serial)) schedule(serial, ms, fn);
  }, ms);
}

export function errorText(err) {
  if (err instanceof ApiError && err.status === 0) return "Not sent: " + err.message;
  if (err instanceof ApiError) {
    const what = err.status === 403 ? "Not allowed for this token" : "The API answered " + err.status;
    return what + ": " + err.message;
  }
  return "Could not reach the API: " + (err && err.message ? err.message : String(err));
}

export async function refreshPendingCount() {
  const counter = document.getElementById("pending-count");
  try {
    const pending = await api("/approvals?status=pending");
    counter.textContent = String(pending.length);
    counter.hidden = pending.length === 0;
  } catch (_) {
    counter.hidden = true;
  }
}

export function field(key, value) {
  return h("div", null, h("div", { class: "k" }, key), h("div", { class: "v" }, value));
}

/** A search box that keeps the page's other filters (run, status) in the URL. */
export function searchForm(path, params, placeholder) {
  const input = h("input", { type: "search", name: "q", value: params.get("q") || "", placeholder: placeholder,
    "aria-label": "Search" });
  const form = h("form", { class: "search", role: "search" }, input, h("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const next = new URLSearchParams(params);
    if (input.value.trim()) next.set("q", input.value.trim()); else next.delete("q");
    const a = link(path + (next.toString() ? "?" + next.toString() : ""), "");
    a.hidden = true;
    document.body.append(a);
    a.click();
    a.remove();
  });
  return form;
}
