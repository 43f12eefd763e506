// What the console knows of the fleet: the clusters, and one compact row per service key.
//
// The rows come from the ServiceImport list, conflicting keys first (`conflict=true`, then
// `conflict=false`, a page at a time: the first page is on screen while the rest loads).
// A row keeps only what the services table shows and searches, a few hundred bytes per
// key; the table renders one page of rows at a time, so 10,000 services are 10,000 small
// objects and 50 table rows. Search is a substring match of every typed word against a
// precomputed lowercase "namespace/name clusters" string: about a millisecond for 10,000.
//
// Live: the feed reports which keys changed; each changed key's ServiceImport is read
// again (one small GET per key, coalesced over 100 ms, a few at a time), and a burst of
// more keys than that is cheaper as one relist. The clusters list (a few dozen objects) is
// read again after changes, and on the feed's BOOKMARK, since heartbeats and Stale
// transitions are in no reader's feed.

import { get, listAll, q } from "./api.js";

const FLUSH_MS = 100;
const RELIST_OVER = 200;
const PARALLEL = 6;

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
  const conflicts = status.conflicts || [];
  return {
    key: keyOf(meta.namespace, meta.name),
    namespace: meta.namespace,
    name: meta.name,
    type: (serviceImport.spec && serviceImport.spec.type) || "ClusterSetIP",
    clusters,
    ports: (status.ports || []).map(portText),
    conflicts,
    hay: `${meta.namespace}/${meta.name} ${clusters.join(" ")}`.toLowerCase(),
  };
}

function byConflictThenKey(a, b) {
  const ca = a.conflicts.length ? 0 : 1;
  const cb = b.conflicts.length ? 0 : 1;
  if (ca !== cb) return ca - cb;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

export class Fleet extends EventTarget {
  constructor() {
    super();
    this.clusters = [];
    this.rows = new Map();
    this.order = null; // rows sorted, conflicting first; null when a change invalidated it
    this.complete = false; // every page of the list has been read
    this.pending = new Set();
    this.gone = new Set();
    this.flushTimer = null;
    this.clusterTimer = null;
    this.generation = 0; // bumped by each relist, so an older load stops adding rows
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

  // Read every ServiceImport again; answers the revision of the first page (to watch from).
  async loadServices() {
    const generation = ++this.generation;
    const rows = new Map();
    let first = true;
    const take = (items) => {
      if (generation !== this.generation) return;
      for (const item of items) {
        const row = rowOf(item);
        rows.set(row.key, row);
      }
      if (first) {
        first = false;
        this.rows = rows;
        this.complete = false;
      }
      this.order = null;
      this.changed("services");
    };
    const revision = await listAll("/serviceimports?conflict=true", { onPage: take });
    await listAll("/serviceimports?conflict=false", { onPage: take });
    if (generation === this.generation) {
      this.rows = rows; // an empty fleet has no first page to swap in
      this.complete = true;
      this.order = null;
      this.changed("services");
    }
    return revision;
  }

  sorted() {
    if (this.order === null) this.order = [...this.rows.values()].sort(byConflictThenKey);
    return this.order;
  }

  // The rows matching `query` (every word a substring of namespace/name or a cluster).
  search(query) {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    const all = this.sorted();
    if (!words.length) return all;
    return all.filter((row) => words.every((word) => row.hay.includes(word)));
  }

  conflicting() {
    let count = 0;
    for (const row of this.rows.values()) if (row.conflicts.length) count++;
    return count;
  }

  // A feed event named `key`: read its ServiceImport again soon. After a withdrawal the
  // key may have no export left: `gone` keys are first asked for their exports, so that an
  // ordinary "nobody exports it now" is an empty list, not a 404 in the browser's console.
  noteChange(key, { gone = false } = {}) {
    if (gone) this.gone.add(key);
    this.pending.add(key);
    if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), FLUSH_MS);
  }

  async flush() {
    this.flushTimer = null;
    const keys = [...this.pending];
    const gone = this.gone;
    this.pending.clear();
    this.gone = new Set();
    this.scheduleClusters();
    if (keys.length > RELIST_OVER) {
      await this.loadServices();
      return;
    }
    const queue = keys.slice();
    const worker = async () => {
      while (queue.length) {
        const key = queue.shift();
        const [namespace, name] = key.split("/");
        try {
          if (gone.has(key)) {
            const left = await get(`/serviceexports?namespace=${q(namespace)}&name=${q(name)}&limit=1`);
            if (!left.items.length) {
              this.apply(key, null);
              continue;
            }
          }
          this.apply(key, await get(`/serviceimports/${q(namespace)}/${q(name)}`));
        } catch (error) {
          if (error.status === 404) this.apply(key, null);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker));
    this.changed("services");
  }

  apply(key, serviceImport) {
    if (serviceImport === null) this.rows.delete(key);
    else this.rows.set(key, rowOf(serviceImport));
    this.order = null;
  }
}
