import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";

// A WebSocket stand-in the test drives: open, message, close with a code.
class FakeSocket {
  static OPEN = 1;
  static all = [];
  constructor(url) { this.url = url; this.readyState = 0; this.sent = []; FakeSocket.all.push(this); }
  send(data) { this.sent.push(JSON.parse(data)); }
  close() { this.readyState = 3; }
  open() { this.readyState = 1; this.onopen && this.onopen(); }
  message(data) { this.onmessage && this.onmessage({ data }); }
  drop(code = 1006) { this.readyState = 3; this.onclose && this.onclose({ code }); }
}

globalThis.WebSocket = FakeSocket;
globalThis.addEventListener = () => {};
const { Connection } = await import("../src/app/connection.js");

let calls, conn;
beforeEach((t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  FakeSocket.all = [];
  calls = { open: 0, frames: [], down: [], refused: [] };
  conn = new Connection(() => `ws://tandem.test/ws/chat/?n=${FakeSocket.all.length}`, {
    open: () => { calls.open += 1; },
    frame: (f) => calls.frames.push(f),
    down: (ms) => calls.down.push(ms),
    refused: (code) => calls.refused.push(code),
  });
});
afterEach((t) => t.mock.timers.reset());

test("it connects on start, and sends only while open", () => {
  assert.equal(FakeSocket.all.length, 0);
  conn.start();
  assert.equal(conn.send({ type: "message" }), false);
  FakeSocket.all[0].open();
  assert.equal(calls.open, 1);
  assert.equal(conn.send({ type: "message", text: "hi" }), true);
  assert.deepEqual(FakeSocket.all[0].sent, [{ type: "message", text: "hi" }]);
});

test("frames that are JSON objects reach the app; anything else is dropped", () => {
  conn.start();
  FakeSocket.all[0].open();
  FakeSocket.all[0].message('{"type":"start","message":"m1"}');
  FakeSocket.all[0].message("not json");
  FakeSocket.all[0].message("42");
  assert.deepEqual(calls.frames, [{ type: "start", message: "m1" }]);
});

test("after a drop it waits half to all of 1, 2, 4 … s and connects again", (t) => {
  conn.start();
  FakeSocket.all[0].drop();
  assert.equal(calls.down.length, 1);
  assert.ok(calls.down[0] >= 500 && calls.down[0] <= 1000, calls.down[0]);
  t.mock.timers.tick(1000);
  assert.equal(FakeSocket.all.length, 2);
  FakeSocket.all[1].drop();
  assert.ok(calls.down[1] >= 1000 && calls.down[1] <= 2000, calls.down[1]);
});

test("a refusal (4401, 4403) is final: no retry, and start does nothing", (t) => {
  conn.start();
  FakeSocket.all[0].drop(4403);
  assert.deepEqual(calls.refused, [4403]);
  t.mock.timers.tick(60_000);
  conn.start();
  assert.equal(FakeSocket.all.length, 1);
  conn.restart(); // a new identity: tried again
  assert.equal(FakeSocket.all.length, 2);
});

test("the URL is asked again for every attempt", (t) => {
  conn.start();
  FakeSocket.all[0].drop();
  t.mock.timers.tick(1000);
  assert.deepEqual(FakeSocket.all.map((s) => s.url), ["ws://tandem.test/ws/chat/?n=0", "ws://tandem.test/ws/chat/?n=1"]);
});
