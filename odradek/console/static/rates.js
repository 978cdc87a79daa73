// Rates page: total produce and consume rates (records/s) as an SVG line chart, redrawn
// every sample, and the latest rate of each topic and group as a table.
"use strict";
const { el, table, api, fill, start } = odradek;
const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 800, HEIGHT = 260, LEFT = 60, RIGHT = 10, TOP = 10, BOTTOM = 30;

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function total(rates) {
  return Object.values(rates).reduce((a, b) => a + b, 0);
}

function chart(points) {
  const produced = points.map((p) => total(p.produce));
  const consumed = points.map((p) => total(p.consume));
  const top = Math.max(1, ...produced, ...consumed);
  const first = points.length ? points[0].time_ms : 0;
  const span = Math.max(1, points.length ? points[points.length - 1].time_ms - first : 1);
  const x = (t) => LEFT + ((t - first) / span) * (WIDTH - LEFT - RIGHT);
  const y = (v) => TOP + (1 - v / top) * (HEIGHT - TOP - BOTTOM);
  const root = svg("svg", { class: "chart", id: "rates-chart", width: WIDTH, height: HEIGHT, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img" });
  root.append(svg("title", {}, "records per second, produced and consumed"));
  root.append(svg("line", { class: "axis", x1: LEFT, y1: y(0), x2: WIDTH - RIGHT, y2: y(0) }));
  root.append(svg("line", { class: "axis", x1: LEFT, y1: TOP, x2: LEFT, y2: y(0) }));
  root.append(svg("text", { class: "label", id: "chart-max", x: 4, y: TOP + 10 }, top.toFixed(0) + "/s"));
  root.append(svg("text", { class: "label", x: 4, y: y(0) }, "0/s"));
  if (points.length) {
    const when = (ms) => new Date(ms).toISOString().slice(11, 19);
    root.append(svg("text", { class: "label", x: LEFT, y: HEIGHT - 8 }, when(first)));
    root.append(svg("text", { class: "label", x: WIDTH - RIGHT, y: HEIGHT - 8, "text-anchor": "end" }, when(first + span) + " UTC"));
  }
  const line = (values, cls) => svg("polyline", {
    class: cls,
    points: values.map((v, i) => x(points[i].time_ms).toFixed(1) + "," + y(v).toFixed(1)).join(" "),
  });
  root.append(line(produced, "produce"), line(consumed, "consume"));
  return root;
}

async function load() {
  const data = await api("rates");
  fill("chart", chart(data.points));
  if (data.error) throw new Error("the last sample failed: " + data.error);
  if (!data.points.length) return;
  const last = data.points[data.points.length - 1];
  const rows = [
    ...Object.entries(last.produce).map(([name, rate]) => ["topic", name, "produced", rate]),
    ...Object.entries(last.consume).map(([name, rate]) => ["group", name, "consumed", rate]),
  ];
  fill("latest", table(["Kind", "Name", "", "Records/s"], rows, { id: "latest-table" }));
}

start(load, 2000);
