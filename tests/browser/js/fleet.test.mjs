// The console's rows and paged reads (hub/console/static/fleet.js) and its words for
// conflict reasons, read from the hub (views.js). Run by tests/browser/test_console_js.py.

import assert from "node:assert/strict";
import { test } from "node:test";

const { listPath, mayMatch, readPage, rowOf } = await import("../../../hub/console/static/fleet.js");
const { loadWords, propertiesText, reasonWords } = await import("../../../hub/console/static/views.js");

function serviceImport(namespace, name, clusters, conflicts = []) {
  return {
    metadata: { namespace, name },
    spec: { type: "ClusterSetIP" },
    status: { clusters: clusters.map((cluster) => ({ cluster })), conflicts,
      ports: [{ port: 80, protocol: "TCP", name: "http" }] },
  };
}

test("a row keeps what the table shows", () => {
  const row = rowOf(serviceImport("Demo", "web", ["east", "west"], ["TypeConflict"]));
  assert.equal(row.key, "Demo/web");
  assert.deepEqual(row.clusters, ["east", "west"]);
  assert.deepEqual(row.ports, ["80/TCP (http)"]);
  assert.deepEqual(row.conflicts, ["TypeConflict"]);
});

for (const [query, cursor, path] of [
  ["", { conflict: true, cont: null }, "/serviceimports?conflict=true&limit=50"],
  ["  WEST   demo ", { conflict: false, cont: null },
    "/serviceimports?conflict=false&limit=50&q=west%20demo"],
  ["cart", { conflict: false, cont: "a/b+c" },
    "/serviceimports?conflict=false&limit=50&q=cart&continue=a%2Fb%2Bc"],
]) {
  test(`the hub is asked ${path}`, () => {
    assert.equal(listPath(query, cursor, 50), path);
  });
}

for (const [query, key, cluster, may] of [
  ["", "demo/web", "east", true],
  ["cart", "shop/cart", "west", true],
  ["WEST demo", "demo/api", "west", true],
  ["west demo", "demo/api", "east", false],
  ["demo/w", "demo/web", undefined, true],
]) {
  test(`a change of ${key} from ${cluster} ${may ? "may" : "cannot"} match ${JSON.stringify(query)}`, () => {
    assert.equal(mayMatch(query, key, cluster), may);
  });
}

// A hub of `conflicting` and `clean` keys answering the list with keyset paging; the
// continue token is the last key. Records every path asked.
function fakeHub(conflicting, clean) {
  const asked = [];
  globalThis.sessionStorage = { getItem: () => "token" };
  globalThis.fetch = async (url) => {
    asked.push(url);
    const params = new URL(url, "http://hub").searchParams;
    const keys = params.get("conflict") === "true" ? conflicting : clean;
    const after = params.get("continue");
    const rest = after ? keys.filter((k) => k > after) : keys;
    const limit = Number(params.get("limit"));
    const items = rest.slice(0, limit).map((k) => serviceImport(...k.split("/"), ["east"]));
    const more = rest.length > limit;
    return { ok: true, json: async () => ({ metadata: { resourceVersion: "7",
      continue: more ? rest[limit - 1] : undefined }, items }) };
  };
  return asked;
}

const keys = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}/s${String(i).padStart(2, "0")}`);

test("a page takes the conflicting keys first, then the clean ones, and says where the next starts", async () => {
  fakeHub(keys("c", 3), keys("d", 10));
  const first = await readPage("", { conflict: true, cont: null }, { pageSize: 4 });
  assert.deepEqual(first.rows.map((r) => r.key), ["c/s00", "c/s01", "c/s02", "d/s00"]);
  assert.equal(first.revision, "7");
  assert.deepEqual(first.next, { conflict: false, cont: "d/s00" });
  const second = await readPage("", first.next, { pageSize: 4 });
  assert.deepEqual(second.rows.map((r) => r.key), ["d/s01", "d/s02", "d/s03", "d/s04"]);
  const last = await readPage("", { conflict: false, cont: "d/s05" }, { pageSize: 4 });
  assert.deepEqual(last.rows.map((r) => r.key), ["d/s06", "d/s07", "d/s08", "d/s09"]);
  assert.equal(last.next, null);
});

test("conflicting keys that end with the page: the next starts at the clean ones, if any", async () => {
  fakeHub(keys("c", 4), []);
  const only = await readPage("", { conflict: true, cont: null }, { pageSize: 4 });
  assert.equal(only.next, null);
  const asked = fakeHub(keys("c", 4), keys("d", 1));
  const page = await readPage("x", { conflict: true, cont: null }, { pageSize: 4 });
  assert.deepEqual(page.next, { conflict: false, cont: null });
  assert.ok(asked.every((url) => url.includes("q=x")), asked);
});

test("a conflict reason reads in the words the hub answers, itself until then", async () => {
  assert.equal(reasonWords("TypeConflict"), "TypeConflict");
  const asked = [];
  await loadWords(async (url) => {
    asked.push(url);
    return { ok: true, json: async () => ({ reasons: { TypeConflict: "its type differs" } }) };
  });
  assert.deepEqual(asked, ["words.json"]);
  assert.equal(reasonWords("TypeConflict"), "its type differs");
  assert.equal(reasonWords("NewConflict"), "NewConflict");
  await loadWords(async () => { throw new Error("offline"); });
  assert.equal(reasonWords("TypeConflict"), "its type differs");
});

test("the cluster view shows its properties by name, less the identity ones", () => {
  assert.equal(propertiesText(undefined), "not reported");
  assert.equal(propertiesText({ "cluster.clusterset.k8s.io": "east" }), "—");
  assert.equal(propertiesText({
    "zone.topology.mcsync.io": "eu-1", "region.topology.mcsync.io": "eu",
    "cluster.clusterset.k8s.io": "east", "clusterset.k8s.io": "prod",
  }), "region.topology.mcsync.io=eu, zone.topology.mcsync.io=eu-1");
});
