// The console's views: the fleet (clusters), the services list, and one service's page.
// Each builds its DOM once and answers `refresh()` for the data it shows, so a live change
// rewrites a table body, never the search field the operator is typing in.

import { get, q } from "./api.js";
import { ageOf, badge, h, table } from "./dom.js";
import { PAGE_SIZE } from "./fleet.js";

// What each conflict reason means, in words for people: the hub answers them (`words.json`,
// read off the one table of properties in shared/properties.py), so they are never
// restated here. Until they arrive, or if they cannot be read, a reason stands for itself.
let REASONS = {};

export async function loadWords(read = fetch) {
  try {
    const response = await read("words.json", { headers: { Accept: "application/json" } });
    if (response.ok) REASONS = (await response.json()).reasons || {};
  } catch {
    // the reasons' own names stand in
  }
}

export function reasonWords(reason) {
  return REASONS[reason] || reason;
}

function stateBadge(state) {
  const kind = state === "Ready" ? "ok" : state === "Stale" ? "bad" : "warn";
  return badge(state || "Unknown", kind);
}

function condition(object, type) {
  return ((object.status && object.status.conditions) || []).find((c) => c.type === type);
}

function heldWithdrawal(cluster) {
  const held = condition(cluster, "WithdrawalHeld");
  if (!held || held.status !== "True") return "none";
  return h("span", {}, badge("held", "warn"), " ", held.message || held.reason);
}

function counter(label, value, kind) {
  return h("div", { class: `counter ${kind || ""}` },
    h("span", { class: "value" }, String(value)), h("span", { class: "label" }, label));
}

// --- the fleet ---------------------------------------------------------------------------

// Clusters that need attention first (Stale, Pending, a held withdrawal), then by name.
function attentionFirst(clusters) {
  const rank = (c) => (c.status.state === "Stale" ? 0
    : (condition(c, "WithdrawalHeld") || {}).status === "True" ? 1
      : c.status.state === "Pending" ? 2 : 3);
  return [...clusters].sort((a, b) => rank(a) - rank(b) ||
    (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
}

// `limit`: at most this many clusters (the overview), with a link to the whole fleet.
export function fleetSection(fleet, { headingLevel = "h2", limit = Infinity } = {}) {
  const body = h("div");
  const el = h("section", { "aria-labelledby": "fleet-heading" },
    h(headingLevel, { id: "fleet-heading", tabindex: "-1" }, "Fleet"), body);
  const refresh = () => {
    const clusters = fleet.clusters;
    const count = (state) => clusters.filter((c) => c.status.state === state).length;
    const held = clusters.filter((c) => (condition(c, "WithdrawalHeld") || {}).status === "True");
    const withdrawn = clusters.filter((c) => c.status.endpointsWithdrawn);
    const conflicts = clusters.reduce((sum, c) => sum + (c.status.conflictCount || 0), 0);
    body.replaceChildren(
      h("div", { class: "counters" },
        counter("clusters", clusters.length),
        counter("Ready", count("Ready"), "ok"),
        counter("Stale", count("Stale"), count("Stale") ? "bad" : ""),
        counter("Pending", count("Pending"), count("Pending") ? "warn" : ""),
        counter("held withdrawals", held.length, held.length ? "warn" : ""),
        counter("endpoints withdrawn", withdrawn.length, withdrawn.length ? "bad" : ""),
        counter("exports in conflict", conflicts, conflicts ? "bad" : "")),
      table({
        caption: "Member clusters, those needing attention first",
        className: "clusters",
        columns: ["Cluster", "State", "Last heartbeat", "Agent", "Exports", "Conflicts",
          "Endpoints", "Withdrawal", "Properties"],
        empty: "No cluster is registered yet (mcsync clusters register NAME).",
        rows: attentionFirst(clusters).slice(0, limit).map((c) => [
          c.metadata.name,
          stateBadge(c.status.state),
          ageOf(c.status.lastHeartbeatTime),
          c.status.agentVersion || "—",
          String(c.status.exportCount),
          String(c.status.conflictCount),
          c.status.endpointsWithdrawn ? badge("withdrawn", "bad") : "served",
          heldWithdrawal(c),
          propertiesText(c.status.properties),
        ]),
      }),
      // replaceChildren writes a null as the text "null": only nodes go in.
      ...(clusters.length > limit
        ? [h("p", {}, h("a", { href: "#/fleet" }, `All ${clusters.length} clusters`),
          ` (${limit} shown, those needing attention first)`)]
        : []));
  };
  refresh();
  return { el, refresh };
}

// The cluster's reported ClusterProperty objects (docs/reference.md#cluster-properties),
// "name=value" by name, less the two every cluster has (its id and clusterset's name:
// the Cluster column says the first). Text, never markup.
const IDENTITY_PROPERTIES = new Set(["cluster.clusterset.k8s.io", "clusterset.k8s.io"]);

export function propertiesText(properties) {
  if (!properties) return "not reported";
  const shown = Object.keys(properties).filter((k) => !IDENTITY_PROPERTIES.has(k)).sort();
  return shown.length ? shown.map((k) => `${k}=${properties[k]}`).join(", ") : "—";
}

// --- the services list -------------------------------------------------------------------

const SEARCH_DEBOUNCE_MS = 100;

// One page of services at a time (`fleet.rows`); the search and the pager ask the hub.
export function servicesSection(fleet, state, { onState, headingLevel = "h2" }) {
  const status = h("p", { class: "hint", id: "services-status", role: "status" });
  const input = h("input", {
    type: "search", id: "service-search", autocomplete: "off", spellcheck: "false",
    value: state.q || "", "aria-describedby": "services-status",
    placeholder: "namespace, name or cluster",
  });
  const tableHolder = h("div", { class: "table-holder" });
  const prev = h("button", { type: "button", "data-page": "prev" }, "Previous page");
  const next = h("button", { type: "button", "data-page": "next" }, "Next page");
  const pageText = h("span", { class: "page" });
  const el = h("section", { "aria-labelledby": "services-heading" },
    h(headingLevel, { id: "services-heading", tabindex: "-1" }, "Services"),
    h("form", { role: "search", class: "search", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "service-search" }, "Search services"), input),
    status, tableHolder,
    h("nav", { class: "pager", "aria-label": "Services pages" }, prev, pageText, next));

  const refresh = () => {
    // A live change rewrites the table: a keyboard user's focus on one of its links goes
    // to the same link in the new table (or to the search field if it left).
    const focused = tableHolder.contains(document.activeElement)
      ? document.activeElement.getAttribute("href") : null;
    const shown = fleet.rows;
    tableHolder.replaceChildren(table({
      caption: "Services, conflicting first",
      className: "services",
      columns: ["Service", "Type", "Exporting clusters", "Ports", "Conflicts"],
      empty: fleet.query ? `No service matches “${fleet.query}”.`
        : fleet.loaded ? "No service is exported yet." : "Loading…",
      rows: shown.map((row) => [
        h("a", { href: `#/services/${q(row.namespace)}/${q(row.name)}` }, row.key),
        row.type,
        row.clusters.join(", ") || "—",
        row.ports.join(", ") || "—",
        row.conflicts.length
          ? h("span", {}, badge("conflict", "bad"), " ", row.conflicts.map(reasonWords).join("; "))
          : "none",
      ]),
    }));
    const first = (fleet.page - 1) * PAGE_SIZE;
    status.textContent = fleet.error ? `Could not read the services: ${fleet.error.message}`
      : !fleet.loaded ? "Loading services…"
        : shown.length ? `Services ${first + 1}–${first + shown.length}` +
          (fleet.query ? ` matching “${fleet.query}”` : "") +
          (fleet.next ? ", more on the next page" : "")
          : "No service on this page";
    pageText.textContent = `Page ${fleet.page}`;
    prev.disabled = fleet.page <= 1;
    next.disabled = !fleet.next;
    if (focused !== null) {
      const again = [...tableHolder.querySelectorAll("a")]
        .find((link) => link.getAttribute("href") === focused);
      if (again) again.focus();
      else input.focus();
    }
  };
  const quietly = (promise) => Promise.resolve(promise).catch(() => {}); // shown in status
  let timer = null;
  input.addEventListener("input", () => {
    state.q = input.value;
    onState(state);
    clearTimeout(timer);
    timer = setTimeout(() => quietly(fleet.search(state.q)), SEARCH_DEBOUNCE_MS);
  });
  prev.addEventListener("click", () => quietly(fleet.previousPage()));
  next.addEventListener("click", () => quietly(fleet.nextPage()));
  refresh();
  return { el, refresh };
}

// --- one service -------------------------------------------------------------------------

function verdict(exp, winner, conflicts) {
  const cluster = exp.spec.serviceReference.clusterId;
  const cond = condition(exp, "Conflict");
  if (!cond) return "not judged yet";
  if (cond.status !== "True") {
    return cluster === winner
      ? h("span", {}, badge("winner", "ok"), " the oldest export: it decides the service's properties")
      : h("span", {}, badge("agrees", "ok"), " agrees with the winner");
  }
  const reasons = cond.reason.split(",").map(reasonWords).join("; ");
  if (cluster === winner) {
    return h("div", {}, h("span", {}, badge("winner", "ok"),
      " the oldest export: its values stand; others differ (" +
      cond.reason.split(",").join(", ") + ")"),
    cond.message ? h("p", { class: "message" }, cond.message) : null);
  }
  const mine = conflicts.filter((c) => c.cluster === cluster);
  const details = mine.flatMap((c) => c.properties.map((p) => h("li", {},
    `${p.field}: ${JSON.stringify(p.value ?? null)} here, ` +
    `${JSON.stringify(p.decidedValue ?? null)} on the winner (${c.winner})`)));
  return h("div", {}, h("span", {}, badge("conflict", "bad"), " ", reasons),
    cond.message ? h("p", { class: "message" }, cond.message) : null,
    details.length ? h("ul", {}, details) : null);
}

function endpointCounts(slices) {
  const byCluster = new Map();
  for (const slice of slices) {
    const cluster = slice.spec.clusterId || (slice.metadata.labels || {})["mcsync.io/source-cluster"] || "?";
    const counts = byCluster.get(cluster) || { ready: 0, total: 0, slices: 0 };
    counts.slices += 1;
    for (const endpoint of slice.spec.endpoints || []) {
      counts.total += 1;
      // Kubernetes: an unset `ready` means ready.
      if (!endpoint.conditions || endpoint.conditions.ready !== false) counts.ready += 1;
    }
    byCluster.set(cluster, counts);
  }
  return byCluster;
}

export async function loadService(namespace, name) {
  const key = `namespace=${q(namespace)}&name=${q(name)}`;
  // The ServiceImport is read only when some cluster exports the key: a 404 would be an
  // error line in the browser's console for an ordinary answer ("nobody exports it").
  const readImport = async (exports) => {
    if (!exports.items.length) return null;
    try {
      return await get(`/serviceimports/${q(namespace)}/${q(name)}`);
    } catch (error) {
      if (error.status === 404) return null; // withdrawn between the two reads
      throw error;
    }
  };
  // Whether each cluster imports it, and why, is the hub's answer (shared/importreach.py,
  // as `mcsync describe import` says it): the console does not restate scope globs.
  const readImporters = async (exports) => {
    if (!exports.items.length) return [];
    try {
      return (await get(`/serviceimports/${q(namespace)}/${q(name)}/importers`)).items;
    } catch (error) {
      if (error.status === 404) return []; // withdrawn between the two reads
      throw error;
    }
  };
  const exportsRead = get(`/serviceexports?${key}`);
  const [serviceImport, importers, exports, conflicts, slices, clusters] = await Promise.all([
    exportsRead.then(readImport),
    exportsRead.then(readImporters),
    exportsRead,
    get(`/conflicts?${key}`),
    get(`/endpointslices?${key}`),
    get("/clusters"),
  ]);
  return { serviceImport, importers, exports: exports.items, conflicts: conflicts.items,
    slices: slices.items, clusters: clusters.items };
}

export function servicePage(namespace, name) {
  const body = h("div", { "aria-busy": "true" }, h("p", {}, "Loading…"));
  const el = h("section", { "aria-labelledby": "service-heading" },
    h("p", {}, h("a", { href: "#/services" }, "← All services")),
    h("h1", { id: "service-heading", tabindex: "-1" }, `${namespace}/${name}`), body);

  const render = (data) => {
    const si = data.serviceImport;
    const winner = si ? si.status.winningCluster : null;
    const sections = [];
    if (si) {
      const affinity = si.spec.sessionAffinity || "None";
      const timeout = si.spec.sessionAffinityConfig && si.spec.sessionAffinityConfig.clientIP
        ? ` (${si.spec.sessionAffinityConfig.clientIP.timeoutSeconds} s)` : "";
      sections.push(h("section", { "aria-labelledby": "si-heading" },
        h("h2", { id: "si-heading" }, "ServiceImport"),
        h("dl", { class: "facts" },
          h("dt", {}, "Type"), h("dd", {}, si.spec.type),
          h("dt", {}, "Session affinity"), h("dd", {}, affinity + timeout),
          h("dt", {}, "Winner"), h("dd", {}, winner || "—"),
          h("dt", {}, "IP families"), h("dd", {}, (si.spec.ipFamilies || []).join(", ") || "—"),
          h("dt", {}, "Conflicts"),
          h("dd", {}, (si.status.conflicts || []).map(reasonWords).join("; ") || "none")),
        table({
          caption: "Ports and the clusters serving each",
          columns: ["Port", "Protocol", "Name", "App protocol", "Clusters"],
          rows: (si.status.ports || []).map((p) => [String(p.port), p.protocol, p.name || "—",
            p.appProtocol || "—", (p.clusters || []).join(", ") || "—"]),
          empty: "No port.",
        })));
    } else {
      sections.push(h("p", { class: "notice" },
        "No cluster exports this service now, so there is no ServiceImport."));
    }
    const states = new Map(data.clusters.map((c) => [c.metadata.name, c.status.state]));
    sections.push(h("section", { "aria-labelledby": "exports-heading" },
      h("h2", { id: "exports-heading" }, "Exports and their verdicts"),
      table({
        caption: "Every cluster's export of this service",
        className: "exports",
        columns: ["Cluster", "Cluster state", "Type", "Exported since", "Verdict"],
        rows: data.exports.map((exp) => [
          exp.spec.serviceReference.clusterId,
          stateBadge(states.get(exp.spec.serviceReference.clusterId) || exp.status.clusterState),
          exp.spec.type,
          ageOf(exp.spec.serviceReference.exportedSince),
          verdict(exp, winner, data.conflicts),
        ]),
        empty: "No cluster exports it.",
      })));
    const counts = endpointCounts(data.slices);
    sections.push(h("section", { "aria-labelledby": "endpoints-heading" },
      h("h2", { id: "endpoints-heading" }, "Endpoints per cluster"),
      table({
        caption: "Endpoints each exporting cluster sends (ready / total)",
        columns: ["Cluster", "Ready", "Total", "Slices", "Served"],
        rows: [...counts.entries()].sort().map(([cluster, c]) => {
          const record = data.clusters.find((m) => m.metadata.name === cluster);
          const withdrawn = record && record.status.endpointsWithdrawn;
          return [cluster, String(c.ready), String(c.total), String(c.slices),
            withdrawn ? badge("withdrawn: cluster is Stale", "bad") : "yes"];
        }),
        empty: "No EndpointSlice is exported for this service.",
      })));
    sections.push(h("section", { "aria-labelledby": "imports-heading" },
      h("h2", { id: "imports-heading" }, "Where it is imported"),
      table({
        caption: "Each registered cluster, and why it does or does not import this service",
        columns: ["Cluster", "State", "Import"],
        rows: si ? data.importers.map((row) => [row.cluster, stateBadge(states.get(row.cluster)),
          `${row.imports}: ${row.why}`]) : [],
        empty: si ? "No cluster is registered."
          : "Nowhere: no cluster exports this service now.",
      })));
    body.removeAttribute("aria-busy");
    body.replaceChildren(...sections);
  };

  let loading = null;
  let again = false;
  const refresh = async () => {
    if (loading) { again = true; return loading; }
    loading = (async () => {
      do {
        again = false;
        try {
          render(await loadService(namespace, name));
        } catch (error) {
          body.replaceChildren(h("p", { class: "error", role: "alert" },
            `Could not read this service: ${error.message}`));
        }
      } while (again);
      loading = null;
    })();
    return loading;
  };
  refresh();
  return { el, refresh, key: `${namespace}/${name}` };
}
