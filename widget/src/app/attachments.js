// Attachments in the widget (docs/attachments.md): the paperclip, the upload over HTTP
// (POST <base>/chat/attachments/?key=…, multipart; the socket then carries only the
// attachment's id, frame "attachment"), and a message's files: raster images shown in
// place, any other file as a download link. Links are relative to Tandem's base URL,
// signed and short-lived; the server decides what is an image (by its bytes).
import { h, icon } from "./dom.js";

const CLIP = "M16.5 6.5v10a4.5 4.5 0 0 1-9 0V5a3 3 0 0 1 6 0v10.5a1.5 1.5 0 0 1-3 0V6.5H9v9a3 3 0 0 0 6 0V5"
  + "a4.5 4.5 0 0 0-9 0v11.5a6 6 0 0 0 12 0v-10z";

/** The paperclip: a button that opens the file picker; `onPick(file)` gets the file chosen. */
export function paperclip({ label, accept, onPick }) {
  const input = h("input", { type: "file", class: "file-pick", accept: accept || null, tabindex: "-1",
    "aria-hidden": "true" });
  input.addEventListener("change", () => {
    const file = input.files && input.files[0];
    input.value = "";
    if (file) onPick(file);
  });
  const button = h("button", { type: "button", class: "btn secondary clip", "aria-label": label, title: label,
    onclick: () => input.click() }, icon(CLIP));
  return { button, input };
}

/** "1.2 MB", "340 KB", "12 B". */
export function size(n) {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1).replace(/\.0$/, "")} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${n} B`;
}

/** Upload `file` as the visitor: resolves to the attachment ({id, name, content_type,
 * size, kind}), or rejects with the server's {code, message} (or code "network"). */
export async function upload({ base, key, visitor, user, userHash, file, maxBytes, fetchFn = fetch }) {
  if (maxBytes && file.size > maxBytes) throw { code: "file_too_large", message: "" };
  const body = new FormData();
  body.append("file", file, file.name);
  body.append("visitor", visitor || "");
  if (user) {
    body.append("user", user);
    body.append("user_hash", userHash || "");
  }
  let r;
  try {
    r = await fetchFn(`${base}/chat/attachments/?key=${encodeURIComponent(key)}`,
      { method: "POST", body, credentials: "omit" });
  } catch {
    throw { code: "network", message: "" };
  }
  const answer = await r.json().catch(() => ({}));
  if (!r.ok) throw answer.error || { code: "upload_failed", message: "" };
  return answer.attachment;
}

/** A message's files as a list: images in place (a link to the whole picture), other
 * files as download links with their size. */
export function fileList(files, base, label) {
  return h("ul", { class: "files", "aria-label": label }, ...files.map((f) => {
    const url = base + f.url;
    if (f.kind === "image") {
      return h("li", { class: "image" }, h("a", { href: url, target: "_blank", rel: "noopener noreferrer" },
        h("img", { src: url, alt: f.name, loading: "lazy" })));
    }
    return h("li", { class: "file" }, h("a", { href: url, target: "_blank", rel: "noopener noreferrer",
      text: `📎 ${f.name} (${size(f.size)})` }));
  }));
}
