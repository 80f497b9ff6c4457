/* actionspace console: the catalog with per-tool health (from /api/metrics), and one tool's page.
 */

import { isCurrent, ApiError, api, h, show, link, badge, pct, short, pretty, field } from "./core.js";

// ------------------------------------------------------------------ tools and monitoring
const UNDECIDED = "Waiting for approval or told unknown_commit: neither a failure nor a success";

export async function toolsPage(view, serial) {
  const [catalog, metrics] = await Promise.all([api("/catalog"), api("/metrics")]);
  if (!isCurrent(serial)) return;
  const health = new Map((metrics.tools || []).map(function (t) { return [t.tool, t]; }));
  const names = new Set(catalog.map(function (t) { return t.name; }));
  for (const t of metrics.tools || []) names.add(t.tool);
  const byName = new Map(catalog.map(function (t) { return [t.name, t]; }));
  const sorted = Array.from(names).sort(function (a, b) {
    const ca = health.has(a) ? health.get(a).calls : 0;
    const cb = health.has(b) ? health.get(b).calls : 0;
    return cb - ca || a.localeCompare(b);
  });
  const alerts = metrics.alerts || [];
  show(view,
    h("div", { class: "page-head" }, h("h1", null, "Tools"),
      h("span", { class: "muted" }, (metrics.runs || 0) + " runs · " + (metrics.calls || 0) + " calls read from the trace")),
    alerts.length ? h("section", { class: "card alert" }, h("h2", null, "Alerts"),
      h("ul", null, alerts.map(function (a) { return h("li", null, h("strong", null, a.tool), ": " + a.message); }))) : null,
    h("section", { class: "card" }, h("table", { class: "tools" },
      h("thead", null, h("tr", null, ["Tool", "Effect", "Risk", "Calls", "Selected", "Rejects", "Failures",
        "Undecided", "Unknown commits", "Result used", "Downstream ok"].map(function (c, i) {
        return h("th", { class: i >= 3 ? "num" : null, title: c === "Undecided" ? UNDECIDED : null }, c);
      }))),
      h("tbody", null, sorted.map(function (name) {
        const spec = byName.get(name) || {};
        const t = health.get(name) || {};
        return h("tr", { "data-tool": name },
          h("td", null, link("/tools/" + encodeURIComponent(name), name),
            spec.version ? h("span", { class: "muted" }, " @" + spec.version) : null),
          h("td", null, spec.effect ? badge(spec.effect) : "—"),
          h("td", null, spec.risk || "—"),
          h("td", { class: "num" }, t.calls || 0),
          h("td", { class: "num" }, share(t.selection_rate)),
          h("td", { class: "num" }, t.rejects || 0),
          h("td", { class: "num" }, t.failures || 0),
          h("td", { class: "num", title: byCategory(t.undecided_by_category) }, t.undecided || 0),
          h("td", { class: "num" }, t.unknown_commits
            ? link("/ledger?q=" + encodeURIComponent(name), String(t.unknown_commits)) : 0),
          h("td", { class: "num" }, pct(t.utilization)),
          h("td", { class: "num" }, pct(t.downstream_success)));
      })))));
}

function share(rate) {
  if (rate === undefined || rate === null) return "—";
  const bar = h("span", { class: "bars" }, h("span"));
  bar.firstChild.style.width = Math.round(100 * rate) + "%";
  return h("span", null, bar, pct(rate));
}

/** "needs_approval: 4, unknown_commit: 3" for a cell's tooltip; null when there is nothing. */
function byCategory(counts) {
  const keys = Object.keys(counts || {});
  return keys.length ? keys.map(function (k) { return k + ": " + counts[k]; }).join(", ") : null;
}

function countsTable(title, counts, name) {
  const keys = Object.keys(counts || {});
  if (!keys.length) return null;
  return h("div", { "data-counts": name }, h("h3", null, title), h("table", null, h("tbody", null, keys.map(function (k) {
    return h("tr", null, h("td", { class: "mono" }, k), h("td", { class: "num" }, counts[k]));
  }))));
}

export async function toolPage(view, serial, name) {
  const [spec, metrics] = await Promise.all([
    api("/catalog/" + encodeURIComponent(name)).catch(function (err) {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }),
    api("/metrics"),
  ]);
  if (!isCurrent(serial)) return;
  const t = (metrics.tools || []).find(function (x) { return x.tool === name; }) || null;
  const alerts = (metrics.alerts || []).filter(function (a) { return a.tool === name; });
  show(view,
    h("div", { class: "page-head" }, h("h1", null, name),
      spec ? h("span", { class: "muted" }, "version " + spec.version) : badge("retired", "not in the catalog"),
      h("span", { class: "spacer" }), link("/tools", "← All tools")),
    spec ? h("section", { class: "card" },
      h("p", null, spec.description || h("span", { class: "muted" }, "No description.")),
      h("div", { class: "summary" }, field("effect", spec.effect), field("risk", spec.risk),
        spec.idempotency ? field("idempotency", spec.idempotency) : null,
        spec.lifecycle ? field("lifecycle", spec.lifecycle) : null,
        spec.requires_approval !== undefined ? field("approval", spec.requires_approval ? "always" : "by rule") : null,
        spec.owner ? field("owner", spec.owner) : null,
        field("schema", h("span", { class: "mono" }, short(spec.schema_hash || "—", 18)))),
      (spec.reads || []).length ? h("p", null, "Reads: ", h("span", { class: "mono" }, spec.reads.join(", "))) : null,
      (spec.writes || []).length ? h("p", null, "Writes: ", h("span", { class: "mono" }, spec.writes.join(", "))) : null,
      h("h3", null, "Input schema"), h("pre", null, pretty(spec.input_schema || {}))) : null,
    h("section", { class: "card" }, h("h2", null, "Health"),
      t === null ? h("p", { class: "empty" }, "No calls of this tool in the trace yet.") : h("div", null,
        h("div", { class: "summary" },
          field("calls", t.calls), field("selected", pct(t.selection_rate)), field("rejects", t.rejects),
          field("failures", t.failures), field("undecided", t.undecided || 0),
          field("unknown commits", t.unknown_commits),
          field("ok results", t.ok_results), field("result used", pct(t.utilization)),
          field("downstream ok", pct(t.downstream_success))),
        h("div", { class: "grid-2" },
          countsTable("Rejects by category", t.rejects_by_category, "rejects_by_category"),
          countsTable("Rejects by field", t.rejects_by_field, "rejects_by_field"),
          countsTable("Failures by category", t.failures_by_category, "failures_by_category"),
          countsTable("Undecided by category", t.undecided_by_category, "undecided_by_category")))),
    alerts.length ? h("section", { class: "card alert" }, h("h2", null, "Alerts"),
      h("ul", null, alerts.map(function (a) { return h("li", null, a.message); }))) : null);
}
