// The assistant page's live preview: the real widget (static/tandem/widget.js) on a page
// of Tandem's own, with two stand-ins installed before it loads, so the preview uses no
// key and sends nothing to a worker or the tenant's quota:
// - fetch of /widget/config answers with the console form's unsaved values;
// - WebSocket is a local stand-in that answers `history` with a sample exchange and a
//   visitor's message with a fixed "this is a preview" reply (docs/protocol.md frames).
(function () {
  "use strict";
  const read = (id) => JSON.parse(document.getElementById(id).textContent);
  const config = read("preview-config");
  const sample = read("preview-sample");
  const KEY = "pk_preview";
  const CONVERSATION = "preview-conversation";

  // The widget's storage (widget/src/app/store.js): a conversation to show, so the widget
  // asks for its history when it connects.
  try {
    localStorage.setItem("tandem:" + KEY.slice(0, 16),
      JSON.stringify({ v: 1, visitor: "preview", conversations: { anon: CONVERSATION }, rev: 1 }));
  } catch (e) { /* storage blocked: the widget keeps it in memory, the greeting still shows */ }

  const realFetch = window.fetch.bind(window);
  window.fetch = function (input, init) {
    const url = typeof input === "string" ? input : input.url;
    if (url.indexOf("/widget/config") !== -1) {
      return Promise.resolve(new Response(JSON.stringify(config),
        { status: 200, headers: { "Content-Type": "application/json" } }));
    }
    return realFetch(input, init);
  };

  let n = 0;
  class PreviewSocket {
    constructor(url) {
      this.url = url;
      this.readyState = PreviewSocket.CONNECTING;
      this.onopen = this.onmessage = this.onclose = this.onerror = null;
      setTimeout(() => {
        if (this.readyState !== PreviewSocket.CONNECTING) return;
        this.readyState = PreviewSocket.OPEN;
        if (this.onopen) this.onopen({});
      }, 0);
    }
    _answer(frame) {
      setTimeout(() => { if (this.onmessage && this.readyState === PreviewSocket.OPEN) this.onmessage({ data: JSON.stringify(frame) }); }, 0);
    }
    send(data) {
      let f;
      try { f = JSON.parse(data); } catch (e) { return; }
      if (f.type === "history") {
        this._answer({ type: "history", conversation: CONVERSATION, handoff: "bot", messages: [
          { id: "preview-u1", role: "user", text: sample.question, status: "done" },
          { id: "preview-a1", role: "assistant", text: sample.answer, status: "done", finish_reason: "stop" },
        ] });
      } else if (f.type === "message") {
        n += 1;
        const id = "preview-r" + n;
        this._answer({ type: "conversation", id: CONVERSATION });
        this._answer({ type: "start", message: id });
        this._answer({ type: "token", message: id, index: 0, text: sample.reply });
        this._answer({ type: "end", message: id, finish_reason: "stop", sources: [],
          usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
      }
    }
    close() {
      if (this.readyState === PreviewSocket.CLOSED) return;
      this.readyState = PreviewSocket.CLOSED;
      const onclose = this.onclose;
      if (onclose) setTimeout(() => onclose({ code: 1000 }), 0);
    }
  }
  PreviewSocket.CONNECTING = 0; PreviewSocket.OPEN = 1; PreviewSocket.CLOSING = 2; PreviewSocket.CLOSED = 3;
  window.WebSocket = PreviewSocket;
  window.TandemSettings = { open: true };
})();
