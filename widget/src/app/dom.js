// Building the widget's DOM with calls, never from HTML strings (view.js says why).

const SVG = "http://www.w3.org/2000/svg";

/** <tag> with `props` (class, text, on<event> handlers, attributes) and `children`. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  el.append(...children.filter((c) => c != null && c !== false));
  return el;
}

/** An SVG icon of one path, hidden from assistive technology. */
export function icon(d) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", d);
  svg.append(path);
  return svg;
}

let uid = 0;
/** An id unique in the page, for label/aria references. */
export const nextId = (prefix) => `${prefix}-${++uid}`;
