/* actionspace console: a plan drawn as an inline SVG DAG, nodes coloured by status.
 *
 * The layout is dagre's (vendored in static/vendor/, loaded by index.html as the global `dagre`):
 * ranks left to right, crossings reduced, edges routed around the nodes.
 */

import { h, s, cls, badge, short } from "./core.js";

// ------------------------------------------------------------------ plan DAG
const NODE_W = 168;
const NODE_H = 48;
const GAP_X = 64;
const GAP_Y = 22;
const PAD = 16;

/** Node positions (top-left corners), edge routes and the drawing's size, laid out by dagre. */
function layout(nodes, edges) {
  const dagre = window.dagre;
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: GAP_Y, ranksep: GAP_X, marginx: PAD, marginy: PAD });
  g.setDefaultEdgeLabel(function () { return {}; });
  for (const node of nodes) g.setNode(node.id, { width: NODE_W, height: NODE_H });
  for (const [a, b] of edges) if (g.hasNode(a) && g.hasNode(b)) g.setEdge(a, b);
  dagre.layout(g);
  const pos = new Map(nodes.map(function (node) {
    const c = g.node(node.id);
    return [node.id, { x: c.x - NODE_W / 2, y: c.y - NODE_H / 2 }];
  }));
  const routes = new Map(g.edges().map(function (e) { return [e.v + "->" + e.w, g.edge(e).points]; }));
  return { pos: pos, routes: routes, width: Math.ceil(g.graph().width), height: Math.ceil(g.graph().height) };
}

export function planView(plan) {
  const nodes = plan.nodes || [];
  const edges = plan.edges || [];
  if (!nodes.length) return h("p", { class: "empty" }, "The plan has no nodes.");
  if (!window.dagre) return h("p", { class: "notice bad" }, "The graph layout script did not load.");
  const { pos, routes, width, height } = layout(nodes, edges);
  const svg = s("svg", { class: "dag", width: width, height: height, viewBox: "0 0 " + width + " " + height,
    role: "img", "aria-label": "plan graph" });
  svg.append(s("defs", null, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))));
  for (const [a, b] of edges) {
    const points = routes.get(a + "->" + b);
    if (!points || !points.length) continue;
    const d = points.map(function (pt, i) { return (i ? "L" : "M") + pt.x.toFixed(1) + "," + pt.y.toFixed(1); }).join(" ");
    svg.append(s("path", { class: "edge", d: d, "marker-end": "url(#arrow)", "data-edge": a + "->" + b }));
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
