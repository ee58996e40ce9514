import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";

import { installDom, memoryStorage } from "./dom.mjs";

installDom();
globalThis.localStorage = memoryStorage();
const { OfflineForm } = await import("../src/app/offline.js");
const { Store } = await import("../src/app/store.js");
const { translator } = await import("../src/app/i18n.js");
const { default: en } = await import("../src/i18n/en.json");

let store, sent, form;
beforeEach(() => {
  globalThis.localStorage = memoryStorage();
  store = new Store("pk_test_offline_form_");
  sent = [];
  form = new OfflineForm({ t: translator(en), store, send: (...args) => { sent.push(args); return true; } });
});

const labelled = (el, name) => {
  const label = el.querySelectorAll("label").find((l) => l.textContent === name);
  assert.ok(label, `no label "${name}"`);
  return el.querySelectorAll("input, textarea").find((f) => f.id === label.getAttribute("for"));
};

test("the form's boxes have visible labels, not placeholders, and a primary button", () => {
  const el = form.element("c1");
  assert.equal(el.tagName, "FORM");
  const email = labelled(el, "Your e-mail"), text = labelled(el, "Your question for the team");
  assert.equal(email.getAttribute("type"), "email");
  assert.equal(text.tagName, "TEXTAREA");
  for (const box of [email, text]) assert.equal(box.getAttribute("placeholder"), null);
  const button = el.querySelector("button");
  assert.equal(button.textContent, "Send to the team");
  assert.ok(button.classList.contains("btn") && !button.classList.contains("secondary"));
  assert.equal(el.querySelector("p").textContent, "No one is online. Leave your e-mail and a message.");
  assert.equal(form.element("c1", { closed: true }).querySelector("p").textContent,
    "Leave your e-mail and a message: we will answer by e-mail.");
});

test("the same element comes back while nothing changed, so typed text stays", () => {
  const el = form.element("c1");
  labelled(el, "Your e-mail").value = "ann@example.test";
  assert.equal(form.element("c1"), el);
  assert.notEqual(form.element("c2"), el);
});

test("submitting sends once, and what was sent replaces the form, after a reload too", () => {
  const el = form.element("c1");
  labelled(el, "Your e-mail").value = " ann@example.test ";
  labelled(el, "Your question for the team").value = "Call me back about order 42";
  el.querySelector("button").click();
  assert.deepEqual(sent, [["c1", "ann@example.test", "Call me back about order 42"]]);
  assert.ok(el.querySelector("button").disabled);
  assert.equal(form.received("c2"), false); // another conversation's
  assert.equal(form.received("c1"), true);
  const summary = form.element("c1");
  assert.notEqual(summary, el);
  assert.match(summary.textContent, /Thanks! We will reply by e-mail\./);
  assert.match(summary.textContent, /You sent from ann@example\.test:Call me back about order 42/);
  const reloaded = new OfflineForm({ t: translator(en), store: new Store("pk_test_offline_form_"), send: () => true });
  assert.equal(reloaded.element("c1").querySelector("form"), null);
  assert.match(reloaded.element("c1").textContent, /Call me back about order 42/);
});

test("an empty field sends nothing; a refusal lets the visitor send again", () => {
  const el = form.element("c1");
  el.querySelector("button").click();
  assert.deepEqual(sent, []);
  labelled(el, "Your e-mail").value = "not-an-address";
  labelled(el, "Your question for the team").value = "Hello";
  el.querySelector("button").click();
  assert.ok(el.querySelector("button").disabled);
  form.refused();
  assert.ok(!el.querySelector("button").disabled);
  assert.equal(form.pending, null);
});

test("hide takes it off the page", () => {
  const parent = document.createElement("div");
  parent.append(form.element("c1"));
  form.hide();
  assert.equal(parent.children.length, 0);
});
