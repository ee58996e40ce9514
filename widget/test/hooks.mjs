// Module hooks for the unit tests (register.mjs says why).
import { readFile } from "node:fs/promises";

const PLAIN_MARKDOWN = `export function renderMarkdown(text) {
  const p = document.createElement("p"); p.textContent = text; return p;
}`;

export async function load(url, context, next) {
  if (url.endsWith(".css")) {
    const text = await readFile(new URL(url), "utf8");
    return { format: "module", source: `export default ${JSON.stringify(text)};`, shortCircuit: true };
  }
  if (url.endsWith(".json")) {
    const text = await readFile(new URL(url), "utf8");
    return { format: "module", source: `export default ${text};`, shortCircuit: true };
  }
  if (url.endsWith("/src/app/markdown.js")) return { format: "module", source: PLAIN_MARKDOWN, shortCircuit: true };
  return next(url, context);
}
