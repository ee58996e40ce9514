// The offline form: when nobody of the team can take the conversation (out of business
// hours, or no agent online), an e-mail address and a message for the team, at the end of
// the conversation. It belongs to the conversation's state, not to the log's DOM: the app
// places it again after every render of the transcript (the same element, so what the
// visitor typed stays), a reload shows it again (the history frame says `offline`), and
// once the server has the message, what was sent takes its place, after reloads too
// (kept in the Store).
import { h, nextId } from "./dom.js";

export class OfflineForm {
  /** @param {{t: Function, store: import("./store.js").Store, send: Function}} deps:
   * send(conversation, email, text) is true when the frame went out */
  constructor({ t, store, send }) {
    this.t = t;
    this.store = store;
    this.send = send;
    this.el = null;
    this.key = ""; // which conversation and kind the element shows
    this.pending = null; // {conversation, email, text}: sent, not acknowledged yet
  }

  /** The element for the end of `conversation`'s log: the form, or what was sent. */
  element(conversation, { closed = false } = {}) {
    const sent = this.store.offlineSent(conversation);
    const key = `${conversation}:${sent ? "sent" : closed ? "closed" : "open"}`;
    if (!this.el || this.key !== key) {
      this.hide(); // the form that the summary (or the other kind) replaces
      this.key = key;
      this.el = sent ? this.summary(sent) : this.form(conversation, closed);
    }
    return this.el;
  }

  /** Off the page (a person took the conversation, or another conversation shows). */
  hide() {
    if (this.el) this.el.remove();
  }

  /** The server has it (`offline_received`): true when it was this form's. */
  received(conversation) {
    const p = this.pending;
    if (!p || p.conversation !== conversation) return false;
    this.pending = null;
    this.store.setOfflineSent(conversation, p.email, p.text);
    return true;
  }

  /** The server refused it (an error frame): the visitor may correct it and send again. */
  refused() {
    this.pending = null;
    const button = this.el && this.el.querySelector("button");
    if (button) button.disabled = false;
  }

  form(conversation, closed) {
    const t = this.t, id = nextId("tandem-off");
    const email = h("input", { id: `${id}-e`, type: "email", name: "email", autocomplete: "email", maxlength: "254",
      required: true });
    const text = h("textarea", { id: `${id}-t`, name: "text", rows: "3", maxlength: "4000", required: true });
    const button = h("button", { class: "btn", type: "submit", text: t("offlineSend") });
    return h("form", { class: "msg offline", "aria-labelledby": `${id}-a`, onsubmit: (e) => {
      e.preventDefault();
      const sent = { conversation, email: email.value.trim(), text: text.value.trim() };
      if (!sent.email || !sent.text) return;
      if (this.send(conversation, sent.email, sent.text)) {
        this.pending = sent;
        button.disabled = true;
      }
    } },
    h("p", { id: `${id}-a`, text: t(closed ? "offlineAskClosed" : "offlineAsk") }),
    h("label", { for: email.id, text: t("email") }), email,
    h("label", { for: text.id, text: t("offlineNote") }), text,
    button);
  }

  summary(sent) {
    const t = this.t;
    return h("div", { class: "msg offline sent" },
      h("p", { text: t("offlineSent") }),
      h("p", { class: "note", text: t("offlineYouSent", { n: sent.email }) }),
      h("blockquote", { text: sent.text }));
  }
}
