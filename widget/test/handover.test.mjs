import assert from "node:assert/strict";
import { test } from "node:test";

import { Handover, handoverNotice } from "../src/app/handover.js";
import { translator } from "../src/app/i18n.js";
import en from "../src/i18n/en.json";

const t = translator(en);

test("waiting for a person says so while someone can take it", () => {
  const n = handoverNotice({ state: "pending_human" }, t);
  assert.deepEqual(n, { person: true, form: false, text: "Waiting for a person from the team…", kind: "waiting" });
});

test("with nobody online the offline form replaces the waiting notice: nobody is promised", () => {
  const n = handoverNotice({ state: "pending_human", offline: true }, t);
  assert.equal(n.form, true);
  assert.equal(n.text, "");
});

test("out of business hours the form comes with when the team is back", () => {
  const n = handoverNotice({ state: "pending_human", offline: true, closed: true, back_at: "2026-12-07T09:00:00+01:00" },
    t, (iso) => `<${iso}>`);
  assert.equal(n.form, true);
  assert.equal(n.kind, "closed");
  assert.equal(n.text, "Our team is away. We are back on <2026-12-07T09:00:00+01:00>.");
  assert.equal(handoverNotice({ state: "pending_human", offline: true, closed: true }, t).text, "Our team is away right now.");
});

test("a person who joined is named, or said to be from the team after a reload", () => {
  assert.equal(handoverNotice({ state: "human", agent: "Maya" }, t).text, "Maya joined the conversation.");
  assert.equal(handoverNotice({ state: "human" }, t).text, "A person from the team has joined.");
  assert.deepEqual(handoverNotice({ state: "resolved" }, t), { person: false, form: false, text: "", kind: "" });
});

function fakes() {
  const calls = { notice: [], button: [], sent: [], tail: [] };
  const view = {
    setNotice: (text, kind) => calls.notice.push([text, kind]),
    setPersonButton: (shown) => calls.button.push(shown),
    setTail: (el) => calls.tail.push(el),
  };
  const offline = { element: (c, opts) => ({ c, opts }) };
  return { calls, view, offline };
}

test("the person button shows while the tenant has agents and nobody has the conversation", () => {
  const { calls, view, offline } = fakes();
  const h = new Handover({ t, view, offline, when: String, send: () => true });
  h.setAgents(false);
  h.setAgents(true);
  h.apply({ state: "pending_human" });
  h.apply({ state: "bot" });
  assert.deepEqual(calls.button, [false, true, false, true]);
});

test("the offline form is placed at the log's end while it belongs there, and goes after", () => {
  const { calls, view, offline } = fakes();
  const h = new Handover({ t, view, offline, when: String, send: () => true });
  h.apply({ state: "pending_human", offline: true, closed: true });
  h.place("c1");
  assert.deepEqual(calls.tail, [{ c: "c1", opts: { closed: true } }]);
  h.apply({ state: "human", agent: "Maya" });
  h.place("c1");
  assert.deepEqual(calls.tail.at(-1), null);
});

test("asking for a person sends the frame and remembers whether it went out", () => {
  const { view, offline } = fakes();
  const frames = [];
  let up = false;
  const h = new Handover({ t, view, offline, when: String, send: (f) => { frames.push(f); return up; } });
  assert.equal(h.ask("c1"), false);
  assert.ok(h.asking && !h.askSent);
  up = true;
  assert.equal(h.ask("c1"), true);
  assert.deepEqual(frames[1], { type: "handoff", conversation: "c1" });
  h.apply({ state: "pending_human" });
  assert.ok(!h.asking);
});
