// The console's entry point: sign-in, the hash router (each view its own URL, so reload and
// share work; the token is never part of it), and the one feed that keeps every view live.

import { ApiError, setToken, token } from "./api.js";
import { h, tickAges } from "./dom.js";
import { Feed } from "./feed.js";
import { Fleet, keyOf } from "./fleet.js";
import { fleetSection, loadWords, servicePage, servicesSection } from "./views.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const feedState = document.getElementById("feed-state");
const signOutButton = document.getElementById("sign-out");

let fleet = null;
let feed = null;
let view = null; // { el, refresh, key? }
let routed = false;

const OVERVIEW_CLUSTERS = 20;
const FEED_TEXT = { live: "Live", reconnecting: "Reconnecting…", relisting: "Reloading…" };

function parseRoute() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query = ""] = raw.split("?");
  const params = new URLSearchParams(query);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const list = { q: params.get("q") || "" };
  if (parts[0] === "services" && parts.length === 3) {
    return { view: "service", namespace: parts[1], name: parts[2] };
  }
  if (parts[0] === "services") return { view: "services", ...list };
  if (parts[0] === "fleet") return { view: "fleet" };
  return { view: "overview", ...list };
}

// Keep the search in the URL without a history entry per keystroke. (A page is a position
// in the hub's keyset order, not a number: a shared link opens the search's first page.)
function rememberList(base, state) {
  const params = new URLSearchParams();
  if (state.q) params.set("q", state.q);
  const query = params.toString();
  history.replaceState(null, "", `#${base}${query ? `?${query}` : ""}`);
}

// The page a list view shows: the route's search, read again if a change came meanwhile.
function showList(route) {
  const reading = fleet.query !== route.q ? fleet.search(route.q)
    : fleet.stale ? fleet.load() : null;
  if (reading) reading.catch(() => {}); // the list's status line says what failed
}

function render() {
  const route = parseRoute();
  let heading;
  if (route.view === "services" || route.view === "overview") showList(route);
  if (route.view === "service") {
    view = servicePage(route.namespace, route.name);
    document.title = `${route.namespace}/${route.name} · mcsync console`;
    main.replaceChildren(view.el);
  } else if (route.view === "fleet") {
    view = fleetSection(fleet, { headingLevel: "h1" });
    document.title = "Fleet · mcsync console";
    main.replaceChildren(view.el);
  } else if (route.view === "services") {
    view = servicesSection(fleet, route, {
      headingLevel: "h1", onState: (state) => rememberList("/services", state),
    });
    document.title = "Services · mcsync console";
    main.replaceChildren(view.el);
  } else {
    const clusters = fleetSection(fleet, { limit: OVERVIEW_CLUSTERS });
    const services = servicesSection(fleet, route, {
      onState: (state) => rememberList("/", state),
    });
    view = { refresh: () => { clusters.refresh(); services.refresh(); } };
    document.title = "Overview · mcsync console";
    heading = h("h1", { tabindex: "-1" }, "Fleet overview");
    main.replaceChildren(heading, clusters.el, services.el);
  }
  for (const link of nav.querySelectorAll("a")) {
    const section = { overview: "", service: "services" }[route.view] ?? route.view;
    const current = link.getAttribute("href") === `#/${section}`;
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  // Moving between views moves the keyboard focus to the new view's heading.
  if (routed) (heading || main.querySelector("h1") || main).focus();
  routed = true;
}

function onFeedEvent(event) {
  const object = event.object;
  const ref = object.spec && object.spec.serviceReference;
  const namespace = object.metadata.namespace || (ref && ref.namespace);
  const key = keyOf(namespace, object.metadata.name);
  const cluster = (ref && ref.clusterId) || (object.spec && object.spec.clusterId);
  fleet.noteChange(key, cluster, { showing: Boolean(view && !view.key) });
  if (view && view.key === key) view.refresh();
}

function onBookmark() {
  // Heartbeats and Stale transitions are in no reader's feed: the feed's BOOKMARK paces
  // the one small read of the clusters (and of the shown service's endpoints).
  fleet.scheduleClusters(0);
  if (view && view.key) view.refresh();
}

// The shown page read again; answers its revision (a read that a newer one cancelled, as a
// search typed meanwhile does, is tried again with what is shown now).
async function readShownPage() {
  let revision = null;
  while (revision === null) revision = await fleet.load();
  return revision;
}

async function relist() {
  const revision = await readShownPage();
  await fleet.loadClusters();
  if (view && view.key) view.refresh();
  return revision;
}

function showFeedState(state) {
  feedState.textContent = FEED_TEXT[state] || state;
  feedState.className = `feed ${state}`;
}

async function startSession() {
  fleet = new Fleet();
  const route = parseRoute();
  fleet.query = route.q || ""; // the first render leaves the page's first read to below
  await fleet.loadClusters(); // proves the token before anything is shown
  await loadWords();
  nav.hidden = false;
  signOutButton.hidden = false;
  feedState.hidden = false;
  showFeedState("reconnecting");
  // The lists follow every change; a service page follows its own key (onFeedEvent).
  fleet.addEventListener("change", () => { if (view && !view.key) view.refresh(); });
  routed = false;
  render();
  const revision = await readShownPage();
  feed = new Feed({
    path: "/serviceexports",
    onEvent: onFeedEvent,
    onBookmark,
    onRelist: relist,
    onState: showFeedState,
    onUnauthorized: () => signOut("The hub no longer accepts this token; sign in again."),
  });
  feed.start(revision);
}

function signOut(message) {
  if (feed) feed.stop();
  feed = null;
  fleet = null;
  view = null;
  setToken(null);
  nav.hidden = true;
  signOutButton.hidden = true;
  feedState.hidden = true;
  showSignIn(message);
}

function signInMessage(error) {
  if (error instanceof ApiError && error.status === 401) {
    return `The hub did not accept this token (${error.message}). Check it and try again.`;
  }
  if (error instanceof ApiError && error.status === 403) {
    return "This token may not read the fleet: sign in with a reader or admin token, " +
      "not a member cluster's.";
  }
  return `Could not reach the hub: ${error.message}`;
}

function showSignIn(message) {
  document.title = "Sign in · mcsync console";
  const input = h("input", {
    type: "password", id: "token", name: "token", autocomplete: "off", required: true,
    "aria-describedby": "token-help",
  });
  const alert = h("p", { class: "error", id: "sign-in-error", role: "alert" }, message || "");
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "sign-in", "aria-labelledby": "sign-in-heading" },
    h("h1", { id: "sign-in-heading" }, "Sign in to the mcsync console"),
    h("label", { for: "token" }, "Reader or admin token"), input,
    h("p", { class: "hint", id: "token-help" },
      "The hub's reader token (MCSYNC_READER_TOKEN) or admin token. It stays in this tab " +
      "only and is sent to this hub only."),
    button, alert);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    alert.textContent = "";
    setToken(input.value.trim());
    try {
      await startSession();
    } catch (error) {
      signOut(signInMessage(error)); // a fresh form, the message, the token dropped
    }
  });
  main.replaceChildren(form);
  input.focus();
}

signOutButton.addEventListener("click", () => signOut(""));
window.addEventListener("hashchange", () => { if (fleet) render(); });
setInterval(() => tickAges(main), 1000);

function refused(error) {
  return error instanceof ApiError && (error.status === 401 || error.status === 403);
}

// The hub could not be read with a token it had accepted (down, restarting, 503): keep the
// token and offer to try again, rather than sign the operator out.
function showUnavailable(error) {
  if (feed) feed.stop();
  feed = null;
  view = null;
  const retry = h("button", { type: "button" }, "Try again");
  retry.addEventListener("click", resume);
  main.replaceChildren(h("section", { "aria-labelledby": "unavailable-heading" },
    h("h1", { id: "unavailable-heading", tabindex: "-1" }, "The hub cannot be read right now"),
    h("p", { class: "error", role: "alert" }, error.message), retry));
  retry.focus();
}

function resume() {
  startSession().catch((error) => {
    if (refused(error)) signOut(signInMessage(error));
    else showUnavailable(error);
  });
}

if (token()) {
  resume();
} else {
  showSignIn("");
}
