// Feedback (docs/protocol.md: feedback, csat): 👍/👎 and a comment on a reply, and the
// conversation's CSAT score, asked once per conversation (remembered in the Store) after
// a person resolves it, or once the visitor is quiet for the tenant's idle minutes.

export class Feedback {
  /** @param {{app: object, idleMs: number}} opts: the App (its view, store, connection,
   * conversation and hand-over) and how long a quiet visitor waits for the CSAT question */
  constructor({ app, idleMs }) {
    this.app = app;
    this.idleMs = idleMs;
    this.timer = 0;
    this.csat = null;
  }

  _send(frame) {
    if (!this.app.conn.send(frame)) this.app.conn.start();
  }

  /** 👍/👎 of reply `m`, or its comment once rated; the server keeps the latest. */
  rate(m, rating, comment) {
    if (rating !== "up" && rating !== "down") return;
    const frame = { type: "feedback", message: m.id, rating };
    if (typeof comment === "string") {
      if (!comment.trim()) return;
      frame.comment = comment;
    }
    m.rating = rating;
    m.commenting = typeof comment === "string";
    this._send(frame);
    this.app.view.renderMessage(m);
  }

  rated(m) {
    m.feedback = m.commenting ? "commented" : "rated";
    this.app.view.renderMessage(m);
    if (m.commenting) this.app.view.announce(this.app.t("feedbackThanks"), "");
  }

  /** After a reply, when the assistant answers: ask for CSAT once the visitor is quiet. */
  later() {
    this.cancel();
    if (this.idleMs && !this.app.handover.person) this.timer = setTimeout(() => this.ask(), this.idleMs);
  }

  cancel() { clearTimeout(this.timer); }

  ask() {
    const { app } = this, id = app.conversationId;
    if (!id || app.fatal || app.store.csatGiven(id) || (this.csat && this.csat.isConnected)) return;
    this.csat = app.view.csatForm((score, comment) => {
      const frame = { type: "csat", conversation: id, score };
      if (comment.trim()) frame.comment = comment;
      this._send(frame);
    });
  }

  done(conversation) {
    const { app } = this;
    if (!conversation) return;
    app.store.setCsatGiven(conversation);
    if (conversation !== app.conversationId || !this.csat || !this.csat.isConnected) return;
    this.csat.replaceChildren(app.t("csatThanks"));
    app.view.announce(app.t("csatThanks"), "");
  }
}
