// Files in the agent's conversation page (docs/attachments.md): `TandemFiles.list(files)`
// renders a message's attachments (inbox.js calls it for messages that arrive over the
// agent socket), and the "Send a file" form posts to …/inbox/<id>/attach/ without a page
// load. Without this script the form still posts and the page reloads.
(function () {
  function list(files) {
    const ul = document.createElement("ul");
    ul.className = "attachments";
    ul.setAttribute("aria-label", "Attachments");
    for (const f of files) {
      const li = document.createElement("li");
      li.className = `attachment ${f.kind}`;
      const a = document.createElement("a");
      a.href = f.url;
      a.rel = "noopener noreferrer";
      if (f.kind === "image") {
        a.target = "_blank";
        const img = document.createElement("img");
        img.src = f.url;
        img.alt = f.name;
        a.append(img);
      } else {
        a.download = f.name;
        a.textContent = f.name;
      }
      li.append(a);
      if (f.kind !== "image") {
        const size = document.createElement("span");
        size.className = "muted small";
        size.textContent = ` ${f.size < 1024 ? `${f.size} bytes` : `${Math.round(f.size / 1024)} KB`}`;
        li.append(size);
      }
      ul.append(li);
    }
    return ul;
  }
  window.TandemFiles = { list };

  const form = document.getElementById("attach");
  const log = document.getElementById("transcript");
  if (!form || !log) return;
  const error = document.getElementById("attach-error");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const r = await fetch(form.action, { method: "POST", body: new FormData(form),
        headers: { Accept: "application/json" }, credentials: "same-origin" });
      const answer = await r.json().catch(() => ({}));
      if (!r.ok) { error.textContent = answer.detail || "The file was not sent."; return; }
      const m = answer.message;
      if (!log.querySelector(`[data-id="${m.id}"]`)) {  // the socket may have brought it first
        const el = document.createElement("article");
        el.className = "msg agent";
        el.dataset.id = m.id;
        const who = document.createElement("div");
        const name = document.createElement("span");
        name.className = "who";
        name.textContent = m.author;
        who.append(name);
        const text = document.createElement("div");
        text.className = "content";
        text.textContent = m.text;
        el.append(who, text, list(m.attachments));
        log.append(el);
        el.scrollIntoView({ block: "end" });
      }
      form.reset();
    } catch {
      error.textContent = "The file was not sent: the connection failed.";
    } finally {
      button.disabled = false;
    }
  });
})();
