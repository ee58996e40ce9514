// A person of the site's team (docs/protocol.md: handoff, and the history's handoff
// fields). What the visitor is told: waiting for a person, who joined, or, when nobody
// can take it, the offline form instead of a promise (out of business hours: when the
// team is back). "Talk to a person" is a button while the tenant has agents and no
// person has the conversation.

/** What a `handoff` frame means for the visitor: {person, form, text, kind}. `when`
 * formats `back_at` for the visitor. */
export function handoverNotice(f, t, when = (iso) => iso) {
  const waiting = f.state === "pending_human", back = f.back_at && when(f.back_at);
  const [text, kind] = f.state === "human" ? [f.agent ? t("personJoined", { n: f.agent }) : t("personHere"), "joined"]
    : !waiting ? ["", ""]
      : !f.offline ? [t("waitingPerson"), "waiting"]
        : f.closed ? [back ? t("closedBack", { n: back }) : t("closedNow"), "closed"]
          : ["", ""]; // nobody online: the form says so, no notice promises anyone
  return { person: waiting || f.state === "human", form: waiting && !!f.offline, text, kind };
}

export class Handover {
  /** @param {{t: Function, view: object, offline: import("./offline.js").OfflineForm,
   *   when: Function, send: Function}} deps: send(frame) is true when it went out */
  constructor({ t, view, offline, when, send }) {
    Object.assign(this, { t, view, offline, when, send });
    this.agents = false; // the tenant has people who answer (the widget config)
    this.person = false; // waiting for or talking with a person
    this.asking = false; // asked, no answer yet
    this.form = null; // {closed} while the offline form belongs at the log's end
  }

  setAgents(agents) {
    this.agents = !!agents;
    this.view.setPersonButton(this.agents && !this.person);
  }

  /** The visitor asks for a person in `conversation` (null: a new one). */
  ask(conversation) {
    this.asking = true;
    this.askSent = this.send({ type: "handoff", conversation });
    return this.askSent;
  }

  /** A `handoff` frame (or the history's fields) of the conversation shown. */
  apply(f) {
    this.asking = false;
    const n = handoverNotice(f, this.t, this.when);
    this.person = n.person;
    this.form = n.form ? { closed: !!f.closed } : null;
    this.view.setNotice(n.text, n.kind);
    this.view.setPersonButton(this.agents && !n.person);
    return n;
  }

  /** Another conversation shows: nothing of this one's hand-over stays. */
  reset() {
    this.apply({ state: "bot" });
    this.view.setTail(null);
  }

  /** Put the offline form (or what was sent) at the end of the log, where it stays. */
  place(conversation) {
    this.view.setTail(this.form && conversation ? this.offline.element(conversation, this.form) : null);
  }
}
