// The console's feed client (hub/console/static/feed.js) against a scripted fetch: NDJSON
// split anywhere across chunks, the revision it resumes from, BOOKMARKs, 410 (as an HTTP
// answer and as an ERROR event) → relist, 401 → signed out. Run by tests/browser/test_console_js.py.

import assert from "node:assert/strict";
import { test } from "node:test";

globalThis.sessionStorage = {
  items: new Map([["mcsync.console.token", "reader-token"]]),
  getItem(key) { return this.items.get(key) ?? null; },
  setItem(key, value) { this.items.set(key, value); },
  removeItem(key) { this.items.delete(key); },
};

const { Feed } = await import("../../../hub/console/static/feed.js");

function stream(...chunks) {
  const encoder = new TextEncoder();
  const queue = chunks.map((chunk) => encoder.encode(chunk));
  return {
    ok: true, status: 200, statusText: "OK",
    body: { getReader: () => ({ read: async () => (queue.length
      ? { value: queue.shift(), done: false } : { value: undefined, done: true }) }) },
  };
}

function answer(status, message) {
  return { ok: false, status, statusText: "", json: async () => ({ kind: "Status", code: status, message }) };
}

// fetch answers `script` in order, then waits until the feed stops; records every call.
function scripted(script) {
  const calls = [];
  globalThis.fetch = (url, options) => {
    calls.push({ url, auth: options.headers.Authorization });
    const next = script.shift();
    if (next) return Promise.resolve(next);
    return new Promise((_, reject) => options.signal.addEventListener("abort",
      () => reject(new DOMException("aborted", "AbortError"))));
  };
  return calls;
}

function event(type, revision, name = "web") {
  return JSON.stringify({ type, object: { metadata: { name, namespace: "demo", resourceVersion: String(revision) } } }) + "\n";
}

async function until(condition) {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(condition(), "timed out");
}

function feedWith(overrides = {}) {
  const seen = { events: [], bookmarks: 0, states: [], relists: 0, unauthorized: 0 };
  const feed = new Feed({
    path: "/serviceexports",
    onEvent: (e) => seen.events.push(`${e.type}@${e.object.metadata.resourceVersion}`),
    onBookmark: () => { seen.bookmarks += 1; },
    onRelist: async () => { seen.relists += 1; return "100"; },
    onState: (s) => seen.states.push(s),
    onUnauthorized: () => { seen.unauthorized += 1; },
    ...overrides,
  });
  return { feed, seen };
}

test("lines split across chunks arrive whole, in order; a stream's end resumes from the last revision", async () => {
  const lines = event("ADDED", 5) + event("MODIFIED", 6) + event("BOOKMARK", 9);
  const calls = scripted([stream(lines.slice(0, 17), lines.slice(17, 80), lines.slice(80))]);
  const { feed, seen } = feedWith();
  feed.start("4");
  await until(() => calls.length === 2);
  feed.stop();
  assert.deepEqual(seen.events, ["ADDED@5", "MODIFIED@6"]);
  assert.equal(seen.bookmarks, 1);
  assert.match(calls[0].url, /^\/api\/v1\/serviceexports\?watch=true&resourceVersion=4&/);
  assert.match(calls[1].url, /resourceVersion=9&/, "resumes from the BOOKMARK's revision");
  assert.equal(calls[0].auth, "Bearer reader-token");
  assert.deepEqual(seen.states, ["live"]);
});

for (const [why, first] of [
  ["an HTTP 410", () => answer(410, "too old")],
  ["a 410 ERROR event", () => stream(event("ADDED", 5) +
    JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, message: "gone" } }) + "\n")],
]) {
  test(`${why} relists and watches from the relist's revision`, async () => {
    const calls = scripted([first()]);
    const { feed, seen } = feedWith();
    feed.start("4");
    await until(() => calls.length === 2);
    feed.stop();
    assert.equal(seen.relists, 1);
    assert.match(calls[1].url, /resourceVersion=100&/);
  });
}

test("a token the hub no longer accepts signs out and stops watching", async () => {
  const calls = scripted([answer(401, "unknown token")]);
  const { feed, seen } = feedWith();
  feed.start("4");
  await until(() => seen.unauthorized === 1);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(calls.length, 1);
  feed.stop();
});

test("a failed connection backs off, says so and retries from the same revision", async () => {
  const calls = scripted([answer(503, "database unavailable")]);
  const { feed, seen } = feedWith();
  feed.start("7");
  await until(() => calls.length === 2);
  feed.stop();
  assert.ok(seen.states.includes("reconnecting"));
  assert.match(calls[1].url, /resourceVersion=7&/);
});
