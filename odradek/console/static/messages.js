// Message browser: records of one partition from an offset or a timestamp, with key, value
// and headers shown as text, pretty-printed JSON or hex. The server cuts each field (and
// says how much it left out); the page shows it in a <pre> as text, never as markup.
"use strict";
const { el, link, table, api, fill, param, showError } = odradek;
const topic = param("topic") || "";
const partition = param("partition") || "0";
const DEFAULT_LIMIT = "20";

function field(rendered) {
  if (rendered === null) return el("span", { className: "null", text: "null" });
  const box = el("div", {}, el("pre", { className: "field", text: rendered.shown }));
  if (rendered.not_json) box.append(el("span", { className: "truncated", text: "not JSON: shown as text" }));
  if (rendered.truncated) {
    box.append(el("span", {
      className: "truncated",
      text: "truncated: " + rendered.size_bytes.toLocaleString("en") + " bytes in all",
    }));
  }
  return box;
}

function headers(list) {
  if (!list.length) return "";
  return el("div", {}, ...list.map((h) =>
    el("div", {}, el("span", { className: "header-name", text: h.name + ": " }), field(h.value))));
}

function isoTime(ms) {
  return ms < 0 ? "-" : new Date(ms).toISOString();
}

function current() {
  const params = { topic: topic, partition: partition, limit: DEFAULT_LIMIT };
  for (const name of ["offset", "timestamp_ms", "format", "limit"]) {
    const value = param(name);
    if (value !== null && value !== "") params[name] = value;
  }
  return params;
}

async function load() {
  const params = current();
  const data = await api("messages", params);
  document.getElementById("title").textContent = "Messages of " + data.topic + "-" + data.partition;
  document.getElementById("range").textContent =
    "Log start offset " + data.log_start_offset + ", log end offset " + data.log_end_offset +
    "; showing " + data.records.length + " record(s) from offset " + data.first_offset +
    " as " + data.format + ".";
  fill("messages", table(
    ["Offset", "Timestamp (UTC)", "Key", "Value", "Headers"],
    data.records.map((r) => [String(r.offset), isoTime(r.timestamp_ms), field(r.key), field(r.value), headers(r.headers)]),
    { id: "messages-table" }));
  const next = document.getElementById("next");
  const more = data.next_offset < data.log_end_offset;
  next.hidden = !more;
  if (more) {
    const query = { ...params, offset: data.next_offset };
    delete query.timestamp_ms;
    next.href = "/messages?" + new URLSearchParams(query).toString();
  }
  const offsetInput = document.getElementById("browse-offset");
  if (!offsetInput.value && !params.timestamp_ms) offsetInput.value = data.first_offset;
}

/** The form starts as the URL says (before the data arrives: a quick user is not overruled). */
function showParams() {
  const params = current();
  if (param("format")) document.getElementById("browse-format").value = params.format;
  document.getElementById("browse-limit").value = params.limit;
  if (params.timestamp_ms) {
    document.getElementById("browse-by").value = "timestamp";
    document.getElementById("browse-time").value = new Date(Number(params.timestamp_ms)).toISOString().slice(0, 23);
  } else if (params.offset) {
    document.getElementById("browse-offset").value = params.offset;
  }
  switchInputs();
}

function switchInputs() {
  const byTime = document.getElementById("browse-by").value === "timestamp";
  document.getElementById("browse-time").hidden = !byTime;
  document.getElementById("browse-offset").hidden = byTime;
}

document.getElementById("browse-by").addEventListener("change", switchInputs);

document.getElementById("browse-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const query = {
    topic: topic,
    partition: partition,
    format: document.getElementById("browse-format").value,
    limit: document.getElementById("browse-limit").value,
  };
  if (document.getElementById("browse-by").value === "timestamp") {
    const text = document.getElementById("browse-time").value;
    const ms = Date.parse(text + (text.length <= 16 ? ":00Z" : "Z"));
    if (Number.isNaN(ms)) { showError("not a date and time: " + text); return; }
    query.timestamp_ms = ms;
  } else {
    query.offset = document.getElementById("browse-offset").value;
  }
  window.location.search = new URLSearchParams(query).toString();
});

showParams();
load().then(() => showError(null), showError);
