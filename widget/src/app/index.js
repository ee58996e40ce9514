// The widget's file (static/tandem/widget-app.<hash>.js), loaded by widget.js. It takes
// over window.Tandem from the loader's queue and runs the calls made so far.
import { App } from "./app.js";

(function install() {
  const api = window.Tandem;
  const boot = api && api._boot;
  if (!boot || api._app) return;
  const app = new App(boot, window.TandemSettings);
  const methods = {
    open: () => app.open(),
    close: () => app.close(),
    toggle: () => app.toggle(),
    reset: () => app.reset(),
    identify: (user) => app.identify(user),
    on: (event, fn) => app.on(event, fn),
  };
  const queued = Array.isArray(api.q) ? api.q : [];
  Object.assign(api, methods);
  Object.defineProperty(api, "_app", { value: app });
  api.version = __TANDEM_VERSION__;
  // A page's own stub that still pushes here is served at once.
  api.q = { push: (call) => run(call) };
  function run(call) {
    const [name, args] = Array.isArray(call) ? call : [];
    if (methods[name]) methods[name](...Array.from(args || []));
  }
  queued.forEach(run);
})();
