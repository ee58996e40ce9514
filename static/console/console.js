/* The console's few lines of script: copy buttons, and the usage charts (uPlot over the
   JSON that the server aggregated). Live numbers are htmx polling, in the templates. */
(function () {
  "use strict";

  // Copy buttons: <button data-copy="#element-id">Copy</button>
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("[data-copy]");
    if (!btn) return;
    var el = document.querySelector(btn.getAttribute("data-copy"));
    if (!el) return;
    var text = el.value !== undefined ? el.value : el.textContent;
    var done = function () { var old = btn.textContent; btn.textContent = "Copied"; setTimeout(function () { btn.textContent = old; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(el); done(); });
    } else { fallback(el); done(); }
  });
  function fallback(el) {
    var range = document.createRange(); range.selectNodeContents(el);
    var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
    try { document.execCommand("copy"); } catch (e) { /* selected: the person copies */ }
  }

  // Charts: <div class="chart-card" data-charts-url="..."> with .chart[data-series] inside.
  var SERIES = {
    requests: { title: "Requests per minute", lines: [["requests_per_min", "requests/min", "#2454c5"]] },
    tokens: { title: "Output tokens per second", lines: [["tokens_per_s", "tokens/s", "#1f8a4c"]] },
    ttft: { title: "Time to first token (ms)", lines: [["ttft_p50", "p50", "#2454c5"], ["ttft_p99", "p99", "#c62828"]] }
  };
  var charts = [];

  function draw(card, data) {
    charts.forEach(function (c) { c.destroy(); }); charts = [];
    card.querySelectorAll(".chart").forEach(function (el) {
      var spec = SERIES[el.getAttribute("data-series")];
      var width = Math.max(280, el.clientWidth || 340);
      var series = [{}].concat(spec.lines.map(function (l) {
        return { label: l[1], stroke: l[2], width: 2, spanGaps: l[0].indexOf("ttft") === 0, points: { show: false } };
      }));
      var cols = [data.t].concat(spec.lines.map(function (l) { return data[l[0]]; }));
      el.innerHTML = "";
      charts.push(new uPlot({ title: spec.title, width: width, height: 190, series: series,
                               scales: { x: { time: true } }, axes: [{}, { size: 55 }],
                               legend: { live: false } }, cols, el));
    });
    var total = card.querySelector("[data-total]");
    if (total) total.textContent = data.total_requests + " requests in this range";
  }

  function load(card, range) {
    card.querySelectorAll(".ranges button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-range") === range));
    });
    card.setAttribute("data-range", range);
    fetch(card.getAttribute("data-charts-url") + "?range=" + encodeURIComponent(range), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (data) { draw(card, data); card.setAttribute("data-loaded", range); })
      .catch(function () { card.setAttribute("data-loaded", "error"); });
  }

  function init() {
    document.querySelectorAll(".chart-card[data-charts-url]").forEach(function (card) {
      if (typeof uPlot === "undefined") return;
      card.querySelectorAll(".ranges button").forEach(function (b) {
        b.addEventListener("click", function () { load(card, b.getAttribute("data-range")); });
      });
      load(card, card.getAttribute("data-range") || "hour");
      // The charts refresh once a minute (their smallest bucket); the tiles every few seconds.
      setInterval(function () { if (!document.hidden) load(card, card.getAttribute("data-range")); }, 60000);
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();

  // Tenant → Assistant: the widget preview (an iframe) follows the form's unsaved values.
  var previewForm = document.getElementById("assistant-form");
  var preview = document.getElementById("widget-preview");
  if (previewForm && preview) {
    var FIELDS = ["widget_title", "widget_color", "widget_greeting", "widget_placeholder", "widget_position", "widget_locale"];
    var timer = null, last = preview.getAttribute("src");
    var refresh = function () {
      var q = new URLSearchParams();
      FIELDS.forEach(function (name) { var el = previewForm.elements[name]; if (el) q.set(name, el.value); });
      var src = preview.getAttribute("data-preview-src") + "?" + q.toString();
      if (src !== last) { last = src; preview.setAttribute("src", src); }
    };
    var later = function () { clearTimeout(timer); timer = setTimeout(refresh, 400); };
    previewForm.addEventListener("input", later);
    previewForm.addEventListener("change", later);
  }
})();
