/* actionspace console: the overview, the runs list and a run's page (summary, plan, timeline).
 */

import { RUN_POLL_MS, LIST_POLL_MS, PAGE_SIZE, isCurrent, api, h, s, show, link, cls, badge, seconds, when, short, pretty, schedule, field, searchForm } from "./core.js";
import { planView } from "./dag.js";

// ------------------------------------------------------------------ overview
export async function overviewPage(view, serial) {
  const [pending, runs] = await Promise.all([
    api("/approvals?status=pending"),
    api("/runs?limit=10"),
  ]);
  if (!isCurrent(serial)) return;
  show(view,
    h("div", { class: "page-head" }, h("h1", null, "Overview")),
    h("div", { class: "grid-2" },
      h("section", { class: "card" },
        h("h2", null, "Waiting for a decision"),
        pending.length === 0
          ? h("p", { class: "empty" }, "No call is waiting for approval.")
          : h("table", null,
            h("thead", null, h("tr", null, h("th", null, "Tool"), h("th", null, "Run"), h("th", null, "Filed"))),
            h("tbody", null, pending.map(function (r) {
              return h("tr", null,
                h("td", null, link("/approvals", r.tool)),
                h("td", { class: "mono" }, link("/runs/" + encodeURIComponent(r.run_id), short(r.run_id, 36))),
                h("td", null, when(r.created_at)));
            }))),
        h("p", null, link("/approvals", "Open the approvals queue →"))),
      h("section", { class: "card" },
        h("h2", null, "Recent runs"),
        runsTable(runs, true),
        h("p", null, link("/runs", "All runs →")))));
  schedule(serial, LIST_POLL_MS, function () { overviewPage(view, serial).catch(function () {}); });
}

// ------------------------------------------------------------------ runs
function runStatus(run) {
  if (run.status) return run.status;
  return run.finished_at ? "finished" : "running";
}

function runsTable(runs, compact) {
  if (!runs.length) return h("p", { class: "empty" }, "No runs recorded yet.");
  const head = compact
    ? ["Run", "Status", "Started"]
    : ["Run", "Status", "Principal", "Started", "Finished", "Calls", "Errors"];
  return h("table", { class: "runs" },
    h("thead", null, h("tr", null, head.map(function (c) {
      return h("th", { class: c === "Calls" || c === "Errors" ? "num" : null }, c);
    }))),
    h("tbody", null, runs.map(function (run) {
      const cells = [
        h("td", { class: "mono" }, link("/runs/" + encodeURIComponent(run.run_id), short(run.run_id, 40))),
        h("td", null, badge(runStatus(run))),
      ];
      if (!compact) cells.push(h("td", null, run.principal || "—"));
      cells.push(h("td", null, when(run.started_at)));
      if (!compact) {
        cells.push(h("td", null, when(run.finished_at)),
          h("td", { class: "num" }, run.calls === undefined ? "—" : run.calls),
          h("td", { class: "num" }, run.errors === undefined ? "—" : run.errors));
      }
      return h("tr", { "data-run-id": run.run_id }, cells);
    })));
}

const RUN_FILTERS = ["all", "running", "waiting_approval", "ok", "error", "open"];

export async function runsPage(view, serial) {
  const params = new URLSearchParams(window.location.search);
  const before = params.get("before");
  const beforeId = params.get("before_id");
  const text = (params.get("q") || "").toLowerCase();
  const wanted = RUN_FILTERS.includes(params.get("status")) ? params.get("status") : "all";
  const fetched = await api("/runs?limit=" + PAGE_SIZE + (before ? "&before=" + encodeURIComponent(before) : "")
    + (before && beforeId !== null ? "&before_id=" + encodeURIComponent(beforeId) : ""));
  if (!isCurrent(serial)) return;
  const runs = fetched.filter(function (r) {
    if (wanted !== "all" && runStatus(r) !== wanted && !(wanted === "error" && runStatus(r) !== "ok" && r.finished_at)) return false;
    return !text || [r.run_id, r.principal, runStatus(r)].join(" ").toLowerCase().includes(text);
  });
  const tabs = h("div", { class: "tabs" }, RUN_FILTERS.map(function (f) {
    const keep = new URLSearchParams(params);
    keep.delete("before");
    keep.delete("before_id");
    if (f === "all") keep.delete("status"); else keep.set("status", f);
    const a = link("/runs" + (keep.toString() ? "?" + keep.toString() : ""), f.replace("_", " "));
    if (f === wanted) a.classList.add("active");
    return a;
  }));
  const last = fetched[fetched.length - 1];
  const older = fetched.length === PAGE_SIZE
    ? link("/runs?before=" + encodeURIComponent(last.last_at || last.started_at)
      + "&before_id=" + encodeURIComponent(last.run_id), "Older runs →")
    : null;
  show(view,
    h("div", { class: "page-head" }, h("h1", null, "Runs"), h("span", { class: "spacer" }),
      before ? link("/runs", "← Newest") : null, tabs),
    searchForm("/runs", params, "Search run id, principal, status"),
    h("section", { class: "card" }, runsTable(runs, false)),
    older ? h("p", null, older) : null);
  if (!before) schedule(serial, LIST_POLL_MS, function () { runsPage(view, serial).catch(function () {}); });
}

export async function runPage(view, serial, runId) {
  const path = "/runs/" + encodeURIComponent(runId);
  const [run, events, requests] = await Promise.all([api(path), api(path + "/events"), runApprovals(runId)]);
  if (!isCurrent(serial)) return;
  const status = runStatus(run);
  const finished = Boolean(run.finished_at);
  const openDetails = new Set(Array.from(view.querySelectorAll("details[open]")).map(function (d) {
    return d.getAttribute("data-seq");
  }));
  show(view,
    h("div", { class: "page-head" },
      h("h1", null, "Run ", h("span", { class: "mono" }, run.run_id)),
      h("span", { id: "run-status", class: "badge s-" + cls(status), "data-status": status,
        "data-finished": finished ? "true" : "false" }, finished ? status : status === "open" ? "open (not finished)" : status + " (in progress)")),
    h("section", { class: "card summary" },
      field("principal", run.principal || "—"),
      field("started", when(run.started_at)),
      field("finished", when(run.finished_at)),
      field("calls", run.calls === undefined ? "—" : run.calls),
      field("errors", run.errors === undefined ? "—" : run.errors),
      field("events", events.length)),
    approvalsOfRun(runId, requests),
    run.plan ? h("section", { class: "card" }, h("h2", null, "Plan"), planView(run.plan)) : null,
    h("section", { class: "card" }, h("h2", null, "Timeline"), timeline(events, openDetails, run.run_id)));
  if (!finished) schedule(serial, RUN_POLL_MS, function () { runPage(view, serial, runId).catch(function () {}); });
}


/** The run's approval requests, or null when this token may not read approvals. */
async function runApprovals(runId) {
  try {
    return await api("/approvals?status=all&limit=1000&run=" + encodeURIComponent(runId));
  } catch (_) {
    return null;
  }
}

function approvalsOfRun(runId, requests) {
  if (!requests || requests.length === 0) return null;
  const pending = requests.filter(function (r) { return r.status === "pending"; }).length;
  return h("section", { class: "card", id: "run-approvals" },
    h("h2", null, "Approvals"),
    pending ? h("p", null, link("/approvals?run=" + encodeURIComponent(runId),
      pending === 1 ? "1 call waits for a decision: decide it →" : pending + " calls wait for a decision: decide them →")) : null,
    h("ul", { class: "plain" }, requests.map(function (r) {
      const id = r.request_id || r.id;
      return h("li", { "data-request-id": id },
        badge(r.status), " ", h("span", { class: "tool-name" }, r.tool), " ",
        link("/approvals?run=" + encodeURIComponent(runId) + (r.status === "pending" ? "" : "&status=all"),
          h("span", { class: "mono" }, id)));
    })));
}

const KIND_CLASS = {
  run_started: "run", run_finished: "run", plan_started: "run", plan_finished: "run",
  approval_requested: "approval", approval_decided: "approval",
  plan_rejected: "error", plan_node_blocked: "error",
};

function eventClass(ev) {
  const data = ev.data || {};
  if (ev.kind === "observation") return data.status === "ok" ? "ok" : "error";
  if (ev.kind === "validated" && data.verdict && data.verdict !== "accepted") return "error";
  return KIND_CLASS[ev.kind] || "";
}

function eventSummary(ev) {
  const d = ev.data || {};
  const bits = [];
  if (d.tool) bits.push(d.tool);
  if (d.status) bits.push(d.status);
  if (d.category) bits.push(d.category);
  if (d.state) bits.push(d.state);
  if (d.to) bits.push((d.from || "new") + " → " + d.to);
  if (d.key && ev.kind === "ledger") bits.push(short(d.key, 20));
  if (d.verdict) bits.push(d.verdict);
  if (d.reason) bits.push(d.reason);
  if (d.message) bits.push(d.message);
  if (d.by) bits.push("by " + d.by);
  if (ev.kind === "plan_started" && Array.isArray(d.nodes)) {
    bits.push(d.nodes.length + " nodes, " + (d.edges || []).length + " edges");
  }
  if (d.node && !d.node_id) bits.push("node " + d.node);
  if (d.blocked_by) bits.push("blocked by " + d.blocked_by);
  if (d.request_id && ev.kind.startsWith("approval")) bits.push(d.request_id);
  if (d.node_id) bits.push("node " + d.node_id);
  return short(bits.length ? bits.join(" · ") : JSON.stringify(d), 180);
}

function elapsed(secs) {
  if (secs < 1) return (secs * 1000).toFixed(0) + " ms";
  if (secs < 120) return secs.toFixed(secs < 10 ? 2 : 1) + " s";
  return (secs / 60).toFixed(1) + " min";
}

function timeline(events, openDetails, runId) {
  const prefix = runId + ":";
  if (!events.length) return h("p", { class: "empty" }, "No events.");
  const t0 = seconds(events[0].at);
  return h("table", { class: "timeline" },
    h("thead", null, h("tr", null, h("th", null, "#"), h("th", null, "+time"), h("th", null, "Event"),
      h("th", null, "Call"), h("th", null, "What happened"))),
    h("tbody", null, events.map(function (ev) {
      const at = seconds(ev.at);
      const offset = at !== null && t0 !== null ? elapsed(at - t0) : "—";
      const details = h("details", { "data-seq": ev.seq, open: openDetails.has(String(ev.seq)) },
        h("summary", null, eventSummary(ev)), h("pre", null, pretty(ev.data || {})));
      return h("tr", { "data-kind": ev.kind },
        h("td", { class: "seq" }, ev.seq),
        h("td", { class: "at", title: when(ev.at) }, offset),
        h("td", { class: "ev" }, h("span", { class: "kind kind-" + eventClass(ev) }, ev.kind)),
        h("td", { class: "mono", title: ev.call_id || "" },
          ev.call_id ? short(ev.call_id.startsWith(prefix) ? ev.call_id.slice(prefix.length) : ev.call_id, 22) : ""),
        h("td", null, details));
    })));
}
