import assert from "node:assert/strict";
import { test } from "node:test";

import { installDom } from "./dom.mjs";

installDom();
const { fileList, size, upload } = await import("../src/app/attachments.js");

test("sizes read as people write them", () => {
  assert.equal(size(12), "12 B");
  assert.equal(size(340 * 1024), "340 KB");
  assert.equal(size(1.25 * 1024 * 1024), "1.3 MB");
  assert.equal(size(10 * 1024 * 1024), "10 MB");
});

test("a picture shows in place behind its link; any other file is a link with its size", () => {
  const list = fileList([
    { name: "pole.png", kind: "image", size: 5120, url: "/attachments/t1/" },
    { name: "label.pdf", kind: "file", size: 2048, url: "/attachments/t2/" },
  ], "https://help.example.com", "Attachments");
  assert.equal(list.getAttribute("aria-label"), "Attachments");
  const [picture, file] = list.querySelectorAll("li");
  const img = picture.querySelector("img");
  assert.equal(img.getAttribute("src"), "https://help.example.com/attachments/t1/");
  assert.equal(img.getAttribute("alt"), "pole.png");
  const link = file.querySelector("a");
  assert.equal(link.getAttribute("href"), "https://help.example.com/attachments/t2/");
  assert.equal(link.textContent, "label.pdf (2 KB)");
  assert.equal(file.querySelector("img"), null);
});

test("an upload goes as multipart with the visitor's token, and a refusal comes back with its code", async () => {
  const calls = [];
  const answer = (status, body) => async (url, init) => {
    calls.push({ url, init });
    return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  };
  const file = new File(["%PDF-1.4"], "label.pdf", { type: "application/pdf" });
  const ok = await upload({ base: "https://help.example.com", key: "pk_1", visitor: "v.sig", file,
    fetchFn: answer(201, { attachment: { id: "a1", name: "label.pdf" } }) });
  assert.deepEqual(ok, { id: "a1", name: "label.pdf" });
  assert.equal(calls[0].url, "https://help.example.com/chat/attachments/?key=pk_1");
  assert.equal(calls[0].init.method, "POST");
  assert.equal(calls[0].init.credentials, "omit");
  assert.equal(calls[0].init.body.get("visitor"), "v.sig");
  assert.equal(calls[0].init.body.get("file").name, "label.pdf");
  await assert.rejects(upload({ base: "", key: "pk_1", visitor: "v", file,
    fetchFn: answer(400, { error: { code: "file_type_not_allowed", message: "No." } }) }),
  { code: "file_type_not_allowed" });
  // Over the tenant's limit: refused before anything is sent.
  await assert.rejects(upload({ base: "", key: "pk_1", visitor: "v", file, maxBytes: 3, fetchFn: answer(201, {}) }),
    { code: "file_too_large" });
  assert.equal(calls.length, 2);
});
