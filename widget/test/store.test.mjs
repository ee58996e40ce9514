import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";

import { memoryStorage } from "./dom.mjs";

let Store;
beforeEach(async () => {
  globalThis.localStorage = memoryStorage();
  ({ Store } = await import("../src/app/store.js"));
});

test("a conversation is kept per owner and forgotten with the visitor", () => {
  const s = new Store("pk_test_abcdefghijklmnop");
  s.setVisitor("v1");
  s.setConversation("anon", "c1");
  s.setConversation("user:7", "c2");
  assert.equal(new Store("pk_test_abcdefghijklmnop").conversation("anon"), "c1"); // survives a reload
  assert.equal(s.conversation("user:7"), "c2");
  s.newVisitor();
  assert.equal(s.conversation("anon"), null);
  assert.equal(s.visitor, "");
});

test("a new visitor id from the server drops the old one's conversations", () => {
  const s = new Store("pk_test_abcdefghijklmnop");
  s.setVisitor("v1");
  s.setConversation("anon", "c1");
  s.setVisitor("v2");
  assert.equal(s.conversation("anon"), null);
});

test("a streaming reply's progress is kept until it is dropped", () => {
  const s = new Store("pk_test_abcdefghijklmnop");
  s.setPending("r1", 4, "Hello");
  assert.deepEqual(s.pending("r1"), { i: 4, t: "Hello" });
  assert.ok(s.hasPending());
  s.dropPending("r1");
  assert.equal(s.pending("r1"), null);
  assert.ok(!s.hasPending());
});

test("what the offline form sent is kept per conversation, the newest 20", () => {
  const s = new Store("pk_test_abcdefghijklmnop");
  assert.equal(s.offlineSent("c0"), null);
  for (let i = 0; i < 25; i++) s.setOfflineSent(`c${i}`, `v${i}@example.test`, `note ${i}`);
  assert.deepEqual(s.offlineSent("c24"), { email: "v24@example.test", text: "note 24" });
  assert.equal(s.offlineSent("c4"), null);
  assert.deepEqual(s.offlineSent("c5"), { email: "v5@example.test", text: "note 5" });
});

test("a CSAT score is asked once per conversation", () => {
  const s = new Store("pk_test_abcdefghijklmnop");
  assert.ok(!s.csatGiven("c1"));
  s.setCsatGiven("c1");
  assert.ok(s.csatGiven("c1"));
});

test("storage that throws leaves a working memory store", async () => {
  globalThis.localStorage = { setItem() { throw new Error("blocked"); }, getItem() { throw new Error("blocked"); } };
  const s = new Store("pk_test_blocked_storage_");
  s.setConversation("anon", "c9");
  assert.equal(s.conversation("anon"), "c9");
});
