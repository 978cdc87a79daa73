// Topic page: partitions (log start / end offsets, records, size, log dir) and configs.
"use strict";
const { el, link, table, api, fill, start, bytes, param } = odradek;
const name = param("name") || "";

async function load() {
  const data = await api("topic", { name: name });
  document.getElementById("title").textContent = "Topic " + data.name;
  document.title = "Topic " + data.name + " · odradek console";
  const rows = data.partitions.map((p) => [
    link("/partition", { topic: data.name, partition: p.partition }, String(p.partition)),
    p.log_start_offset,
    p.log_end_offset,
    p.records,
    bytes(p.size_bytes),
    p.log_dir,
    link("/messages", { topic: data.name, partition: p.partition }, "messages"),
  ]);
  fill("partitions", table(
    ["Partition", "Log start offset", "Log end offset", "Records", "Size", "Log dir", ""],
    rows, { id: "partitions-table" }));
  const configs = data.configs.map((c) => [
    c.name, c.value === null ? "(sensitive)" : c.value, c.is_default ? "default" : "topic override",
  ]);
  fill("configs", table(["Name", "Value", "Source"], configs, { id: "configs-table" }));
}

start(load, 5000);
