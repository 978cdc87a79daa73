// Partition page: offsets, size and log dir, and its segment files.
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
  fill("segments", table(
    ["File", "Offsets", "Size", "Largest timestamp", ""],
    p.segments.map((s) => [
      s.file,
      s.base_offset + " - " + (s.next_offset - 1),
      bytes(s.size_bytes),
      s.largest_timestamp_ms < 0 ? "-" : new Date(s.largest_timestamp_ms).toISOString(),
      s.active ? "active" : "",
    ]),
    { id: "segments-table" },
  ));
}

start(load, 5000);
