/*
 * Tandem chat widget: the loader, served at the fixed URL site owners paste
 *
 *   <script src="https://support.example.com/static/tandem/widget.js" data-tandem-key="pk_…" async></script>
 *
 * It is small and cached for minutes (its URL cannot change); it finds Tandem's base URL
 * from its own src (or data-tandem-base), asks for the tenant's widget configuration,
 * and loads the widget itself from a content-hashed file (cached for good) beside it.
 * Until then, calls to window.Tandem are queued, as analytics snippets do it.
 */
(function () {
  var w = window, d = document;
  var me = d.currentScript || d.querySelector("script[data-tandem-key]");
  if (!me || w.__tandemWidget) return; // a second snippet on the same page does nothing
  w.__tandemWidget = true;

  var key = me.getAttribute("data-tandem-key") || "";
  var base = (me.getAttribute("data-tandem-base") ||
    me.src.replace(/\/static\/tandem\/widget\.js(?:[?#].*)?$/, "")).replace(/\/+$/, "");

  // The API, as a queue until the widget has loaded. A page may have made this object
  // already (the optional inline stub in docs/widget.md); its queued calls are kept.
  var api = w.Tandem && typeof w.Tandem === "object" ? w.Tandem : {};
  api.q = api.q || [];
  ["open", "close", "toggle", "reset", "identify", "on"].forEach(function (name) {
    if (typeof api[name] !== "function") {
      api[name] = function () { api.q.push([name, Array.prototype.slice.call(arguments)]); };
    }
  });
  w.Tandem = api;

  // The configuration is fetched while the widget's file loads, with the strings of the
  // visitor's language: the page's TandemSettings.locale, else the browser's languages.
  // A server too busy to answer is asked again after 1, 2 and 4 s before the widget gives
  // up: its 503 (docs/deploy.md, DB_POOL_WAIT_S) carries no CORS headers, so it reaches
  // the page as a network error, and both are asked again.
  var n = w.navigator, locale = (w.TandemSettings || {}).locale;
  var configUrl = base + "/widget/config?key=" + encodeURIComponent(key) + "&locale=" +
      encodeURIComponent(locale || "") + "&langs=" + encodeURIComponent((n.languages || [n.language]).join(","));
  var ask = function (wait) {
    return fetch(configUrl, { credentials: "omit" })
      .then(function (r) {
        if (r.status > 499) throw r;
        return r.json().then(function (body) { return { status: r.status, body: body }; });
      })
      .catch(function () {
        return wait > 4e3 ? { status: 0, body: null }
          : new Promise(function (ok) { setTimeout(ok, wait); }).then(function () { return ask(wait * 2); });
      });
  };
  var config = ask(1e3);
  Object.defineProperty(api, "_boot", { value: { key: key, base: base, config: config }, configurable: true });

  var app = d.createElement("script");
  var url = new URL(__TANDEM_APP__, me.src).href;
  try { // pages that enforce Trusted Types: allow the policy "tandem-widget" (docs/widget.md)
    if (w.trustedTypes) url = w.trustedTypes.createPolicy("tandem-widget", { createScriptURL: function (u) { return u; } }).createScriptURL(url);
  } catch (e) { /* no such policy allowed: a plain URL, as everywhere else */ }
  app.src = url;
  app.async = true;
  if (me.nonce) app.nonce = me.nonce; // pages whose CSP allows scripts by nonce
  (d.head || d.documentElement).appendChild(app);
})();
