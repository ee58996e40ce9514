// The widget: the conversation's state, the socket's frames (docs/protocol.md), the
// page's API (window.Tandem), persistence across reloads and tabs. The socket is
// connection.js's, what is kept across reloads store.js's, the DOM view.js's; the
// hand-over to a person handover.js's, its offline form offline.js's, and feedback
// (👍/👎, CSAT) feedback.js's.
import { Connection } from "./connection.js";
import { Feedback } from "./feedback.js";
import { Handover } from "./handover.js";
import { catalogueOf, formatWhen, translator } from "./i18n.js";
import { OfflineForm } from "./offline.js";
import { Store } from "./store.js";
import { View } from "./view.js";
import { paperclip, upload } from "./attachments.js";

export const EVENTS = ["ready", "open", "close", "message", "error"];
const FINAL = new Set(["done", "failed", "cancelled"]);
// Refusals: the socket is closed and nothing more can be sent.
const FATAL = {
  origin_not_allowed: "originNotAllowed",
  invalid_api_key: "unavailable",
  revoked_api_key: "unavailable",
  tenant_inactive: "unavailable",
  wrong_key_kind: "unavailable",
  identity_verification_failed: "identity",
};
// Refusals of a message: nothing was stored, and its text goes back into the box.
const MESSAGE_REFUSALS = new Set(["rate_limited", "message_too_long", "empty_message", "invalid_message",
  "context_length_exceeded", "max_tokens_too_large", "internal_error"]);
const TEXTS = {
  no_worker: "busy",
  timeout: "timeout",
  prompt_too_long: "tooLong",
  context_length_exceeded: "tooLong",
  message_too_long: "tooLong",
};
const COLOR = /^#[0-9a-f]{6}$/i;

function normalizeUser(u) {
  if (!u || typeof u !== "object" || u.id == null || u.id === "") return null;
  const str = (v) => (v == null ? "" : String(v));
  return { id: str(u.id), name: str(u.name), email: str(u.email), hash: str(u.hash) };
}

const sameUser = (a, b) => (a === b) || (!!a && !!b && a.id === b.id && a.hash === b.hash &&
  a.name === b.name && a.email === b.email);

let localIds = 0;

export class App {
  constructor(boot, settings) {
    this.key = boot.key;
    this.base = boot.base;
    this.settings = settings && typeof settings === "object" ? settings : {};
    this.handlers = Object.fromEntries(EVENTS.map((e) => [e, []]));
    this.store = new Store(this.key);
    this.user = normalizeUser(this.settings.user);
    this.messages = []; // {id, role, text, status, index, local, stored, el}, oldest first
    this.byId = new Map();
    this.conversationId = null;
    this.active = null; // the reply streaming now
    this.sent = null; // {text, local, transmitted} until the server says it has it
    this.unread = 0;
    this.fatal = null;
    this.alertKind = null; // "offline" | "error" | "fatal"
    this.view = null;
    this.dirty = new Set();
    this.raf = 0;
    this.openKey = `tandem:${this.key.slice(0, 16)}:open`;
    // An opening asked for before the view exists: its open() options, or false. Opened
    // by the page's settings or kept open across its pages, the visitor's focus stays
    // where it is on the host page (see open()).
    this.wantOpen = (this.settings.open === true || this._session("get") === "1") && { focus: false };
    this.conn = new Connection(() => this.socketUrl(), {
      open: () => this.onOpen(),
      frame: (f) => this.onFrame(f),
      down: (ms) => this.onDown(ms),
      refused: (code) => this.refuse(this.fatal || (code === 4403 ? "origin_not_allowed" : "invalid_api_key")),
    });
    boot.config.then((answer) => this.configure(answer));
  }

  get owner() { return this.user ? `user:${this.user.id}` : "anon"; }

  // The page's API ---------------------------------------------------------------------

  on(event, fn) {
    if (!this.handlers[event] || typeof fn !== "function") return;
    this.handlers[event].push(fn);
    if (event === "ready" && this.view) setTimeout(() => fn(), 0);
  }

  emit(event, data) {
    for (const fn of this.handlers[event]) {
      try { fn(data); } catch (e) { console.error("Tandem: an on('%s') handler failed", event, e); }
    }
  }

  /** Shows the panel. `focus`: move the keyboard focus into it, as a visitor who opened it
   * expects; an opening nobody asked for at that moment (the page's `open` setting, the
   * panel kept open from the last page) leaves the focus on the host page, where a visitor
   * may already be typing. */
  open({ focus = true } = {}) {
    if (!this.view) { this.wantOpen = { focus }; return; }
    if (this.view.isOpen) return;
    this.view.show(true);
    this._session("set", "1");
    this.setUnread(0);
    if (this.alertKind) { const text = this.view.alert.textContent; this.view.setAlert(""); this.view.setAlert(text); }
    if (!this.fatal) this.conn.start();
    if (focus && this.fatal) this.view.closeButton.focus();
    else if (focus) this.view.focusInput();
    this.emit("open");
  }

  close() {
    if (!this.view) { this.wantOpen = false; return; }
    if (!this.view.isOpen) return;
    const hadFocus = this.view.hasFocus;
    this.view.show(false);
    this._session("remove");
    if (hadFocus) this.view.focusLauncher();
    this.emit("close");
  }

  toggle() { if (this.view && this.view.isOpen) this.close(); else this.open(); }

  /** Forget the conversation and the anonymous visitor id; the next message starts anew. */
  reset() {
    this.newConversation({ focus: false });
    this.store.newVisitor();
    if (!this.conn.stopped) this.conn.restart();
  }

  identify(user) {
    const next = normalizeUser(user);
    if (sameUser(next, this.user)) return;
    this.user = next;
    if (!this.view) return; // the first connection will carry it
    if (this.fatal === "identity_verification_failed") {
      this.fatal = null;
      this.conn.refused = false;
      this.setAlert(null);
    }
    this.switchConversation(this.store.conversation(this.owner));
    if (!this.conn.stopped || this.conn.refused || this.view.isOpen) this.conn.restart();
  }

  // Set-up ------------------------------------------------------------------------------

  configure(answer) {
    if (!answer.body) { // Tandem could not be reached: a chat that cannot work is not shown
      console.warn("Tandem: the chat widget's configuration could not be fetched; the widget is not shown.");
      return;
    }
    const cfg = answer.status === 200 ? answer.body : {};
    const { locale, strings } = catalogueOf(answer.body.i18n); // a refusal's too
    this.locale = locale;
    this.t = translator(strings);
    this.greeting = cfg.greeting || this.t("greeting");
    // CSAT is asked after this long without a visitor message following a reply (0: never).
    this.feedback = new Feedback({ app: this, idleMs: typeof cfg.csat_idle_minutes === "number"
      && cfg.csat_idle_minutes > 0 ? cfg.csat_idle_minutes * 60e3 : 0 });
    this.view = new View({
      t: this.t,
      on: {
        open: () => this.open(),
        close: () => this.close(),
        send: () => this.send(),
        stop: () => this.stop(),
        newConversation: () => this.newConversation(),
        rate: (m, rating, comment) => this.feedback.rate(m, rating, comment),
        person: () => this.handover.ask(this.conversationId) || this.conn.start(),
        type: () => {
          const now = Date.now();
          if (this.handover.person && now - (this.typedAt || 0) > 2e3) {
            this.typedAt = now;
            this.conn.send({ type: "typing", conversation: this.conversationId });
          }
        },
      },
    });
    this.view.host.setAttribute("lang", locale);
    const send = (frame) => this.conn.send(frame);
    this.offline = new OfflineForm({ t: this.t, store: this.store,
      send: (conversation, email, text) => send({ type: "offline", conversation, email, text }) });
    this.handover = new Handover({ t: this.t, view: this.view, offline: this.offline, send,
      when: (iso) => formatWhen(iso, locale) });
    this.handover.setAgents(cfg.agents);
    // The paperclip, when the tenant takes files (docs/attachments.md).
    this.files = cfg.attachments && cfg.attachments.enabled ? cfg.attachments : null;
    if (this.files) {
      const clip = paperclip({ label: this.t("attach"), accept: this.files.accept, onPick: (f) => this.attach(f) });
      this.view.input.after(clip.button, clip.input); // after the box: Shift+Tab from it still leads back into the conversation
    }
    const color = COLOR.test(cfg.color || "") ? cfg.color : "#2f5bd3";
    this.view.setTheme({
      title: cfg.title || this.t("chat"),
      color,
      textColor: COLOR.test(cfg.text_color || "") ? cfg.text_color : "#ffffff",
      position: this.settings.position === "left" || this.settings.position === "right"
        ? this.settings.position : cfg.position,
      placeholder: cfg.placeholder,
    });
    this.conversationId = this.store.conversation(this.owner);
    this.renderTranscript();
    this.updateControls();
    this.view.mount();
    addEventListener("storage", (e) => this.onStorage(e));
    const code = answer.body && answer.body.error && answer.body.error.code;
    if (answer.status !== 200 && FATAL[code]) this.refuse(code);
    this.emit("ready");
    // A reply was streaming when the page went away: follow it again at once.
    if (!this.fatal && this.conversationId && this.store.hasPending()) this.conn.start();
    if (this.wantOpen) this.open(this.wantOpen);
  }

  socketUrl() {
    const url = new URL(`${this.base}/ws/chat/`, location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("key", this.key);
    url.searchParams.set("batch", "1"); // token frames may carry several tokens (`count`)
    if (this.locale) url.searchParams.set("locale", this.locale); // the assistant is asked to answer in it
    url.searchParams.set("page", location.origin + location.pathname); // the inbox's side panel; no query
    this.socketVisitor = this.store.visitor;
    if (this.socketVisitor) url.searchParams.set("visitor", this.socketVisitor);
    if (this.user) {
      url.searchParams.set("user", this.user.id);
      if (this.user.hash) url.searchParams.set("user_hash", this.user.hash);
      if (this.user.name) url.searchParams.set("user_name", this.user.name);
      if (this.user.email) url.searchParams.set("user_email", this.user.email);
    }
    return url.href;
  }

  _session(op, value) {
    try {
      if (op === "get") return sessionStorage.getItem(this.openKey);
      if (op === "set") sessionStorage.setItem(this.openKey, value);
      else sessionStorage.removeItem(this.openKey);
    } catch { /* unavailable: the panel just starts closed */ }
    return null;
  }

  // The visitor's actions ---------------------------------------------------------------

  send() {
    const text = this.view.input.value.trim();
    if (!text || this.fatal || this.active || this.sent) return;
    this.feedback.cancel();
    this.view.input.value = "";
    this.view.fitInput();
    const local = { id: `local:${++localIds}`, role: "user", text, status: "done", local: true, index: -1 };
    this.add(local);
    this.view.addMessage(local);
    this.view.scrollToEnd();
    this.sent = { text, local, transmitted: false };
    if (this.alertKind === "error") this.setAlert(null);
    this.transmit();
    this.updateControls();
  }

  transmit() {
    const s = this.sent;
    s.transmitted = this.conn.send({ type: "message", text: s.text, conversation: this.conversationId });
    if (!s.transmitted) this.conn.start(); // sent when the socket opens
  }

  stop() {
    if (this.active) this.conn.send({ type: "cancel", message: this.active.id });
  }

  newConversation({ focus = true } = {}) {
    if (this.active) {
      this.conn.send({ type: "cancel", message: this.active.id });
      this.store.dropPending(this.active.id);
    }
    this.sent = null;
    this.store.setConversation(this.owner, null);
    this.switchConversation(null);
    if (this.alertKind === "error") this.setAlert(null);
    if (focus && this.view) this.view.focusInput();
  }

  // The conversation --------------------------------------------------------------------

  add(m) {
    this.messages.push(m);
    if (!m.local) this.byId.set(m.id, m);
  }

  switchConversation(id) {
    this.conversationId = id;
    this.messages = [];
    this.byId.clear();
    this.active = null;
    if (!this.view) return;
    this.view.setStatus(null);
    this.handover.reset();
    this.renderTranscript();
    this.updateControls();
    if (id && this.conn.isOpen) this.requestHistory();
  }

  renderTranscript() {
    this.view.clearLog();
    this.view.addMessage({ role: "assistant", text: this.greeting, status: "done" });
    for (const m of this.messages) this.view.addMessage(m);
    this.handover.place(this.conversationId); // the offline form stays where it belongs
    this.view.scrollToEnd();
  }

  requestHistory() {
    if (this.conversationId) this.conn.send({ type: "history", conversation: this.conversationId });
  }

  resume(m) {
    if (m.resumedAt === m.index && m.resumeSent) return; // asked already from here
    m.resumedAt = m.index;
    m.resumeSent = this.conn.send({ type: "resume", message: m.id, after: m.index });
  }

  setUnread(n) {
    this.unread = n;
    if (this.view) this.view.setUnread(n);
  }

  setAlert(text, kind = "error") {
    this.alertKind = text ? kind : null;
    if (this.view) this.view.setAlert(text || "");
  }

  updateControls() {
    if (!this.view) return;
    this.view.setControls({ streaming: !!this.active, sending: !!this.sent, enabled: !this.fatal });
    if (!this.active) this.view.setStatus(null);
  }

  scheduleRender(m) {
    this.dirty.add(m);
    if (this.raf) return;
    this.raf = requestAnimationFrame(() => {
      this.raf = 0;
      for (const d of this.dirty) this.view.renderMessage(d, { streaming: !FINAL.has(d.status) });
      this.dirty.clear();
    });
  }

  showError(code, frame = {}) {
    let text;
    if (code === "rate_limited") {
      const s = frame.retry_after;
      text = typeof s === "number" && s < 3600
        ? this.t("rateLimited", { n: Math.max(1, Math.ceil(s)) }) : this.t("rateLimitedLater");
    } else {
      text = this.t(TEXTS[code] || "failed");
    }
    this.setAlert(text);
    this.emit("error", { code, message: text });
  }

  refuse(code) {
    if (this.fatal === code && this.alertKind === "fatal") return;
    this.fatal = code;
    const text = code === "origin_not_allowed"
      ? this.t("originNotAllowed", { origin: location.origin }) : this.t(FATAL[code] || "unavailable");
    if (this.sent) this.unsend();
    this.active = null;
    this.setAlert(text, "fatal");
    this.updateControls();
    this.emit("error", { code, message: text });
  }

  /** A message the server refused (or never got): its bubble goes, its text comes back. */
  unsend() {
    const { local, text } = this.sent;
    this.sent = null;
    this.messages = this.messages.filter((m) => m !== local);
    this.view.removeMessage(local);
    if (!this.view.input.value) {
      this.view.input.value = text;
      this.view.fitInput();
    }
    return text;
  }

  // The socket ---------------------------------------------------------------------------

  onOpen() {
    if (this.alertKind === "offline") this.setAlert(null);
    this.byId.forEach((m) => { m.resumeSent = false; });
    // A message sent on the old socket and not acknowledged was lost, or stored: its text
    // goes back into the box, and the transcript says which (onHistory).
    if (this.sent && this.sent.transmitted) this.lost = this.unsend();
    this.requestHistory();
    if (this.sent) this.transmit();
    if (this.handover.asking && !this.handover.askSent) this.handover.ask(this.conversationId); // asked while down
    this.updateControls();
  }

  onDown(ms) {
    if (this.fatal) return;
    this.setAlert(this.t("offline", { n: Math.max(1, Math.round(ms / 1000)) }), "offline");
  }

  onStorage(e) {
    if (!this.store.isStateKey(e.key)) return;
    // Another tab of the site sent a message or started over: show what it shows.
    if (!this.conn.stopped && this.store.visitor !== this.socketVisitor) this.conn.restart(); // it reset()
    const id = this.store.conversation(this.owner);
    if (id !== this.conversationId) this.switchConversation(id);
    else if (id && this.conn.isOpen) this.requestHistory();
    if (id && this.view.isOpen && !this.fatal) this.conn.start();
  }

  /** The server issued this visitor a signed id: keep it for every later connect. */
  onVisitor(f) {
    if (typeof f.token !== "string" || !f.token) return;
    this.socketVisitor = f.token;
    this.store.setVisitor(f.token);
    if (this.gotVisitor) this.gotVisitor();
  }

  onFrame(f) {
    switch (f.type) {
      case "visitor": return this.onVisitor(f);
      case "history": return this.onHistory(f);
      case "conversation": return this.onConversation(f);
      case "start": return this.onStart(f);
      case "status": return this.onStatus(f);
      case "token": return this.onToken(f);
      case "end": return this.onEnd(f);
      case "error": return this.onError(f);
      case "received": return this.onStart(f, 1);
      case "handoff": return this.onHandoff(f);
      case "agent_message": return this.onAgent(f);
      case "typing": return this.onTyping(f);
      case "action": return this.onAction(f);
      case "offline_received": return this.onOfflineReceived(f);
      case "feedback_received": return this.byId.has(f.message) && this.feedback.rated(this.byId.get(f.message));
      case "csat_received": return this.feedback.done(f.conversation);
      case "attachment_sent": return this.onFileSent(f);
      default: return undefined;
    }
  }

  onHistory(f) {
    if (f.conversation !== this.conversationId || !Array.isArray(f.messages)) return;
    const next = [];
    const ended = []; // replies this page was following that ended while it was not listening
    for (const s of f.messages) {
      let m = this.byId.get(s.id);
      if (m && m.role === "assistant" && !FINAL.has(m.status) && FINAL.has(s.status) && s.status !== "failed") {
        ended.push([m, s.finish_reason]);
      }
      if (!m) m = { id: s.id, role: s.role, text: "", status: s.status, index: -1, author: s.author };
      if (FINAL.has(s.status)) {
        Object.assign(m, { text: s.text || "", status: s.status, sources: s.sources, finish: s.finish_reason,
          attachments: this.fileLinks(s.attachments) });
        this.store.dropPending(s.id);
      } else if (!FINAL.has(m.status) && m.index < 0) {
        // Still being written: continue from what this page had (kept with its index).
        const p = this.store.pending(s.id);
        if (p && Number.isInteger(p.i) && typeof p.t === "string") Object.assign(m, { text: p.t, index: p.i });
      }
      next.push(m);
    }
    const users = f.messages.filter((s) => s.role === "user");
    if (this.lost && users.length && users[users.length - 1].text === this.lost
        && this.view.input.value === this.lost) {
      this.view.input.value = ""; // it was stored after all
    }
    this.lost = null;
    this.onHandoff({ ...f, state: f.handoff, type: "handoff" }, 1);
    const unsent = this.messages.filter((m) => m.local && !m.stored);
    this.messages = [];
    this.byId.clear();
    [...next, ...unsent].forEach((m) => this.add(m));
    this.renderTranscript();
    const streaming = next.filter((m) => m.role === "assistant" && !FINAL.has(m.status));
    streaming.forEach((m) => this.resume(m));
    this.active = streaming.length ? streaming[streaming.length - 1] : null;
    this.updateControls();
    if (this.active) this.view.setStatus(this.active.text ? null : "typing");
    ended.forEach(([m, reason]) => this.ended(m, reason));
  }

  onConversation(f) {
    if (!(this.sent || this.handover.asking) || typeof f.id !== "string") return;
    if (f.id !== this.conversationId) {
      this.conversationId = f.id;
      this.store.setConversation(this.owner, f.id);
    }
  }

  onStart(f, held) {
    const sent = this.sent;
    this.sent = null;
    if (sent) sent.local.stored = true;
    if (held) { // a person answers: stored for them, no reply follows
      this.updateControls();
      if (sent) this.emit("message", { role: "user", text: sent.text, conversation: this.conversationId });
      return;
    }
    const m = { id: f.message, role: "assistant", text: "", status: "queued", index: -1 };
    this.add(m);
    this.view.addMessage(m);
    this.active = m;
    this.store.setPending(m.id, -1, "");
    this.store.touch(); // other tabs: catch up
    this.updateControls();
    this.view.setStatus("typing");
    if (sent) this.emit("message", { role: "user", text: sent.text, conversation: this.conversationId });
  }

  onStatus(f) {
    const m = this.active;
    if (!m || f.message !== m.id || m.text) return;
    // "queued": no worker serves the tenant's pool. A later "prefilling" only says the
    // request moved on to that pool's queue, so it still waits until a token comes.
    m.queued = m.queued || f.state === "queued";
    this.view.setStatus(m.queued ? "queued" : "typing");
  }

  onToken(f) {
    const m = this.byId.get(f.message);
    if (!m || FINAL.has(m.status) || !Number.isInteger(f.index)) return;
    if (f.index <= m.index) return; // had it already (a resume overlaps what was seen)
    if (f.index !== m.index + 1) { this.resume(m); return; } // a gap: ask from what we have
    const count = Number.isInteger(f.count) && f.count > 0 ? f.count : 1; // consecutive tokens in one frame
    m.text += typeof f.text === "string" ? f.text : "";
    m.index = f.index + count - 1;
    m.status = "decoding";
    this.store.setPending(m.id, m.index, m.text);
    if (m === this.active && m.text) this.view.setStatus(null);
    this.scheduleRender(m);
  }

  // An action the assistant called (docs/actions.md): its reply becomes the action's
  // status line ("Looking up your order…"); the reply that continues after the action
  // comes as a start frame of its own. The call itself is never sent to the page.
  onAction(f) {
    const m = this.byId.get(f.message);
    if (m && typeof f.text === "string" && f.text) this.actionLine(m, f.text);
  }

  actionLine(m, text) {
    m.role = "action";
    m.text = text;
    if (m.el) m.el.className = "msg action";
    if (FINAL.has(m.status)) this.view.renderMessage(m);
    else { m.status = "done"; this.finish(m); }
    if (text !== "…") this.view.announce(text);
  }

  onEnd(f) {
    const m = this.byId.get(f.message);
    if (!m || FINAL.has(m.status)) return;
    if (f.finish_reason === "tool_calls") { this.actionLine(m, m.role === "action" ? m.text : "…"); return; }
    m.status = f.finish_reason === "cancelled" ? "cancelled" : "done";
    m.finish = f.finish_reason; // "length": cut short by the token budget, and marked so
    if (Array.isArray(f.sources)) m.sources = f.sources;
    this.finish(m);
    this.ended(m, f.finish_reason);
  }

  // A reply this page followed has ended (its `end` frame, or the transcript after a
  // reconnect when it ended meanwhile): read out, counted unread while the panel is
  // closed, and told to the site's on("message") handlers.
  ended(m, finishReason) {
    this.view.announce(this.view.textOf(m));
    this.feedback.later();
    if (!this.view.isOpen) this.setUnread(this.unread + 1);
    this.emit("message", { id: m.id, role: "assistant", text: m.text, conversation: this.conversationId,
      finish_reason: finishReason });
  }

  // A person of the site's team (docs/protocol.md: handoff, agent_message, typing).
  onHandoff(f, quiet) {
    if (f.conversation !== this.conversationId) return;
    const before = this.view.notice.textContent;
    const n = this.handover.apply(f);
    if (!quiet && n.text && n.text !== before) this.view.announce(n.text, ""); // screen readers hear it
    if (f.state === "resolved") this.feedback.ask(); // a person resolved it: how did we do?
    this.handover.place(this.conversationId);
    if (!quiet) this.view.scrollToEnd();
  }

  onOfflineReceived(f) {
    if (!this.offline.received(f.conversation) || f.conversation !== this.conversationId) return;
    this.handover.place(this.conversationId); // what was sent, in place of the form
    this.view.announce(this.t("offlineSent"), "");
  }

  onAgent(f) {
    if (f.conversation !== this.conversationId || this.byId.has(f.id)) return;
    const m = { id: f.id, role: "agent", text: f.text, status: "done", index: -1, author: f.author,
      attachments: this.fileLinks(f.attachments) };
    this.add(m);
    this.view.addMessage(m);
    this.view.scrollToEnd();
    this.view.setStatus(null);
    this.view.announce(f.text, `${f.author}:`);
    if (!this.view.isOpen) this.setUnread(this.unread + 1);
    this.emit("message", { id: f.id, role: "agent", text: f.text, author: f.author, conversation: this.conversationId });
  }

  // Files (docs/attachments.md): uploaded over HTTP, then sent by reference on the socket.
  async attach(file) {
    if (this.fatal || !this.files) return;
    this.setAlert(null);
    this.view.setStatus("uploading");
    try {
      // A new visitor's id comes with the socket's first frame ("visitor"): wait for it, 10 s at most.
      if (!this.store.visitor) await new Promise((r) => { this.gotVisitor = r; this.conn.start(); setTimeout(r, 1e4); });
      const a = await upload({ base: this.base, key: this.key, visitor: this.store.visitor, user: this.user && this.user.id,
        userHash: this.user && this.user.hash, file, maxBytes: this.files.max_bytes });
      if (!this.conn.send({ type: "attachment", attachment: a.id, conversation: this.conversationId })) throw 0;
    } catch (e) {
      this.setAlert(this.t({ file_too_large: "fileTooLarge", file_type_not_allowed: "fileType" }[e.code]
        || "uploadFailed"));
    } finally {
      this.view.setStatus(null);
    }
  }

  fileLinks(files) {
    return Array.isArray(files) ? files.map((f) => ({ ...f, url: this.base + f.url })) : undefined;
  }

  onFileSent(f) {
    if (typeof f.conversation !== "string") return;
    if (f.conversation !== this.conversationId) {
      this.conversationId = f.conversation;
      this.store.setConversation(this.owner, f.conversation);
    }
    if (this.byId.has(f.message)) return;
    const m = { id: f.message, role: "user", text: "", status: "done", index: -1,
      attachments: this.fileLinks(f.attachments) };
    this.add(m);
    this.view.addMessage(m);
    this.view.scrollToEnd();
  }

  onTyping(f) {
    if (f.conversation !== this.conversationId || this.active) return;
    this.view.setStatus("personTyping", { n: f.name });
    clearTimeout(this.typingTimer);
    this.typingTimer = setTimeout(() => this.active || this.view.setStatus(null), 4e3);
  }

  finish(m) {
    this.store.dropPending(m.id);
    this.dirty.delete(m);
    this.view.renderMessage(m);
    if (this.active === m) this.active = null;
    this.updateControls();
  }

  onError(f) {
    const m = this.byId.get(f.message);
    if (m) { // about one reply
      if (f.code === "stream_failed" && (m.retries = (m.retries || 0) + 1) <= 3) {
        m.resumeSent = false; // following it failed on the server: ask again, a few times
        this.resume(m);
        return;
      }
      if (f.code === "stream_expired") { this.requestHistory(); return; }
      m.status = "failed";
      this.finish(m);
      this.showError(f.code, f);
      return;
    }
    if (FATAL[f.code]) { this.refuse(f.code); return; }
    if (f.code === "conversation_not_found") {
      // Gone, or not this visitor's: start a new one (with the message being sent, if any).
      const sent = this.sent;
      this.store.setConversation(this.owner, null);
      this.switchConversation(null);
      if (sent) {
        this.sent = sent;
        this.add(sent.local);
        this.view.addMessage(sent.local);
        this.transmit();
        this.updateControls();
      }
      return;
    }
    if (f.code === "message_not_found") return; // a reply to resume or stop that is gone
    if (f.code === "csat_already_given") { this.feedback.done(this.conversationId); return; }
    if (this.offline.pending) this.offline.refused(); // the offline form's message, if it was that
    if (this.sent && MESSAGE_REFUSALS.has(f.code)) this.unsend();
    this.updateControls();
    this.showError(f.code, f);
  }
}
