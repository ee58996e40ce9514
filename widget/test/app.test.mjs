// The App with its real modules over the DOM stand-in and a WebSocket the test drives:
// the hand-over's frames as docs/protocol.md has them.
import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";

import { installDom, memoryStorage } from "./dom.mjs";

class FakeSocket {
  static OPEN = 1;
  static all = [];
  constructor(url) { this.url = new URL(url); this.readyState = 0; this.sent = []; FakeSocket.all.push(this); }
  send(data) { this.sent.push(JSON.parse(data)); }
  close() { this.readyState = 3; }
  open() { this.readyState = 1; this.onopen(); }
  frame(f) { this.onmessage({ data: JSON.stringify(f) }); }
}

Object.assign(globalThis, {
  WebSocket: FakeSocket, addEventListener: () => {}, location: new URL("https://shop.example/page"),
});
installDom();
const { App } = await import("../src/app/app.js");
const { default: en } = await import("../src/i18n/en.json");

let app, sock;
async function boot(config = {}, settings = {}) {
  installDom();
  globalThis.localStorage = memoryStorage();
  globalThis.sessionStorage = memoryStorage();
  FakeSocket.all = [];
  app = new App({ key: "pk_test_app_module_", base: "https://tandem.test",
    config: Promise.resolve({ status: 200, body: { agents: true, i18n: { locale: "en", strings: en }, ...config } }) },
  settings);
  await new Promise((r) => setTimeout(r, 0));
  app.open();
  sock = FakeSocket.all[0];
  sock.open();
}
const log = () => app.view.log;
const offlineEl = () => log().querySelector(".offline");

beforeEach(() => boot());

test("the socket says the visitor's language and the person button shows for a tenant with agents", async () => {
  await boot({ i18n: { locale: "de", strings: { person: "Mit einer Person sprechen" } } });
  assert.equal(sock.url.searchParams.get("locale"), "de");
  assert.ok(!app.view.personBar.hidden);
  assert.equal(app.view.personButton.textContent, "Mit einer Person sprechen");
  assert.equal(app.view.host.getAttribute("lang"), "de");
  await boot({ agents: false });
  assert.ok(app.view.personBar.hidden);
});

test("asking for a person with nobody online shows the offline form, not a waiting promise", () => {
  app.view.personButton.click();
  assert.deepEqual(sock.sent.at(-1), { type: "handoff", conversation: null });
  sock.frame({ type: "conversation", id: "c1" });
  sock.frame({ type: "handoff", conversation: "c1", state: "pending_human", agent: "", offline: true });
  assert.ok(offlineEl());
  assert.equal(log().children.at(-1), offlineEl()); // at the end of the conversation
  assert.equal(app.view.notice.textContent, "");
  assert.ok(app.view.personBar.hidden);
});

test("the offline form survives the transcript's re-render (the history after a reconnect)", () => {
  sock.frame({ type: "conversation", id: "c1" });
  app.conversationId = "c1";
  sock.frame({ type: "handoff", conversation: "c1", state: "pending_human", offline: true });
  const form = offlineEl();
  form.querySelector("input").value = "ann@example.test";
  sock.frame({ type: "history", conversation: "c1", handoff: "pending_human", offline: true,
    messages: [{ id: "u1", role: "user", text: "talk to a human", status: "done" }] });
  assert.equal(offlineEl(), form);
  assert.equal(offlineEl().querySelector("input").value, "ann@example.test");
  assert.equal(log().children.at(-1), form);
});

test("out of hours the notice says when the team is back, calmly, and the form is there", () => {
  app.conversationId = "c1";
  sock.frame({ type: "handoff", conversation: "c1", state: "pending_human", offline: true, closed: true,
    back_at: "2030-01-07T09:00:00+01:00" });
  assert.match(app.view.notice.textContent, /^Our team is away\. We are back on .+\.$/);
  assert.equal(app.view.notice.dataset.kind, "closed");
  assert.equal(app.view.alert.textContent, "");
  assert.ok(offlineEl());
});

test("while the form shows, new messages go before it: it stays at the end", () => {
  app.conversationId = "c1";
  sock.frame({ type: "handoff", conversation: "c1", state: "pending_human", offline: true, closed: true });
  app.view.input.value = "Do you ship to Iceland?";
  app.send();
  sock.frame({ type: "start", message: "r1" });
  sock.frame({ type: "token", message: "r1", index: 0, text: "Yes." });
  sock.frame({ type: "end", message: "r1", finish_reason: "stop" });
  const kinds = log().children.map((c) => c.className);
  assert.deepEqual(kinds.slice(-3), ["msg user", "msg assistant", "msg offline"]);
});

test("what the visitor sent replaces the form once the server has it", () => {
  app.conversationId = "c1";
  sock.frame({ type: "handoff", conversation: "c1", state: "pending_human", offline: true });
  const [email, text] = offlineEl().querySelectorAll("input, textarea");
  email.value = "ann@example.test";
  text.value = "Call me back";
  offlineEl().querySelector("button").click();
  assert.deepEqual(sock.sent.at(-1), { type: "offline", conversation: "c1", email: "ann@example.test", text: "Call me back" });
  sock.frame({ type: "offline_received", conversation: "c1" });
  assert.equal(offlineEl().tagName, "DIV");
  assert.match(offlineEl().textContent, /Call me back/);
});

test("waiting with someone online says so; a person joining replaces it", () => {
  app.conversationId = "c1";
  sock.frame({ type: "handoff", conversation: "c1", state: "pending_human" });
  assert.equal(app.view.notice.textContent, "Waiting for a person from the team…");
  assert.equal(offlineEl(), null);
  assert.equal(app.view.live.textContent, "Waiting for a person from the team…"); // read out once
  sock.frame({ type: "handoff", conversation: "c1", state: "human", agent: "Maya" });
  assert.equal(app.view.notice.textContent, "Maya joined the conversation.");
  assert.equal(app.view.live.textContent, "Maya joined the conversation.");
});

test("a reply that ends at its token budget is marked as cut short", () => {
  app.view.input.value = "Tell me everything";
  app.send();
  sock.frame({ type: "conversation", id: "c1" });
  sock.frame({ type: "start", message: "r1" });
  sock.frame({ type: "token", message: "r1", index: 0, text: "Well" });
  sock.frame({ type: "end", message: "r1", finish_reason: "length" });
  const reply = app.byId.get("r1");
  assert.equal(reply.finish, "length");
  assert.ok(reply.el.querySelector(".cut"));
});

test("a widget whose configuration could not be fetched does not show", async () => {
  installDom();
  const warned = [];
  const warn = console.warn;
  console.warn = (...args) => warned.push(args.join(" "));
  try {
    const lost = new App({ key: "pk_test_app_module_", base: "https://tandem.test",
      config: Promise.resolve({ status: 0, body: null }) }, {});
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(lost.view, null);
    assert.equal(document.body.children.length, 0);
    assert.match(warned[0], /could not be fetched/);
  } finally {
    console.warn = warn;
  }
});

test("a panel opened by the page's settings leaves the focus on the page; a visitor's opening moves it in", async () => {
  installDom();
  globalThis.localStorage = memoryStorage();
  globalThis.sessionStorage = memoryStorage();
  const search = document.createElement("input"); // where the visitor is typing on the host page
  document.body.append(search);
  search.focus();
  const quiet = new App({ key: "pk_test_app_module_", base: "https://tandem.test",
    config: Promise.resolve({ status: 200, body: { i18n: { locale: "en", strings: en } } }) }, { open: true });
  await new Promise((r) => setTimeout(r, 0));
  assert.ok(quiet.view.isOpen);
  assert.equal(document.activeElement, search);
  assert.equal(quiet.view.shadow.activeElement, null);
  quiet.close();
  quiet.view.launcher.click(); // the visitor opens it
  assert.equal(document.activeElement, quiet.view.input);

  // Tandem.open() before the configuration has come: the page's own button, so focused once shown.
  installDom();
  const early = new App({ key: "pk_test_app_module_", base: "https://tandem.test",
    config: Promise.resolve({ status: 200, body: { i18n: { locale: "en", strings: en } } }) }, {});
  early.open();
  await new Promise((r) => setTimeout(r, 0));
  assert.ok(early.view.isOpen);
  assert.equal(document.activeElement, early.view.input);
});
