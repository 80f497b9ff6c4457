/* actionspace console: a plan drawn as an inline SVG DAG, laid out by depth, nodes coloured by status.
 */

import { h, s, cls, badge, short } from "./core.js";

// ------------------------------------------------------------------ plan DAG
const NODE_W = 168;
const NODE_H = 48;
const GAP_X = 64;
const GAP_Y = 22;
const PAD = 16;

/** Depth of each node: the longest path from a root (edges [a, b] mean a runs before b). */
function depths(nodes, edges) {
  const ids = nodes.map(function (n) { return n.id; });
  const parents = new Map(ids.map(function (id) { return [id, []]; }));
  for (const [a, b] of edges) if (parents.has(a) && parents.has(b)) parents.get(b).push(a);
  const depth = new Map();
  const visiting = new Set();
  function walk(id) {
    if (depth.has(id)) return depth.get(id);
    if (visiting.has(id)) return 0; // a cycle would be rejected upstream; draw it flat
    visiting.add(id);
    let d = 0;
    for (const p of parents.get(id)) d = Math.max(d, walk(p) + 1);
    visiting.delete(id);
    depth.set(id, d);
    return d;
  }
  ids.forEach(walk);
  return depth;
}

export function planView(plan) {
  const nodes = plan.nodes || [];
  const edges = plan.edges || [];
  if (!nodes.length) return h("p", { class: "empty" }, "The plan has no nodes.");
  const depth = depths(nodes, edges);
  const columns = [];
  for (const node of nodes) {
    const d = depth.get(node.id) || 0;
    (columns[d] = columns[d] || []).push(node);
  }
  const rows = Math.max.apply(null, columns.map(function (c) { return c ? c.length : 0; }));
  const width = PAD * 2 + columns.length * NODE_W + (columns.length - 1) * GAP_X;
  const height = PAD * 2 + rows * NODE_H + (rows - 1) * GAP_Y;
  const pos = new Map();
  columns.forEach(function (column, d) {
    const offset = ((rows - column.length) * (NODE_H + GAP_Y)) / 2;
    column.forEach(function (node, i) {
      pos.set(node.id, { x: PAD + d * (NODE_W + GAP_X), y: PAD + offset + i * (NODE_H + GAP_Y) });
    });
  });
  const svg = s("svg", { class: "dag", width: width, height: height, viewBox: "0 0 " + width + " " + height,
    role: "img", "aria-label": "plan graph" });
  svg.append(s("defs", null, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))));
  for (const [a, b] of edges) {
    const p = pos.get(a);
    const q = pos.get(b);
    if (!p || !q) continue;
    const x1 = p.x + NODE_W, y1 = p.y + NODE_H / 2, x2 = q.x - 2, y2 = q.y + NODE_H / 2;
    const mid = (x1 + x2) / 2;
    svg.append(s("path", { class: "edge", d: "M" + x1 + "," + y1 + " C" + mid + "," + y1 + " " + mid + "," + y2 +
      " " + x2 + "," + y2, "marker-end": "url(#arrow)", "data-edge": a + "->" + b }));
  }
  const statuses = new Set();
  for (const node of nodes) {
    const p = pos.get(node.id);
    const status = node.status || "pending";
    statuses.add(status);
    svg.append(s("g", { class: "node n-" + cls(status), transform: "translate(" + p.x + "," + p.y + ")",
      "data-node": node.id, "data-status": status },
      s("title", null, node.id + " · " + node.tool + " · " + status + (node.category ? " (" + node.category + ")" : "")),
      s("rect", { width: NODE_W, height: NODE_H, rx: 8, ry: 8 }),
      s("text", { class: "id", x: 10, y: 19 }, short(node.id, 20)),
      s("text", { x: 10, y: 36 }, short(node.tool, 17)),
      s("text", { class: "st", x: NODE_W - 8, y: 19, "text-anchor": "end" }, status)));
  }
  return h("div", null, h("div", { class: "dag-wrap" }, svg),
    h("div", { class: "legend" }, Array.from(statuses).sort().map(function (st) { return badge(st); })));
}
