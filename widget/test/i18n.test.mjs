import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import { catalogueOf, formatWhen, translator } from "../src/app/i18n.js";

const DIR = new URL("../src/i18n/", import.meta.url);
const read = (name) => JSON.parse(readFileSync(new URL(name, DIR), "utf8"));

test("the widget speaks English, French, German and Spanish at least, each with every string", () => {
  const names = readdirSync(DIR).filter((n) => n.endsWith(".json")).sort();
  for (const lang of ["de", "en", "es", "fr"]) assert.ok(names.includes(`${lang}.json`), lang);
  const keys = Object.keys(read("en.json")).sort();
  for (const name of names) {
    const strings = read(name);
    assert.deepEqual(Object.keys(strings).sort(), keys, name);
    for (const [k, v] of Object.entries(strings)) {
      assert.ok(typeof v === "string" && v.trim(), `${name}: ${k} is empty`);
      // The same placeholders as English ({n}, {origin}), so t() fills them in.
      assert.deepEqual(v.match(/\{\w+\}/g) || [], read("en.json")[k].match(/\{\w+\}/g) || [], `${name}: ${k}`);
    }
  }
});

test("the two message boxes have different names in every language", () => {
  for (const name of readdirSync(DIR).filter((n) => n.endsWith(".json"))) {
    const s = read(name);
    assert.ok(!s.offlineNote.toLowerCase().includes(s.message.toLowerCase()), `${name}: ${s.offlineNote}`);
    assert.notEqual(s.offlineSend, s.send, name);
  }
});

test("t() fills placeholders from the configuration's strings", () => {
  const t = translator({ personJoined: "{n} a rejoint la conversation.", unreadN: "{n} nouvelles réponses" });
  assert.equal(t("personJoined", { n: "Maya" }), "Maya a rejoint la conversation.");
  assert.equal(t("unreadN", { n: 3 }), "3 nouvelles réponses");
});

test("a string the configuration lacks shows as its id, never as a crash", () => {
  assert.equal(translator()("send"), "send");
});

test("when the team is back reads as a weekday and time within the week, with the date later", () => {
  const now = new Date("2026-12-04T18:00:00Z"); // a Friday
  const soon = formatWhen("2026-12-07T08:00:00Z", "en-GB", now);
  assert.match(soon, /Monday/);
  assert.doesNotMatch(soon, /December/);
  assert.match(formatWhen("2026-12-28T08:00:00Z", "fr", now), /décembre/);
  assert.equal(formatWhen("not a time", "en", now), "");
});
