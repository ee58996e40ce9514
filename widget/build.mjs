// Builds static/tandem/ from src/: `npm ci && npm run build` (Node 18+).
//   widget.js                  the loader, at the URL site owners paste (cached briefly)
//   widget-app.<sha256:12>.js  everything else, named by its content (cached for good)
// Both files are committed: running and testing Tandem needs no Node.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { build, transform } from "esbuild";

const OUT = new URL("../static/tandem/", import.meta.url);
const { version } = JSON.parse(readFileSync(new URL("package.json", import.meta.url)));
const common = { bundle: true, minify: true, format: "iife", target: ["es2020"], write: false, charset: "utf8" };

// The stylesheet goes into the shadow root as text, minified.
const minifiedCss = {
  name: "minified-css-text",
  setup(b) {
    b.onLoad({ filter: /\.css$/ }, async (args) => {
      const { code } = await transform(readFileSync(args.path, "utf8"), { loader: "css", minify: true });
      return { contents: code.trim(), loader: "text" };
    });
  },
};

const app = await build({
  ...common,
  entryPoints: [new URL("src/app/index.js", import.meta.url).pathname],
  plugins: [minifiedCss],
  define: { __TANDEM_VERSION__: JSON.stringify(version) },
  legalComments: "eof",
});
const appCode = app.outputFiles[0].contents;
const appName = `widget-app.${createHash("sha256").update(appCode).digest("hex").slice(0, 12)}.js`;

const loader = await build({
  ...common,
  entryPoints: [new URL("src/loader.js", import.meta.url).pathname],
  define: { __TANDEM_APP__: JSON.stringify(appName) },
  banner: { js: `/* Tandem chat widget ${version} (loader; sources: widget/ in the Tandem repository) */` },
});
const loaderCode = loader.outputFiles[0].contents;

for (const name of readdirSync(OUT)) {
  if (/^widget-app\.[0-9a-f]{12}\.js$/.test(name) && name !== appName) rmSync(new URL(name, OUT));
}
writeFileSync(new URL(appName, OUT), appCode);
writeFileSync(new URL("widget.js", OUT), loaderCode);

// Every language's strings, which the server sends with the widget's configuration
// (tandem/chat/widget.py): the bundle carries only a few English words, for when the
// configuration cannot be fetched. Every catalogue has exactly English's keys.
const I18N = new URL("src/i18n/", import.meta.url);
const read = (name) => JSON.parse(readFileSync(new URL(name, I18N), "utf8"));
const en = read("en.json");
const catalogues = {};
for (const name of readdirSync(I18N).filter((n) => n.endsWith(".json")).sort()) {
  const strings = read(name);
  const missing = Object.keys(en).filter((k) => !(k in strings));
  const extra = Object.keys(strings).filter((k) => !(k in en));
  if (missing.length || extra.length) throw new Error(`${name}: missing ${missing}, unknown ${extra}`);
  catalogues[name.slice(0, -5)] = strings;
}
writeFileSync(new URL("widget-i18n.json", OUT), JSON.stringify(catalogues) + "\n");

const kb = (n) => (n / 1024).toFixed(1) + " KB";
let total = 0;
for (const [name, code] of [["widget.js", loaderCode], [appName, appCode]]) {
  const gz = gzipSync(code, { level: 9 }).length;
  total += gz;
  console.log(`${name.padEnd(32)} ${kb(code.length).padStart(9)}  gzip ${kb(gz)}`);
}
console.log(`${"total".padEnd(32)} ${"".padStart(9)}  gzip ${kb(total)} (budget 44 KB, tests/widget/test_assets.py)`);
