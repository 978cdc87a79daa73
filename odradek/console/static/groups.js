// Consumer groups page: every group with its state, member count and total lag.
"use strict";
const { el, link, table, api, fill, start } = odradek;

async function load() {
  const data = await api("groups");
  fill("groups", data.groups.length
    ? table(["Group", "State", "Members", "Lag"], data.groups.map((g) => [
      link("/group", { id: g.group_id }, g.group_id), g.state, g.members, g.lag,
    ]), { id: "groups-table" })
    : el("p", { className: "note", text: "No consumer groups yet." }));
}

start(load, 2000);
