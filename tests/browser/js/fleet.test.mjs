// The console's rows and search (hub/console/static/fleet.js) and its reading of scope
// lists (views.js, as shared/scope.py reads them). Run by tests/browser/test_console_js.py.

import assert from "node:assert/strict";
import { test } from "node:test";

const { Fleet, rowOf } = await import("../../../hub/console/static/fleet.js");
const { scopeAllows } = await import("../../../hub/console/static/views.js");

function serviceImport(namespace, name, clusters, conflicts = []) {
  return {
    metadata: { namespace, name },
    spec: { type: "ClusterSetIP" },
    status: { clusters: clusters.map((cluster) => ({ cluster })), conflicts,
      ports: [{ port: 80, protocol: "TCP", name: "http" }] },
  };
}

test("a row keeps what the table shows and searches", () => {
  const row = rowOf(serviceImport("Demo", "web", ["east", "west"], ["TypeConflict"]));
  assert.equal(row.key, "Demo/web");
  assert.deepEqual(row.clusters, ["east", "west"]);
  assert.deepEqual(row.ports, ["80/TCP (http)"]);
  assert.equal(row.hay, "demo/web east west");
});

const fleet = new Fleet();
for (const [ns, name, clusters, conflicts] of [
  ["shop", "cart", ["west"], []],
  ["demo", "web", ["east", "west"], []],
  ["demo", "api", ["east", "west"], ["TypeConflict"]],
  ["team-1", "db", ["north"], []],
]) {
  fleet.apply(`${ns}/${name}`, serviceImport(ns, name, clusters, conflicts));
}

for (const [query, keys] of [
  ["", ["demo/api", "demo/web", "shop/cart", "team-1/db"]],
  ["cart", ["shop/cart"]],
  ["WEST demo", ["demo/api", "demo/web"]],
  ["  north  ", ["team-1/db"]],
  ["demo/w", ["demo/web"]],
  ["nothing", []],
]) {
  test(`search ${JSON.stringify(query)}: conflicting first, every word must match`, () => {
    assert.deepEqual(fleet.search(query).map((row) => row.key), keys);
  });
}

test("a withdrawn key leaves the rows", () => {
  fleet.apply("team-1/db", null);
  assert.deepEqual(fleet.search("north"), []);
  assert.equal(fleet.conflicting(), 1);
});

for (const [patterns, namespace, allowed] of [
  [undefined, "demo", true],
  [[], "demo", false],
  [["demo"], "demo", true],
  [["team-*"], "team-a", true],
  [["team-*"], "xteam-a", false],
  [["*-prod"], "shop-prod", true],
  [["*"], "anything", true],
  [["a*b*c"], "a-x-b-y-c", true],
  [["shop"], "shopping", false],
]) {
  test(`scope ${JSON.stringify(patterns)} ${allowed ? "allows" : "leaves out"} ${namespace}`, () => {
    assert.equal(scopeAllows(patterns, namespace), allowed);
  });
}
