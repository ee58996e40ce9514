// The agent's conversation page: the live transcript and typing over the agent socket
// (/ws/agent/<tenant>/<conversation>/, docs/protocol.md), replies and notes posted
// without a page load. Without this script the forms still post and the page reloads.
// The reply box: a Reply / Internal note switch (the colours are CSS, inbox.css), Ctrl+Enter
// (⌘+Enter) sends, and "Suggest a reply" asks before it replaces what the agent typed.
(function () {
  const log = document.getElementById("transcript");
  if (!log) return;
  const form = document.getElementById("reply");
  const box = document.getElementById("reply-text");
  const typing = document.getElementById("typing");
  const error = document.getElementById("reply-error");
  const visitor = log.dataset.visitor || "Visitor";
  const draftState = document.getElementById("draft-state");
  // The same words as partials/inbox_actions.html.
  const STATES = { bot: "with the assistant", pending_human: "waiting for a person", human: "with a person",
    resolved: "resolved" };
  let sock = null, typedAt = 0, typingTimer = 0;

  function add(m) {
    if (m.id && log.querySelector(`[data-id="${m.id}"]`)) return;
    const el = document.createElement("article");
    el.className = `msg ${m.role}`;
    el.dataset.id = m.id || "";
    const who = document.createElement("div");
    const name = document.createElement("span");
    name.className = "who";
    name.textContent = m.role === "agent" ? m.author : m.role === "note" ? `Internal note · ${m.author}`
      : m.role === "user" ? visitor : "Assistant";
    who.append(name);
    const text = document.createElement("div");
    text.className = "content";
    text.textContent = m.text;
    el.append(who, text);
    if (m.attachments && m.attachments.length && window.TandemFiles) el.append(window.TandemFiles.list(m.attachments));
    log.append(el);
    el.scrollIntoView({ block: "end" });
  }

  function connect() {
    const url = new URL(log.dataset.socket, location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    sock = new WebSocket(url);
    sock.onmessage = (e) => {
      const f = JSON.parse(e.data);
      if (f.type === "message") add(f);
      else if (f.type === "draft_start") { box.value = ""; draftState.textContent = "The assistant is drafting…"; }
      else if (f.type === "draft") { box.value += f.text; box.scrollTop = box.scrollHeight; }
      else if (f.type === "draft_end") { suggestButton().disabled = false; draftState.textContent = "Draft ready: edit it, then send."; box.focus(); }
      else if (f.type === "draft_error") { suggestButton().disabled = false; draftState.textContent = ""; error.textContent = f.detail; }
      else if (f.type === "handoff") {  // looked up each time: a claim swaps the panel it is in
        const state = document.getElementById("handoff-state");
        if (state) state.textContent = STATES[f.state] || f.state;
      }
      else if (f.type === "typing" && f.from === "visitor") {
        typing.textContent = "The visitor is typing…";
        clearTimeout(typingTimer);
        typingTimer = setTimeout(() => { typing.textContent = ""; }, 4000);
      } else if (f.type === "error") error.textContent = f.detail || f.message;
    };
    sock.onclose = (e) => { if (e.code < 4000) setTimeout(connect, 1000); };
  }
  connect();

  // The draft streams into the reply box over the socket; nothing is sent until Send. The
  // button is for the conversation's own agent: shown when the page (or the actions panel
  // that a claim swaps in, with the button out of band) says so.
  function suggestButton() { return document.getElementById("suggest"); }
  function showSuggest() {
    const b = suggestButton();
    if (b) b.hidden = b.dataset.mine !== "1";
  }
  showSuggest();
  document.body.addEventListener("htmx:afterSettle", showSuggest);
  document.addEventListener("click", (e) => {
    const b = e.target.closest && e.target.closest("#suggest");
    if (!b) return;
    if (box.value.trim() && !window.confirm("Replace what you typed with a suggested reply?")) return;
    if (!sock || sock.readyState !== 1) { error.textContent = "Not connected yet: try again in a moment."; return; }
    b.disabled = true;
    error.textContent = "";
    sock.send(JSON.stringify({ type: "suggest" }));
  });

  // A refused claim or assign (409, 400), or labels that no longer exist (400), still show
  // their panel, with the reason in it.
  const PANELS = ["inbox-actions", "conversation-labels"];
  document.body.addEventListener("htmx:beforeSwap", (e) => {
    const code = e.detail.xhr.status;
    if ((code === 409 || code === 400) && e.detail.target && PANELS.includes(e.detail.target.id)) {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });

  // Saved replies: "/" and a shortcut lists the tenant's matches, filled in for this
  // conversation by the server; Tab (or a click) puts the first (or that one) in the box.
  const saved = document.getElementById("saved-replies");
  let savedAsked = 0;
  function useSaved(text) { box.value = text; saved.hidden = true; saved.replaceChildren(); box.focus(); }
  async function lookUpSaved() {
    const m = box.value.match(/^\/([a-z0-9_-]*)$/i);
    if (!m || !saved) { if (saved) saved.hidden = true; return; }
    const asked = ++savedAsked;
    const r = await fetch(`${form.dataset.replies}?q=${encodeURIComponent(m[1])}`,
      { headers: { Accept: "application/json" }, credentials: "same-origin" });
    const found = r.ok ? (await r.json()).replies : [];
    if (asked !== savedAsked) return;  // a newer keystroke's answer wins
    saved.replaceChildren(...found.map((f) => {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "saved-reply";
      b.dataset.text = f.text;
      b.textContent = `/${f.shortcut} · ${f.text.length > 80 ? f.text.slice(0, 80) + "…" : f.text}`;
      b.addEventListener("click", () => useSaved(f.text));
      li.append(b);
      return li;
    }));
    saved.hidden = found.length === 0;
  }
  box.addEventListener("input", lookUpSaved);

  // Ctrl+Enter (⌘+Enter on a Mac) sends in whichever mode the switch is in.
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
    else if (e.key === "Tab" && saved && !saved.hidden && saved.firstElementChild) {
      e.preventDefault();
      useSaved(saved.querySelector("button").dataset.text);
    }
  });

  box.addEventListener("input", () => {
    const now = Date.now();
    if (sock && sock.readyState === 1 && now - typedAt > 2000) {
      typedAt = now;
      sock.send(JSON.stringify({ type: "typing" }));
    }
  });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = new FormData(form);
    const note = body.get("mode") === "note";
    error.textContent = "";
    const r = await fetch(note ? form.dataset.note : form.action,
      { method: "POST", body, headers: { Accept: "application/json" }, credentials: "same-origin" });
    const answer = await r.json().catch(() => ({}));
    if (!r.ok) { error.textContent = answer.detail || "Not sent."; return; }
    if (answer.message) add(answer.message);
    box.value = "";
    if (draftState) draftState.textContent = "";
    box.focus();
  });
})();
