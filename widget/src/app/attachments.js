// Attachments in the widget (docs/attachments.md): the paperclip, the upload over HTTP
// (POST <base>/chat/attachments/?key=…, multipart; the socket then carries only the
// attachment's id, frame "attachment"), and a message's files: raster images shown in
// place, any other file as a download link. Links are relative to Tandem's base URL,
// signed and short-lived; the server decides what is an image (by its bytes). Small on
// purpose: the whole widget has a size budget (tests/widget/test_assets.py).
import { h, icon } from "./dom.js";

/** The paperclip: a button that opens the file picker; `onPick(file)` gets the file chosen. */
export function paperclip({ label, accept, onPick }) {
  const input = h("input", { type: "file", accept, hidden: true,
    onchange: () => { const f = input.files[0]; input.value = ""; if (f) onPick(f); } });
  const button = h("button", { type: "button", class: "btn secondary clip", "aria-label": label,
    onclick: () => input.click() }, icon("M16.5 6v11.5a4 4 0 0 1-8 0V5a2.5 2.5 0 0 1 5 0v10.5a1 1 0 0 1-2 0V6H10v9.5a2.5 "
    + "2.5 0 0 0 5 0V5a4 4 0 0 0-8 0v12.5a5.5 5.5 0 0 0 11 0V6z"));
  return { button, input };
}

/** "12 B", "340 KB", "1.3 MB". */
export const size = (n) => (n < 1024 ? `${n} B` : n < 1048576 ? `${Math.round(n / 1024)} KB`
  : `${+(n / 1048576).toFixed(1)} MB`);

/** Upload `file` as the visitor: resolves to the attachment ({id, name, content_type,
 * size, kind}), or rejects with the server's {code, message} (or code "network"). */
export async function upload({ base, key, visitor, user, userHash, file, maxBytes, fetchFn = fetch }) {
  if (maxBytes && file.size > maxBytes) throw { code: "file_too_large" };
  const body = new FormData();
  body.append("file", file, file.name);
  body.append("visitor", visitor || "");
  if (user) body.append("user", user), body.append("user_hash", userHash || "");
  const r = await fetchFn(`${base}/chat/attachments/?key=${encodeURIComponent(key)}`,
    { method: "POST", body, credentials: "omit" }).catch(() => { throw { code: "network" }; });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok) throw answer.error || { code: "upload_failed" };
  return answer.attachment;
}

/** A message's files as a list: images in place (a link to the whole picture), other
 * files as links with their size. */
export const fileList = (files, base, label) => h("ul", { class: "files", "aria-label": label },
  ...files.map((f) => h("li", { class: f.kind }, h("a", { href: base + f.url, target: "_blank" }, // _blank implies noopener
    f.kind === "image" ? h("img", { src: base + f.url, alt: f.name }) : `${f.name} (${size(f.size)})`))));
