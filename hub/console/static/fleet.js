// What the console knows of the fleet: the clusters (a few dozen objects), and the one page
// of services on screen. Nothing else: at 10,000 services the browser holds the 50 rows it
// shows, the clusters and the feed (docs/reference.md#console: "the browser never holds more than it shows").
//
// The page comes from the hub's ServiceImport list, conflicting keys first: `conflict=true`
// from the page's start, then, when those run out before the page is full, `conflict=false`
// from its start. A page's start is such a cursor ({conflict, continue token}); the next
// page starts where this one stopped, and the pages already passed are a stack of starts,
// so Previous goes back exactly. The search field's words go to the hub (`q`), which
// answers them in SQL a page at a time (hub/store/imports.py); a newer search cancels the
// read of an older one.
//
// Live: the feed names each changed key (and the cluster exporting it). A change that can
// touch the page on screen — a key shown, or a key the search words match — reads the page
// again from its start, coalesced over 100 ms: one or two bounded list reads, whatever the
// burst. Keys that are not shown are never kept. The clusters list is read again after
// changes, and on the feed's BOOKMARK, since heartbeats and Stale transitions are in no
// reader's feed.

import { get, q } from "./api.js";

export const PAGE_SIZE = 50;
const FLUSH_MS = 100;
const FIRST = Object.freeze({ conflict: true, cont: null });

export function keyOf(namespace, name) {
  return `${namespace}/${name}`;
}

function portText(port) {
  return `${port.port}/${port.protocol || "TCP"}` + (port.name ? ` (${port.name})` : "");
}

export function rowOf(serviceImport) {
  const meta = serviceImport.metadata;
  const status = serviceImport.status || {};
  const clusters = (status.clusters || []).map((c) => c.cluster);
  return {
    key: keyOf(meta.namespace, meta.name),
    namespace: meta.namespace,
    name: meta.name,
    type: (serviceImport.spec && serviceImport.spec.type) || "ClusterSetIP",
    clusters,
    ports: (status.ports || []).map(portText),
    conflicts: status.conflicts || [],
  };
}

// The search's words, as the hub splits them.
export function wordsOf(query) {
  return query.toLowerCase().split(/\s+/).filter(Boolean);
}

// Could a change of `key` exported by `cluster` land on the page of `query`? The same test
// the hub applies (every word in "namespace/name" or the cluster id), so that a change the
// search leaves out costs no read.
export function mayMatch(query, key, cluster) {
  const hay = `${key} ${cluster || ""}`.toLowerCase();
  return wordsOf(query).every((word) => hay.includes(word));
}

// The list path of one read: the search's `q` (trimmed words) and the cursor.
export function listPath(query, cursor, limit) {
  const words = wordsOf(query).join(" ");
  return `/serviceimports?conflict=${cursor.conflict}&limit=${limit}` +
    (words ? `&q=${q(words)}` : "") + (cursor.cont ? `&continue=${q(cursor.cont)}` : "");
}

// One page from `start`: { rows, next (cursor or null), revision }.
export async function readPage(query, start, { signal, pageSize = PAGE_SIZE } = {}) {
  const items = [];
  let cursor = start;
  let revision = null;
  while (cursor && items.length < pageSize) {
    const page = await get(listPath(query, cursor, pageSize - items.length), { signal });
    if (revision === null) revision = page.metadata.resourceVersion;
    items.push(...page.items);
    const cont = page.metadata.continue;
    if (cont) cursor = { conflict: cursor.conflict, cont };
    else cursor = cursor.conflict ? { conflict: false, cont: null } : null;
  }
  // The conflicting keys ended exactly with the page: is there any other key to go on to?
  if (cursor && !cursor.conflict && cursor.cont === null && items.length) {
    const probe = await get(listPath(query, cursor, 1), { signal });
    if (!probe.items.length) cursor = null;
  }
  return { rows: items.map(rowOf), next: cursor, revision };
}

function aborted(error) {
  return error && error.name === "AbortError";
}

export class Fleet extends EventTarget {
  constructor() {
    super();
    this.clusters = [];
    this.query = "";
    this.start = FIRST; // where the shown page starts
    this.back = []; // the starts of the pages before it
    this.next = null; // where the next page starts; null: this is the last
    this.rows = []; // the page on screen
    this.loaded = false;
    this.error = null;
    this.stale = false; // a change came while no list was shown
    this.controller = null;
    this.flushTimer = null;
    this.clusterTimer = null;
  }

  changed(what) {
    this.dispatchEvent(new CustomEvent("change", { detail: what }));
  }

  async loadClusters() {
    const list = await get("/clusters");
    this.clusters = list.items;
    this.changed("clusters");
  }

  scheduleClusters(delay = 300) {
    if (this.clusterTimer) return;
    this.clusterTimer = setTimeout(async () => {
      this.clusterTimer = null;
      try {
        await this.loadClusters();
      } catch {
        // the next change or bookmark tries again; the feed reports the hub's state
      }
    }, delay);
  }

  get page() {
    return this.back.length + 1;
  }

  // Read the page from `this.start` again, cancelling a read still under way; answers the
  // revision of its first read (to watch from), or null when a newer read replaced it.
  async load() {
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    this.stale = false;
    try {
      const page = await readPage(this.query, this.start, { signal: controller.signal });
      if (controller !== this.controller) return null;
      this.rows = page.rows;
      this.next = page.next;
      this.loaded = true;
      this.error = null;
      this.changed("services");
      return page.revision;
    } catch (error) {
      if (aborted(error) || controller !== this.controller) return null;
      this.error = error;
      this.changed("services");
      throw error;
    } finally {
      if (controller === this.controller) this.controller = null;
    }
  }

  // The first page of `query`'s matches.
  search(query) {
    this.query = query;
    this.start = FIRST;
    this.back = [];
    return this.load();
  }

  nextPage() {
    if (!this.next) return null;
    this.back.push(this.start);
    this.start = this.next;
    return this.load();
  }

  previousPage() {
    if (!this.back.length) return null;
    this.start = this.back.pop();
    return this.load();
  }

  // A feed event: `key` changed, exported (or withdrawn) by `cluster`. `showing`: whether a
  // list is on screen; if not, the page is read again when one is (`stale`).
  noteChange(key, cluster, { showing = true } = {}) {
    this.scheduleClusters();
    const shown = this.rows.some((row) => row.key === key);
    if (!shown && !mayMatch(this.query, key, cluster)) return;
    if (!showing) {
      this.stale = true;
      return;
    }
    if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), FLUSH_MS);
  }

  async flush() {
    this.flushTimer = null;
    try {
      await this.load();
    } catch {
      // shown in the list's status line; the next change or a relist reads it again
    }
  }
}
