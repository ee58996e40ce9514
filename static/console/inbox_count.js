// The waiting count (partials/inbox_count.html, polled by htmx in the tenant's nav) in the
// page title too, "(3) Inbox · Acme · Tandem", so a person on another tab sees it. Where
// the count is (a member with the inbox), it also loads the opt-in notifications
// (inbox_notify.js, beside this file), so every console page carries them.
(function () {
  const base = document.title;
  function show() {
    const el = document.getElementById("inbox-count");
    const n = el ? parseInt(el.dataset.waiting || "0", 10) : 0;
    document.title = n > 0 ? `(${n}) ${base}` : base;
  }
  document.addEventListener("htmx:afterSettle", show);
  show();
  const me = document.currentScript;
  if (me && document.getElementById("inbox-count")) {
    const s = document.createElement("script");
    s.src = new URL("inbox_notify.js", me.src).href;
    document.head.append(s);
  }
})();
