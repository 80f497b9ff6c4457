/* actionspace console: the approvals queue, with the preview a person decides on.
 */

import { LIST_POLL_MS, isCurrent, api, segment, h, show, link, cls, badge, when, provMark, schedule, errorText, refreshPendingCount, searchForm } from "./core.js";
import { exactJson, exactName, exactValue } from "./exact.js";

/** Requests decided in this tab, newest first: they stay visible in the queue after the refresh. */
const decidedHere = [];

// ------------------------------------------------------------------ approvals
const APPROVAL_FILTERS = ["pending", "approved", "denied", "expired", "consumed", "all"];

export async function approvalsPage(view, serial) {
  const params = new URLSearchParams(window.location.search);
  const status = APPROVAL_FILTERS.includes(params.get("status")) ? params.get("status") : "pending";
  const runFilter = params.get("run");
  const text = (params.get("q") || "").toLowerCase();
  // one run's requests are asked for by run, so newer requests of other runs never crowd them out
  const query = "?status=" + status + (runFilter ? "&limit=1000&run=" + encodeURIComponent(runFilter) : "");
  const requests = (await api("/approvals" + query, { exactNumbers: true })).filter(function (r) {
    if (runFilter && r.run_id !== runFilter) return false;
    return !text || JSON.stringify([r.tool, r.run_id, r.reason, r.arguments]).toLowerCase().includes(text);
  });
  if (!isCurrent(serial)) return;
  const tabs = h("div", { class: "tabs" }, APPROVAL_FILTERS.map(function (f) {
    const keep = new URLSearchParams(params);
    if (f === "pending") keep.delete("status"); else keep.set("status", f);
    const a = link("/approvals" + (keep.toString() ? "?" + keep.toString() : ""), f);
    if (f === status) a.classList.add("active");
    return a;
  }));
  const list = h("div", { id: "approval-list" });
  if (requests.length === 0) {
    list.append(h("p", { class: "empty card" },
      status === "pending" ? "Nothing is waiting for approval." : "No " + status + " requests."));
  }
  if (status === "pending" && !runFilter && !text) {
    for (const decided of decidedHere) list.append(approvalCard(decided));
  }
  for (const request of requests) list.append(approvalCard(request));
  show(view,
    h("div", { class: "page-head" }, h("h1", null, "Approvals"), h("span", { class: "spacer" }), tabs),
    h("p", { class: "muted" },
      "Each request is exactly one call: the normalized arguments below are what will run. ",
      "Approving binds to these argument values; any change needs a new approval."),
    searchForm("/approvals", params, "Search tool, run, reason, arguments"),
    runFilter ? h("p", { id: "run-filter" }, "Requests of run ",
      link("/runs/" + encodeURIComponent(runFilter), h("span", { class: "mono" }, runFilter)), " · ",
      link("/approvals" + (status === "pending" ? "" : "?status=" + status), "show every run")) : null,
    list);
  if (status === "pending") {
    const refresh = function () {
      // Never replace the list under a person who is typing a reason.
      const active = document.activeElement;
      if (active && active.matches("input") && active.closest(".approval")) {
        schedule(serial, LIST_POLL_MS, refresh);
        return;
      }
      approvalsPage(view, serial).catch(function () {});
    };
    schedule(serial, LIST_POLL_MS, refresh);
  }
}

function requestId(request) {
  return request.request_id || request.id;
}

function approvalCard(request) {
  const id = requestId(request);
  const details = request.details || {};
  const card = h("article", {
    class: "card approval" + (request.status !== "pending" ? " decided-" + cls(request.status) : ""),
    "data-request-id": id,
  });
  card.append(
    h("header", null,
      exactName("span", { class: "tool-name" }, request.tool),
      badge(request.status),
      h("span", { class: "muted" }, "run ",
        link("/runs/" + encodeURIComponent(request.run_id), exactName("span", { class: "mono" }, request.run_id)),
        request.node_id ? " · node " : "", request.node_id ? exactName("span", { class: "mono" }, request.node_id) : null),
      h("span", { class: "spacer" }),
      h("span", { class: "muted" }, "filed " + when(request.created_at))),
    h("p", { class: "reason" }, request.reason || "needs approval"));
  const preview = request.preview || {};
  const args = preview.arguments || request.arguments || {};
  const provenance = preview.provenance || request.provenance || {};
  const effects = preview.effects || request.effects || [];
  const items = Array.isArray(preview.items) ? preview.items : details.items;
  card.append(h("h3", null, "Normalized call"), argumentsTable(args, provenance),
    h("details", { class: "call-json" }, h("summary", null, "As JSON"),
      h("pre", null, exactJson({ tool: request.tool, arguments: args }))));
  if (effects.length) {
    card.append(h("h3", null, "Writes"),
      h("ul", { class: "effects" }, effects.map(function (e) { return exactName("li", { class: "mono" }, e); })));
  }
  if (Array.isArray(items) && items.length) {
    card.append(batchItems(items));
  }
  if (request.status === "pending") {
    card.append(decisionBar(card, id, request.run_id, preview.redacted === true));
  } else {
    card.append(h("p", { class: "muted decision" },
      request.status + (request.decided_by ? " by " + request.decided_by : "") + " " + when(request.decided_at) +
      (request.decision_reason ? ": " + request.decision_reason : "") + " · ",
      link("/runs/" + encodeURIComponent(request.run_id), "Follow the run →")));
  }
  return card;
}

function argumentsTable(args, prov) {
  const names = Object.keys(args);
  if (names.length === 0) return h("p", { class: "muted" }, "No arguments.");
  return h("table", { class: "args" },
    h("thead", null, h("tr", null, h("th", null, "Argument"), h("th", null, "Value"), h("th", null, "Came from"))),
    h("tbody", null, names.map(function (name) {
      return h("tr", { "data-argument": name },
        exactName("td", null, name),
        h("td", null, exactValue(args[name])),
        h("td", null, provMark(prov[name])));
    })));
}

function batchItems(items) {
  return h("div", { class: "batch" },
    h("h3", null, "Batch items (" + items.length + ")"),
    h("table", { class: "items" },
      h("thead", null, h("tr", null, h("th", null, "Key"), h("th", null, "Item"), h("th", null, "Writes"))),
      h("tbody", null, items.map(function (item) {
        return h("tr", { "data-item": item.key },
          exactName("td", { class: "mono" }, item.key),
          h("td", null, exactValue(item.item)),
          h("td", { class: "mono" }, (item.writes || []).length
            ? item.writes.map(function (w) { return exactName("div", null, w); }) : "—"));
      }))));
}

// A person who may not see what is approved may not approve it (the API refuses with 403 too).
const NOT_CLEARED = "Its values are redacted for you: you may not approve a call you cannot see. You may deny it.";

function decisionBar(card, id, runId, redacted) {
  const reason = h("input", { type: "text", placeholder: "Reason (optional, kept in the trace)", "aria-label": "Reason" });
  const result = h("span", { class: "muted", role: "status" });
  const approve = h("button", { type: "button", class: "approve" }, "Approve");
  const deny = h("button", { type: "button", class: "deny" }, "Deny");
  if (redacted) {
    approve.disabled = true;
    approve.title = NOT_CLEARED;
    result.textContent = NOT_CLEARED;
    result.classList.add("not-cleared");
  }
  async function decide(verb) {
    approve.disabled = deny.disabled = reason.disabled = true;
    result.textContent = verb === "approve" ? "Approving…" : "Denying…";
    try {
      const body = reason.value.trim() ? { reason: reason.value.trim() } : {};
      const decided = await api("/approvals/" + segment(id) + "/" + verb,
        { method: "POST", body: body, exactNumbers: true });
      const status = decided && decided.status ? decided.status : verb === "approve" ? "approved" : "denied";
      if (decided && typeof decided === "object" && decided.tool) {
        decidedHere.unshift(decided);
        decidedHere.length = Math.min(decidedHere.length, 5);
      }
      card.classList.add("decided-" + cls(status));
      result.replaceChildren(badge(status), " by " + ((decided && decided.decided_by) || "you") + ". ",
        link("/runs/" + encodeURIComponent(runId), "Follow the run →"));
      refreshPendingCount();
    } catch (err) {
      result.textContent = errorText(err);
      result.className = "error-text";
      approve.disabled = redacted;
      deny.disabled = reason.disabled = false;
    }
  }
  approve.addEventListener("click", function () { decide("approve"); });
  deny.addEventListener("click", function () { decide("deny"); });
  return h("div", { class: "actions" }, reason, approve, deny, result);
}
