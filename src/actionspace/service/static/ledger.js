/* actionspace console: the commit ledger, and a person's reconciliation of unknown commits.
 *
 * An unknown_commit is an action whose outcome the runtime could not establish (the tool may have
 * acted). A person who has seen the evidence records what really happened; the runtime then
 * replays that outcome instead of ever sending the call again. Needs a token with ledger:resolve.
 */

import { LIST_POLL_MS, isCurrent, api, segment, h, show, link, badge, when, schedule, errorText, searchForm } from "./core.js";
import { exactJson, exactName } from "./exact.js";

const STATES = ["unknown_commit", "dispatched", "committed", "failed", "all"];

/** Entries reconciled in this tab, newest first: they stay in the queue, showing the outcome recorded. */
const resolvedHere = [];
let evidenceFields = 0;

export async function ledgerPage(view, serial) {
  const params = new URLSearchParams(window.location.search);
  const state = STATES.includes(params.get("state")) ? params.get("state") : "unknown_commit";
  const text = (params.get("q") || "").toLowerCase();
  const entries = (await api("/ledger" + (state === "all" ? "" : "?state=" + state), { exactNumbers: true })).filter(function (e) {
    return !text || [e.key, e.tool, e.run_id, e.node_id, JSON.stringify(e.arguments)].join(" ").toLowerCase().includes(text);
  });
  if (!isCurrent(serial)) return;
  const tabs = h("div", { class: "tabs" }, STATES.map(function (s) {
    const keep = new URLSearchParams(params);
    if (s === "unknown_commit") keep.delete("state"); else keep.set("state", s);
    const a = link("/ledger" + (keep.toString() ? "?" + keep.toString() : ""), s.replace("_", " "));
    if (s === state) a.classList.add("active");
    return a;
  }));
  const list = h("div", { id: "ledger-list" });
  if (entries.length === 0 && !(state === "unknown_commit" && resolvedHere.length)) {
    list.append(h("p", { class: "empty card" },
      state === "unknown_commit" ? "No action waits for reconciliation." : "No " + state.replace("_", " ") + " entries."));
  }
  if (state === "unknown_commit" && !text) {
    for (const done of resolvedHere) list.append(entryCard(done));
  }
  for (const entry of entries) list.append(entryCard(entry));
  show(view,
    h("div", { class: "page-head" }, h("h1", null, "Ledger"), h("span", { class: "spacer" }), tabs),
    h("p", { class: "muted" },
      "Every side-effecting action, keyed by its idempotency key. An unknown commit is an action whose ",
      "outcome the runtime could not establish: check the evidence (the bank statement, the outbox), then record ",
      "what happened. The call is never sent again; the recorded outcome is replayed."),
    searchForm("/ledger", params, "Search key, tool, run, arguments"),
    list);
  if (state === "unknown_commit") {
    const refresh = function () {
      const active = document.activeElement;
      if (active && active.closest && active.closest(".ledger-entry")) {  // never under a person typing
        schedule(serial, LIST_POLL_MS, refresh);
        return;
      }
      ledgerPage(view, serial).catch(function () {});
    };
    schedule(serial, LIST_POLL_MS, refresh);
  }
}

function entryCard(entry) {
  const card = h("article", { class: "card ledger-entry", "data-key": entry.key, "data-state": entry.state });
  card.append(
    h("header", null,
      exactName("span", { class: "tool-name" }, entry.tool),
      badge(entry.state),
      h("span", { class: "muted" }, "run ",
        link("/runs/" + encodeURIComponent(entry.run_id), h("span", { class: "mono" }, entry.run_id)),
        " · node ", h("span", { class: "mono" }, entry.node_id)),
      h("span", { class: "spacer" }),
      h("span", { class: "muted" }, "updated " + when(entry.updated_at))),
    h("p", null, "key ", h("code", { class: "mono key" }, entry.key), " · attempts " + entry.attempts),
    h("pre", { class: "args-json" }, exactJson(entry.arguments)));
  if (entry.resolution) {
    const r = entry.resolution;
    card.append(h("p", { class: "muted decision" },
      "reconciled by " + (r.by || "?") + (r.reason ? ": " + r.reason : "")));
  }
  if (entry.state === "unknown_commit") card.append(resolveForm(card, entry));
  return card;
}

function resolveForm(card, entry) {
  evidenceFields += 1;  // keys may differ only in characters an id cannot hold: number the fields
  const id = "evidence-" + evidenceFields;
  const outcome = h("select", { name: "outcome", "aria-label": "What happened" },
    h("option", { value: "committed" }, "it happened (committed)"),
    h("option", { value: "not_committed" }, "it did not happen (not committed)"));
  const note = h("textarea", { id: id, name: "note", rows: 2, required: true, maxlength: 2000,
    placeholder: "e.g. payment p17 seen in the bank statement" });
  const status = h("p", { class: "muted", role: "status" });
  const button = h("button", { type: "submit", class: "primary" }, "Record outcome");
  const form = h("form", { class: "resolve" },
    h("label", { for: id }, "Evidence"), note,
    h("div", { class: "row" }, outcome, button), status);
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    if (!note.value.trim()) {
      status.textContent = "Say what you saw: the evidence is kept with the entry.";
      return;
    }
    button.disabled = true;
    try {
      const done = await api("/ledger/" + segment(entry.key) + "/resolve", {
        method: "POST", body: { outcome: outcome.value, note: note.value.trim() },
      });
      resolvedHere.unshift(done);
      card.setAttribute("data-state", done.state);
      card.querySelector("header .badge").replaceWith(badge(done.state));
      form.replaceWith(h("p", { class: "decision", role: "status" },
        "Recorded: ", badge(done.state), " by " + ((done.resolution || {}).by || "you")));
    } catch (err) {
      button.disabled = false;
      status.textContent = errorText(err);
    }
  });
  return form;
}
