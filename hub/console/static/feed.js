// One watch of the hub's change feed (docs/reference.md#change-feeds), held for as long as the console is open:
// the console's whole cost to the hub is this one watcher, whatever view is shown.
//
// Browsers' EventSource cannot send an Authorization header, so the feed is a fetch() whose
// NDJSON body is read as it streams. Its position is the revision of the last event or
// BOOKMARK seen; a stream that ends (timeoutSeconds, a hub restart, a network cut)
// reconnects from that position, so nothing is missed and nothing comes twice. A 410 (the
// position fell out of the hub's history, or this watch fell too far behind) means relist:
// `onRelist` reloads what the console shows and answers the revision to watch from.

import { API, ApiError, failure, headers } from "./api.js";

const TIMEOUT_SECONDS = 300;
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 15000;
const SLOW_RECONNECT_MS = 1000;

class Gone extends Error {}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

export class Feed {
  // path: the list path to watch (e.g. "/serviceexports"); onEvent(event) for every change,
  // onBookmark() for every BOOKMARK, onRelist() → revision after a 410, onState(state) with
  // "live" / "reconnecting" / "relisting", onUnauthorized() when the token stops working.
  constructor({ path, onEvent, onBookmark, onRelist, onState, onUnauthorized }) {
    Object.assign(this, { path, onEvent, onBookmark, onRelist, onState, onUnauthorized });
    this.revision = null;
    this.stopper = new AbortController();
    this.request = null;
  }

  start(revision) {
    this.revision = revision;
    this.run();
  }

  stop() {
    this.stopper.abort();
    if (this.request) this.request.abort();
  }

  get stopped() {
    return this.stopper.signal.aborted;
  }

  async relist() {
    this.onState("relisting");
    this.revision = await this.onRelist();
  }

  async run() {
    let backoff = FIRST_BACKOFF_MS;
    while (!this.stopped) {
      this.request = new AbortController();
      try {
        const url = `${API}${this.path}?watch=true&resourceVersion=${this.revision}` +
          `&timeoutSeconds=${TIMEOUT_SECONDS}`;
        // A stream that ended on its timeout reconnects at once and stays "live"; one
        // whose reconnection hangs (the hub restarting, the network gone) says so.
        const slow = setTimeout(() => this.onState("reconnecting"), SLOW_RECONNECT_MS);
        let response;
        try {
          response = await fetch(url, {
            headers: headers(), signal: this.request.signal, cache: "no-store",
          });
        } finally {
          clearTimeout(slow);
        }
        if (response.status === 410) throw new Gone();
        if (!response.ok) throw await failure(response);
        this.onState("live");
        backoff = FIRST_BACKOFF_MS;
        await this.read(response.body.getReader());
      } catch (error) {
        if (this.stopped) return;
        if (error instanceof ApiError && error.status === 401) {
          this.onUnauthorized();
          return;
        }
        if (error instanceof Gone) {
          try {
            await this.relist();
            continue;
          } catch {
            // relist failed too: back off and try again
          }
        }
        this.onState("reconnecting");
        await sleep(backoff, this.stopper.signal);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    }
  }

  async read(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line.trim()) this.handle(JSON.parse(line));
      }
    }
  }

  handle(event) {
    if (event.type === "ERROR") {
      if (event.object.code === 410) throw new Gone();
      throw new ApiError(event.object.code, event.object.message);
    }
    if (event.type === "BOOKMARK") this.onBookmark();
    else this.onEvent(event);
    const revision = event.object && event.object.metadata && event.object.metadata.resourceVersion;
    if (revision) this.revision = revision;
  }
}
