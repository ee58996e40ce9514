// The widget's DOM: a <tandem-chat> element with an open shadow root (open, so that
// assistive technology and automated tests reach inside). Built with DOM calls, never
// from HTML strings: only sanitised reply Markdown is parsed (markdown.js), which keeps
// the widget working on pages with Trusted Types or a strict CSP.
import css from "./styles.css";
import { h, icon as svgIcon } from "./dom.js";
import { fileList } from "./attachments.js";
import { renderMarkdown } from "./markdown.js";

const ICONS = {
  chat: "M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2Zm3 6.5a1.5 1.5 0 1 0 0 .01Zm5 0a1.5 1.5 0 1 0 0 .01Zm5 0a1.5 1.5 0 1 0 0 .01Z",
  close: "M6.4 5 12 10.6 17.6 5 19 6.4 13.4 12l5.6 5.6-1.4 1.4-5.6-5.6L6.4 19 5 17.6l5.6-5.6L5 6.4Z",
  // Material's thumb up; thumb down is the same, turned (styles.css).
  thumb: "M2 21h4V9H2v12Zm20-11a2 2 0 0 0-2-2h-6.3l1-4.6v-.3c0-.4-.2-.8-.4-1.1L13.2 1 6.6 7.6C6.2 8 6 8.5 6 9v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1.2-.7v-2Z",
  more: "M5 10a2 2 0 1 1 0 4 2 2 0 0 1 0-4Zm7 0a2 2 0 1 1 0 4 2 2 0 0 1 0-4Zm7 0a2 2 0 1 1 0 4 2 2 0 0 1 0-4Z",
};
const icon = (name) => svgIcon(ICONS[name]);

/** Where a key moves focus in a menu of `count` items from item `index` (-1: none):
 * arrows wrap around, Home and End go to the ends; null for any other key. */
export function menuTarget(key, index, count) {
  const to = { ArrowDown: index + 1, ArrowUp: Math.max(index, 0) - 1 + count, Home: 0, End: count - 1 }[key];
  return count && to !== undefined ? to % count : null;
}

function styleSheet(root) {
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    root.adoptedStyleSheets = [sheet]; // not subject to the page's style-src CSP
  } catch {
    root.append(h("style", { text: css }));
  }
}

// A cited article as a link, where its URL is one a page may open: http(s) only, so a
// stored `javascript:` or `data:` URL never becomes a link.
function sourceLink(s) {
  let u;
  try { u = new URL(s.url); } catch { return null; }
  if (u.protocol !== "https:" && u.protocol !== "http:") return null;
  return h("li", {}, h("a", { href: u.href, target: "_blank", rel: "noopener", text: s.title || u.host }));
}

let uid = 0;
const writing = (m) => m.role === "assistant" && !["done", "failed", "cancelled"].includes(m.status);

export class View {
  /** @param {{t: Function, on: Object}} opts: the translator and the UI's event handlers */
  constructor({ t, on }) {
    this.t = t;
    this.on = on;
    const id = `tandem-${++uid}`;
    this.host = document.createElement("tandem-chat");
    const shadow = this.host.attachShadow({ mode: "open" });
    this.shadow = shadow;
    styleSheet(shadow);

    this.badge = h("span", { class: "badge", "aria-hidden": "true", hidden: true });
    this.unreadText = h("span", { class: "sr", id: `${id}-unread` });
    this.launcher = h("button", {
      class: "launcher", type: "button", "aria-label": t("open"), "aria-expanded": "false",
      "aria-controls": `${id}-panel`, onclick: () => on.open(),
    }, icon("chat"), this.badge);

    this.title = h("h2", { id: `${id}-title` });
    this.menuButton = h("button", {
      class: "icon", type: "button", "aria-label": t("options"), "aria-haspopup": "menu",
      "aria-expanded": "false", "aria-controls": `${id}-menu`, onclick: () => this.toggleMenu(),
    }, icon("more"));
    const item = (text, fn) => h("button", { type: "button", role: "menuitem", tabindex: "-1", text,
      onclick: () => { this.toggleMenu(false); fn(); } });
    this.menuItems = [item(t("newConversation"), () => on.newConversation()), item(t("person"), () => on.person())];
    this.menu = h("ul", { class: "menu", role: "menu", id: `${id}-menu`, "aria-label": t("options"), hidden: true },
      ...this.menuItems.map((b) => h("li", { role: "none" }, b)));
    this.closeButton = h("button", { class: "icon", type: "button", "aria-label": t("close"),
      onclick: () => on.close() }, icon("close"));

    this.log = h("div", { class: "log", role: "region", "aria-label": t("conversation"), tabindex: "0" });
    this.status = h("div", { class: "status", role: "status" });
    this.alert = h("div", { class: "alert", role: "alert" });
    // The hand-over's notice (waiting, joined, away): calm, not an error; read out through
    // the live region below as it changes (App.onHandoff).
    this.notice = h("div", { class: "notice" });
    this.personButton = h("button", { class: "btn secondary", type: "button", text: t("person"),
      onclick: () => on.person() });
    this.live = h("div", { class: "sr", "aria-live": "polite" });

    this.input = h("textarea", { rows: "1", "aria-label": t("message"), placeholder: t("placeholder"),
      enterkeyhint: "send", maxlength: "8000" });
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        on.send();
      }
    });
    this.input.addEventListener("input", () => { this.fitInput(); on.type(); });
    this.sendButton = h("button", { class: "btn", type: "submit", text: t("send") });
    this.stopButton = h("button", { class: "btn secondary", type: "button", text: t("stop"), hidden: true,
      onclick: () => on.stop() });
    const form = h("form", { onsubmit: (e) => { e.preventDefault(); on.send(); } },
      this.input, this.stopButton, this.sendButton);

    this.panel = h("section", { class: "panel", id: `${id}-panel`, role: "dialog",
      "aria-labelledby": `${id}-title`, hidden: true },
    h("header", {}, this.title, this.menuButton, this.closeButton, this.menu),
    this.log, this.status, this.notice, this.alert, this.personBar = h("div", { class: "bar", hidden: true },
      this.personButton), form, this.live);
    this.panel.addEventListener("keydown", (e) => {
      if (e.key !== "Escape") return;
      e.stopPropagation();
      if (!this.menu.hidden) {
        this.toggleMenu(false);
        this.menuButton.focus();
      } else {
        on.close();
      }
    });
    // The menu closes when focus or a click goes elsewhere.
    this.menu.addEventListener("focusout", (e) => {
      if (!this.menu.contains(e.relatedTarget) && e.relatedTarget !== this.menuButton) this.toggleMenu(false);
    });
    this.panel.addEventListener("pointerdown", (e) => {
      if (!this.menu.hidden && !this.menu.contains(e.target) && !this.menuButton.contains(e.target)) {
        this.toggleMenu(false);
      }
    });
    // The menu pattern of WAI-ARIA: arrows move between the items, Home and End to the ends.
    this.menu.addEventListener("keydown", (e) => {
      const items = this.menuItems.filter((b) => !b.parentNode.hidden);
      const next = menuTarget(e.key, items.indexOf(this.shadow.activeElement), items.length);
      if (next === null) return;
      e.preventDefault();
      items[next].focus();
    });

    this.root = h("div", { class: "root" }, this.launcher, this.unreadText, this.panel);
    shadow.append(this.root);
    this.launcher.setAttribute("aria-describedby", this.unreadText.id);
  }

  mount() {
    (document.body || document.documentElement).append(this.host);
  }

  setTheme({ title, color, textColor, position, placeholder }) {
    this.root.style.setProperty("--tc", color);
    this.root.style.setProperty("--tf", textColor);
    this.root.classList.toggle("left", position === "left");
    this.title.textContent = title;
    if (placeholder) this.input.placeholder = placeholder;
  }

  get isOpen() { return !this.panel.hidden; }

  get hasFocus() { return this.shadow.activeElement != null; }

  show(open) {
    this.panel.hidden = !open;
    this.launcher.hidden = open;
    this.launcher.setAttribute("aria-expanded", String(open));
    if (open) this.scrollToEnd();
    else this.toggleMenu(false);
  }

  toggleMenu(open = this.menu.hidden) {
    this.menu.hidden = !open;
    this.menuButton.setAttribute("aria-expanded", String(open));
    if (open) this.menuItems[0].focus();
  }

  setUnread(n) {
    this.badge.hidden = n === 0;
    this.badge.textContent = n > 9 ? "9+" : String(n);
    this.unreadText.textContent = n === 0 ? "" : n === 1 ? this.t("unread1") : this.t("unreadN", { n });
  }

  clearLog() {
    this.log.replaceChildren();
    this.tail = null; // gone with the rest: placed again after the render (Handover.place)
  }

  scrollToEnd() { this.log.scrollTop = this.log.scrollHeight; }

  /** A bubble for `m` ({role, text, status}), at the end of the log or before `before`. */
  addMessage(m, before = this.tail || null) {
    const el = h("div", { class: `msg ${m.role}` });
    m.el = el;
    this.log.insertBefore(el, before);
    this.renderMessage(m, { streaming: writing(m) });
    return el;
  }

  renderMessage(m, { streaming = false } = {}) {
    const el = m.el;
    if (!el) return;
    const atBottom = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 40;
    if (m.role === "user") {
      el.textContent = m.text;
    } else {
      const body = h("div", { class: "md" });
      body.append(renderMarkdown(m.text, { streaming }));
      el.replaceChildren(body);
      if (m.author) el.prepend(h("span", { class: "who", text: m.author }));
      const links = (m.sources || []).map(sourceLink).filter(Boolean);
      if (links.length) el.append(h("ul", { class: "src", "aria-label": this.t("sources") }, ...links));
    }
    // A reply with no text yet is the typing indicator's, not an empty bubble.
    el.hidden = !m.text && writing(m);
    if (m.attachments && m.attachments.length) el.append(fileList(m.attachments, "", this.t("files")));
    el.classList.toggle("failed", m.status === "failed");
    if (m.finish === "length" && m.status === "done") el.append(h("span", { class: "note cut", text: this.t("cutOff") }));
    if (m.status === "failed" || m.status === "cancelled") {
      el.append(h("span", { class: "note", text: this.t(m.status === "failed" ? "replyFailed" : "stopped") }));
    }
    if (m.role === "assistant" && m.id && !m.local && m.status === "done" && m.text) el.append(this.rating(m));
    if (atBottom) this.log.scrollTop = this.log.scrollHeight;
  }

  removeMessage(m) { if (m.el) m.el.remove(); }

  /** 👍/👎 under a finished reply (toggle buttons named for screen readers); once the
   * server has a rating, an optional comment, then thanks. */
  rating(m) {
    const t = this.t;
    const thumb = (value, label) => h("button", {
      type: "button", class: value, "aria-label": t(label), title: t(label),
      "aria-pressed": String(m.rating === value), onclick: () => this.on.rate(m, value),
    }, icon("thumb"));
    const bar = h("div", { class: "fb", role: "group", "aria-label": t("rateReply") },
      thumb("up", "helpful"), thumb("down", "notHelpful"));
    if (m.feedback === "commented") {
      bar.append(h("span", { class: "note", text: t("feedbackThanks") }));
    } else if (m.feedback === "rated") {
      const comment = h("input", { maxlength: 2000, "aria-label": t("tellMore"), placeholder: t("tellMore") });
      bar.append(h("form", { onsubmit: (e) => {
        e.preventDefault();
        this.on.rate(m, m.rating, comment.value);
      } }, comment, h("button", { class: "btn secondary", text: t("sendFeedback") })));
    }
    return bar;
  }

  /** "How did we do?": a score 1-5 (radio buttons in a fieldset) and a comment, at the
   * end of the log; `send(score, comment)` on submit. */
  csatForm(send) {
    const t = this.t, name = `csat-${++uid}`;
    const scores = [1, 2, 3, 4, 5].map((n) => h("label", {},
      h("input", { type: "radio", name, value: n, required: true, "aria-label": t("csatScore", { n }) }),
      h("span", { "aria-hidden": "true", text: n })));
    const comment = h("textarea", { maxlength: 2000, "aria-label": t("csatComment"), placeholder: t("csatComment") });
    const f = h("form", { class: "msg csat", onsubmit: (e) => {
      e.preventDefault();
      const picked = f.querySelector("input:checked");
      if (picked) send(Number(picked.value), comment.value);
    } },
    h("fieldset", {}, h("legend", { text: t("csatAsk") }), ...scores),
    comment, h("button", { class: "btn", text: t("sendRating") }));
    this.log.append(f);
    this.scrollToEnd();
    return f;
  }

  /** Keep `el` (the offline form) at the log's end, new messages going before it; null: none. */
  setTail(el) {
    if (this.tail && this.tail !== el) this.tail.remove();
    this.tail = el;
    if (el) this.log.append(el);
  }

  /** The typing indicator: "queued", "typing", or null to hide it. */
  setStatus(state, vars) {
    if (!state) {
      this.status.replaceChildren();
      return;
    }
    const dots = h("span", { class: "dots", "aria-hidden": "true" }, h("span"), h("span"), h("span"));
    this.status.replaceChildren(dots, h("span", { text: this.t(state, vars) }));
  }

  /** The hand-over's notice; `kind` ("waiting", "joined", "closed") styles it. */
  setNotice(text, kind = "") {
    if ((this.notice.textContent || "") !== (text || "")) this.notice.textContent = text || "";
    this.notice.dataset.kind = kind;
  }

  setPersonButton(shown) { this.personBar.hidden = !shown; }

  setAlert(text) {
    if ((this.alert.textContent || "") !== (text || "")) this.alert.textContent = text || "";
  }

  /** Say a finished reply to screen readers (the streaming bubble itself is not live),
   * after who said it: the assistant unless told ("" for the widget's own notices). */
  announce(text, who = this.t("assistantSays")) {
    this.live.replaceChildren(h("p", { text: who ? `${who} ${text}` : text }));
  }

  /** Stop while a reply streams; Send while none does (and nothing is on its way). */
  setControls({ streaming, sending, enabled }) {
    this.stopButton.hidden = !streaming;
    this.sendButton.disabled = streaming || sending || !enabled;
    this.input.disabled = !enabled;
  }

  fitInput() {
    const el = this.input;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight + 2, 140)}px`;
  }

  focusInput() { this.input.focus(); }

  focusLauncher() { this.launcher.focus(); }

  textOf(m) { return m.el ? m.el.textContent : m.text; }
}
