// Partition page: offsets, size and log dir, and what a client can see of the segments.
"use strict";
const { el, link, table, api, fill, start, bytes, param } = odradek;
const topic = param("topic") || "";
const partition = param("partition") || "";

async function load() {
  const p = await api("partition", { topic: topic, partition: partition });
  document.getElementById("title").textContent = "Partition " + p.topic + "-" + p.partition;
  fill("summary", table(["", ""], [
    ["Topic", link("/topic", { name: p.topic }, p.topic)],
    ["Partition", p.partition],
    ["Log start offset", p.log_start_offset],
    ["Log end offset", p.log_end_offset],
    ["Records", p.records],
    ["Size on disk (.log files)", bytes(p.size_bytes) + " (" + p.size_bytes + " bytes)"],
    ["Log dir", p.log_dir],
    ["segment.bytes", p.segment_bytes],
  ], { id: "partition-table" }));
  fill("browse", link("/messages", { topic: p.topic, partition: p.partition }, "Browse messages →"));
  fill("segments", el("p", { className: "note", id: "segments-note", text: p.segments_note }));
}

start(load, 5000);
