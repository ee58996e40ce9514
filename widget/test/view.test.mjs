import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";

import { installDom } from "./dom.mjs";

installDom();
const { View, menuTarget } = await import("../src/app/view.js");
const { translator } = await import("../src/app/i18n.js");
const { default: en } = await import("../src/i18n/en.json");

let view, called;
beforeEach(() => {
  installDom();
  called = [];
  const on = Object.fromEntries(["open", "close", "send", "stop", "newConversation", "rate", "person", "type"]
    .map((name) => [name, (...args) => called.push([name, ...args])]));
  view = new View({ t: translator(en), on });
  view.mount();
});

test("arrow keys move through the menu's items, wrapping; Home and End go to the ends", () => {
  assert.equal(menuTarget("ArrowDown", 0, 2), 1);
  assert.equal(menuTarget("ArrowDown", 1, 2), 0);
  assert.equal(menuTarget("ArrowUp", 0, 2), 1);
  assert.equal(menuTarget("ArrowUp", -1, 2), 1);
  assert.equal(menuTarget("End", 0, 3), 2);
  assert.equal(menuTarget("Home", 2, 3), 0);
  assert.equal(menuTarget("a", 0, 3), null);
  assert.equal(menuTarget("ArrowDown", 0, 0), null);
});

test("the menu opens on its first item and the keys move focus between its items", () => {
  view.menuButton.click();
  assert.ok(!view.menu.hidden);
  const [first, second] = view.menuItems;
  assert.equal(view.shadow.activeElement, first);
  assert.equal(first.textContent, "New conversation");
  assert.equal(second.textContent, "Talk to a person");
  const down = first.dispatch("keydown", { key: "ArrowDown" });
  assert.ok(down.defaultPrevented);
  assert.equal(view.shadow.activeElement, second);
  second.dispatch("keydown", { key: "ArrowDown" });
  assert.equal(view.shadow.activeElement, first);
  first.dispatch("keydown", { key: "End" });
  assert.equal(view.shadow.activeElement, second);
  second.click();
  assert.ok(view.menu.hidden);
  assert.deepEqual(called, [["person"]]);
});

test("'Talk to a person' is a visible button when asked for, and asks for a person", () => {
  assert.ok(view.personBar.hidden);
  view.setPersonButton(true);
  assert.ok(!view.personBar.hidden);
  assert.equal(view.personButton.textContent, "Talk to a person");
  view.personButton.click();
  assert.deepEqual(called, [["person"]]);
});

test("the hand-over's notice is an element of its own, apart from the error alert", () => {
  view.setNotice("Waiting for a person from the team…", "waiting");
  assert.equal(view.notice.textContent, "Waiting for a person from the team…");
  assert.equal(view.notice.getAttribute("role"), null); // not the alert's role
  assert.equal(view.notice.dataset.kind, "waiting");
  assert.equal(view.alert.textContent, "");
  view.setNotice("", "");
  assert.equal(view.notice.textContent, "");
});

test("a reply cut short by its token budget says so; a complete one does not", () => {
  const cut = { id: "m1", role: "assistant", text: "Our returns policy is", status: "done", finish: "length" };
  const whole = { id: "m2", role: "assistant", text: "Thirty days.", status: "done", finish: "stop" };
  view.addMessage(cut);
  view.addMessage(whole);
  assert.match(cut.el.textContent, /This reply was cut short: it reached its length limit\./);
  assert.ok(cut.el.querySelector(".cut"));
  assert.equal(whole.el.querySelector(".cut"), null);
});

test("a streaming reply with no text yet is hidden behind the typing indicator", () => {
  const m = { id: "m3", role: "assistant", text: "", status: "queued" };
  view.addMessage(m);
  assert.ok(m.el.hidden);
  view.setStatus("typing");
  assert.match(view.status.textContent, /The assistant is typing…/);
});

test("Enter sends, Shift+Enter does not", () => {
  view.input.dispatch("keydown", { key: "Enter", shiftKey: true });
  view.input.dispatch("keydown", { key: "Enter", shiftKey: false });
  assert.deepEqual(called, [["send"]]);
});
