// Topics page: every topic with partitions, records and size; "create a topic" with a
// confirmation step (the broker validates first: CreateTopics with validate_only).
"use strict";
const { el, link, table, api, fill, start, bytes } = odradek;

async function load() {
  const data = await api("topics");
  const rows = data.topics.map((t) => [
    link("/topic", { name: t.name }, t.name),
    t.partitions,
    t.records,
    bytes(t.size_bytes),
    t.internal ? "yes" : "",
  ]);
  fill("topics", data.topics.length
    ? table(["Topic", "Partitions", "Records", "Size", "Internal"], rows, { id: "topics-table" })
    : el("p", { className: "note", text: "No topics yet." }));
}

function parseConfigs(text) {
  const configs = {};
  for (const item of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const at = item.indexOf("=");
    if (at <= 0) throw new Error("configs are name=value, comma-separated: " + item);
    configs[item.slice(0, at).trim()] = item.slice(at + 1).trim();
  }
  return configs;
}

let pending = null;

function request(execute) {
  return { ...pending, execute: execute };
}

document.getElementById("create-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const result = document.getElementById("create-result");
  result.hidden = true;
  try {
    pending = {
      name: document.getElementById("create-name").value,
      partitions: Number(document.getElementById("create-partitions").value),
      configs: parseConfigs(document.getElementById("create-configs").value),
    };
    await api("topics", null, request(false));  // the broker validates, creates nothing
    const configs = Object.entries(pending.configs).map(([k, v]) => k + "=" + v).join(", ");
    document.getElementById("create-summary").textContent =
      "Create topic \u201c" + pending.name + "\u201d with " + pending.partitions +
      " partition(s)" + (configs ? " and configs " + configs : "") + "?";
    document.getElementById("create-confirm").hidden = false;
    odradek.showError(null);
  } catch (error) {
    document.getElementById("create-confirm").hidden = true;
    odradek.showError(error);
  }
});

document.getElementById("create-yes").addEventListener("click", async () => {
  try {
    const done = await api("topics", null, request(true));
    document.getElementById("create-confirm").hidden = true;
    const result = document.getElementById("create-result");
    result.textContent = "Created topic \u201c" + done.name + "\u201d.";
    result.hidden = false;
    await load();
  } catch (error) {
    odradek.showError(error);
  }
});

document.getElementById("create-no").addEventListener("click", () => {
  document.getElementById("create-confirm").hidden = true;
  pending = null;
});

start(load, 5000);
