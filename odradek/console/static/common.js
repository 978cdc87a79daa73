// odradek console: what every page shares. Every value from the broker goes into the DOM as
// text (textContent, never innerHTML): a topic name, key or value cannot become markup.
"use strict";

const odradek = (() => {
  /** An element with attributes (set as properties or attributes) and text or node children. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "className") node.className = value;
      else node.setAttribute(name, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** A link to a console page with query parameters (encoded). */
  function link(page, params, text) {
    const query = new URLSearchParams(params).toString();
    return el("a", { href: page + (query ? "?" + query : ""), text: text });
  }

  /** A table: headers, then rows of cells (strings, numbers or nodes). */
  function table(headers, rows, attrs) {
    const head = el("tr", {}, ...headers.map((h) => el("th", { text: h })));
    const body = rows.map((row) =>
      el("tr", {}, ...row.map((cell) => (cell instanceof Node ? el("td", {}, cell) : el("td", { text: cell ?? "-" }))))
    );
    return el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, ...body));
  }

  /** GET or POST an /api endpoint; the JSON body, or an Error carrying the server's message. */
  async function api(path, params, body) {
    const query = params ? "?" + new URLSearchParams(params).toString() : "";
    const init = body === undefined ? {} : {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    };
    const response = await fetch("/api/" + path + query, init);
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  /** Show an error (as text) in the page's #error box; hide it with null. */
  function showError(error) {
    const box = document.getElementById("error");
    box.textContent = error ? String(error.message || error) : "";
    box.hidden = !error;
  }

  /** Replace the children of #id with nodes. */
  function fill(id, ...nodes) {
    document.getElementById(id).replaceChildren(...nodes);
  }

  function param(name) {
    return new URLSearchParams(window.location.search).get(name);
  }

  function bytes(n) {
    if (n === null || n === undefined) return "-";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    let value = n;
    while (value >= 1024 && i < units.length - 1) { value /= 1024; i++; }
    return (i === 0 ? String(value) : value.toFixed(1)) + " " + units[i];
  }

  /** Run load() now and, if everyMs, again every everyMs (errors go to #error). */
  function start(load, everyMs) {
    const run = () => load().then(() => showError(null), showError);
    run();
    if (everyMs) window.setInterval(run, everyMs);
  }

  return { el, link, table, api, showError, fill, param, bytes, start };
})();
