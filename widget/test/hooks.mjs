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
  if (url.endsWith(".json")) { // the default export and, as esbuild allows, each top-level key
    const text = await readFile(new URL(url), "utf8");
    const named = Object.keys(JSON.parse(text)).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k))
      .map((k) => `export const ${k} = data[${JSON.stringify(k)}];`).join("\n");
    return { format: "module", source: `const data = ${text};\nexport default data;\n${named}`, shortCircuit: true };
  }
  if (url.endsWith("/src/app/markdown.js")) return { format: "module", source: PLAIN_MARKDOWN, shortCircuit: true };
  return next(url, context);
}
