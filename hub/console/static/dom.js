// Building DOM without innerHTML: every value from the API goes in as text, so nothing the
// fleet names (a label, an annotation, a message) can become markup in the console.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "text") el.textContent = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// A table with a caption and column headers; `rows` are arrays of cells (text or nodes).
// It sits in a holder that scrolls sideways by itself, so a wide table on a narrow screen
// never makes the whole page scroll (the holder is focusable, so a keyboard can scroll it).
export function table({ caption, columns, rows, empty, className }) {
  return h("div", { class: "scroll", tabindex: "0", role: "group", "aria-label": caption },
    tableOnly({ caption, columns, rows, empty, className }));
}

function tableOnly({ caption, columns, rows, empty, className }) {
  return h("table", { class: className },
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.length
      ? rows.map((cells) => h("tr", {}, cells.map((cell, i) =>
        i === 0 ? h("th", { scope: "row" }, cell) : h("td", {}, cell))))
      : h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, empty || "None."))));
}

export function age(timestamp, now = Date.now()) {
  if (!timestamp) return "never";
  const seconds = Math.max(0, Math.round((now - Date.parse(timestamp)) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

// A heartbeat age that keeps counting: `tickAges` rewrites every one each second.
export function ageOf(timestamp) {
  if (!timestamp) return h("span", {}, "never");
  return h("time", { datetime: timestamp, title: timestamp, "data-age": "" }, age(timestamp));
}

export function tickAges(root) {
  const now = Date.now();
  for (const el of root.querySelectorAll("time[data-age]")) {
    el.textContent = age(el.getAttribute("datetime"), now);
  }
}

export function badge(text, kind) {
  return h("span", { class: `badge ${kind}` }, text);
}
