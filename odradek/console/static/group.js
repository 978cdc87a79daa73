// Consumer group page: state, lag per partition, members, and "reset offsets" with a
// preview (nothing committed) and a confirmation (commits what the preview showed).
"use strict";
const { el, link, table, api, fill, start, param, showError } = odradek;
const groupId = param("id") || "";

async function load() {
  const g = await api("group", { id: groupId });
  document.getElementById("title").textContent = "Consumer group " + g.group_id;
  document.getElementById("state").textContent =
    "State " + g.state + (g.assignor ? ", assignor " + g.assignor : "") + ", " + g.members.length + " member(s).";
  fill("partitions", g.partitions.length
    ? table(["Topic", "Partition", "Committed offset", "Log end offset", "Lag", "Member"],
      g.partitions.map((p) => [
        link("/topic", { name: p.topic }, p.topic), p.partition, p.committed_offset,
        p.log_end_offset, p.lag, p.member_id,
      ]), { id: "lag-table" })
    : el("p", { className: "note", text: "No committed offsets." }));
  fill("members", g.members.length
    ? table(["Member", "Client id", "Host", "Assignment"], g.members.map((m) => [
      m.member_id, m.client_id, m.client_host, m.assignment.join(", "),
    ]), { id: "members-table" })
    : el("p", { className: "note", text: "No members." }));
  const topicInput = document.getElementById("reset-topic");
  if (!topicInput.value && g.partitions.length) topicInput.value = g.partitions[0].topic;
}

let pending = null;

document.getElementById("reset-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  document.getElementById("reset-result").hidden = true;
  pending = {
    group_id: groupId,
    topic: document.getElementById("reset-topic").value,
    target: document.getElementById("reset-target").value,
    value: document.getElementById("reset-value").value,
  };
  try {
    const preview = await api("group/reset", null, { ...pending, execute: false });
    document.getElementById("reset-summary").textContent =
      "Reset group \u201c" + groupId + "\u201d on topic \u201c" + pending.topic + "\u201d to " +
      pending.target + (pending.value ? " " + pending.value : "") + "? New committed offsets:";
    fill("reset-preview", table(["Topic", "Partition", "New offset"],
      preview.offsets.map((o) => [o.topic, o.partition, o.offset]), { id: "reset-preview-table" }));
    document.getElementById("reset-confirm").hidden = false;
    showError(null);
  } catch (error) {
    document.getElementById("reset-confirm").hidden = true;
    showError(error);
  }
});

document.getElementById("reset-yes").addEventListener("click", async () => {
  try {
    const done = await api("group/reset", null, { ...pending, execute: true });
    document.getElementById("reset-confirm").hidden = true;
    const result = document.getElementById("reset-result");
    result.textContent = "Committed " + done.offsets.length + " offset(s) for group \u201c" + done.group_id + "\u201d.";
    result.hidden = false;
    await load();
  } catch (error) {
    showError(error);
  }
});

document.getElementById("reset-no").addEventListener("click", () => {
  document.getElementById("reset-confirm").hidden = true;
  pending = null;
});

start(load, 2000);
