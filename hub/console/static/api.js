// The hub's REST API as the console reads it: one bearer token, kept in this tab's
// sessionStorage (never a URL, a cookie or a log line), and every error as the hub's
// Status message. Every request goes to this page's own origin (CSP connect-src 'self').

const TOKEN_KEY = "mcsync.console.token";
export const API = "/api/v1";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function headers() {
  return { Authorization: `Bearer ${token()}`, Accept: "application/json" };
}

export async function failure(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.message) message = body.message;
  } catch {
    // not a Status: keep the HTTP status line
  }
  return new ApiError(response.status, message);
}

// GET `path` (under /api/v1) as JSON; throws ApiError.
export async function get(path, { signal } = {}) {
  const response = await fetch(API + path, { headers: headers(), signal, cache: "no-store" });
  if (!response.ok) throw await failure(response);
  return response.json();
}

// Every page of a list (limit + continue): calls onPage(items, meta) per page as it comes,
// answers the first page's resourceVersion (the revision to watch from).
export async function listAll(path, { pageSize = 2000, onPage, signal } = {}) {
  let cont = null;
  let revision = null;
  const sep = path.includes("?") ? "&" : "?";
  do {
    const query = `${sep}limit=${pageSize}` + (cont ? `&continue=${encodeURIComponent(cont)}` : "");
    const page = await get(path + query, { signal });
    if (revision === null) revision = page.metadata.resourceVersion;
    onPage(page.items, page.metadata);
    cont = page.metadata.continue || null;
  } while (cont);
  return revision;
}

export function q(value) {
  return encodeURIComponent(value);
}
