/* actionspace console: values shown exactly, for a person who approves or reconciles a call.
 *
 * A value a person decides on must not look like another one. A string of visible ASCII without
 * spaces at its ends is shown as it is; any other value is shown as JSON with every character
 * outside visible ASCII written as a \uXXXX escape (lookalike letters, zero-width and
 * direction-changing characters, line breaks), and a flag says why. Numbers keep their digits (see
 * ExactNumber in core.js).
 */

import { ExactNumber, h } from "./core.js";

const AS_IS = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
const NOT_VISIBLE_ASCII = /[^\x20-\x7e\n]/g;

/** Pretty JSON text of `value`, numbers as sent (ExactNumber), key order kept. */
function jsonText(value, depth) {
  const pad = "  ".repeat(depth + 1);
  const end = "\n" + "  ".repeat(depth);
  if (value instanceof ExactNumber) return value.source;
  if (Array.isArray(value)) {
    if (!value.length) return "[]";
    return "[\n" + value.map(function (v) { return pad + jsonText(v, depth + 1); }).join(",\n") + end + "]";
  }
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) return "{}";
    return "{\n" + keys.map(function (k) {
      return pad + JSON.stringify(k) + ": " + jsonText(value[k], depth + 1);
    }).join(",\n") + end + "}";
  }
  const text = JSON.stringify(value);
  return text === undefined ? "null" : text;
}

function escapeNonAscii(text) {
  return text.replace(NOT_VISIBLE_ASCII, function (c) {
    return "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
  });
}

function hasInexactNumber(value) {
  if (typeof value === "number") return Number.isInteger(value) && !Number.isSafeInteger(value);
  if (value !== null && typeof value === "object" && !(value instanceof ExactNumber)) {
    return Object.keys(value).some(function (k) { return hasInexactNumber(value[k]); });
  }
  return false;
}

/** `{ text, flags }`: the text to show for `value` and why it is not shown as it is (may be empty). */
export function literal(value) {
  if (typeof value === "string" && AS_IS.test(value)) return { text: value, flags: [] };
  const raw = jsonText(value, 0);
  const text = escapeNonAscii(raw);
  const flags = [];
  if (text !== raw) flags.push("contains characters outside visible ASCII (lookalike, invisible or " +
    "direction-changing): each is shown as a \\u escape");
  if (typeof value === "string" && text === raw) {
    flags.push("shown as a JSON string: it has spaces at its ends, line breaks or control characters");
  }
  if (hasInexactNumber(value)) flags.push("a number too long for this browser to show exactly: check the API");
  return { text: text, flags: flags };
}

function flagList(flags) {
  return flags.map(function (f) { return h("p", { class: "flag", role: "note" }, "⚠ " + f); });
}

/** The exact view of a value: a `.value` block, then its flags. */
export function exactValue(value) {
  const shown = literal(value);
  return [h("div", { class: "value", "data-flagged": shown.flags.length ? "true" : "false" }, shown.text),
    flagList(shown.flags)];
}

/** A name (tool, argument, key, resource) shown exactly inside an element of `tag` with `attrs`. */
export function exactName(tag, attrs, name) {
  const shown = literal(name === undefined || name === null ? "" : String(name));
  const el = h(tag, attrs, shown.text);
  if (shown.flags.length) {
    el.classList.add("flagged");
    el.setAttribute("title", shown.flags.join("; "));
  }
  return el;
}

/** Pretty JSON of a whole call, numbers as sent and everything outside visible ASCII escaped. */
export function exactJson(value) {
  return escapeNonAscii(jsonText(value, 0));
}
