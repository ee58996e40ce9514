// The websocket to Tandem (docs/protocol.md), reconnecting on its own: after a drop it
// waits a random time between half and all of 1, 2, 4 … 30 s (exponential backoff
// with jitter, so that a server restart is not met by every visitor at the same
// instant), and at once when the browser says it is back online. A refusal (close codes
// 4401 and 4403: bad key, origin not allowed, identity not verified) is final.

const REFUSED = new Set([4401, 4403]);
const MAX_DELAY_MS = 30000;

export class Connection {
  /**
   * @param {() => string} url the socket's URL, asked again for every attempt
   * @param {{open: Function, frame: Function, down: Function, refused: Function}} on
   */
  constructor(url, on) {
    this.url = url;
    this.on = on;
    this.ws = null;
    this.attempt = 0;
    this.timer = null;
    this.stopped = true;
    this.refused = false;
    addEventListener("online", () => { if (!this.stopped && !this.isOpen) this._connectNow(); });
  }

  get isOpen() { return !!this.ws && this.ws.readyState === WebSocket.OPEN; }

  start() {
    if (this.refused) return;
    this.stopped = false;
    if (!this.ws && !this.timer) this._connectNow();
  }

  /** Close and connect again at once (a new identity changes the URL). */
  restart() {
    this.refused = false;
    this._drop();
    this.stopped = true;
    this.start();
  }

  send(frame) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  _drop() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      try { ws.close(); } catch { /* already closed */ }
    }
  }

  _connectNow() {
    this._drop();
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch {
      this._retry();
      return;
    }
    this.ws = ws;
    ws.onopen = () => { this.attempt = 0; this.on.open(); };
    ws.onmessage = (e) => {
      let frame;
      try { frame = JSON.parse(e.data); } catch { return; }
      if (frame && typeof frame === "object") this.on.frame(frame);
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (REFUSED.has(e.code)) {
        this.refused = true;
        this.on.refused(e.code);
      } else if (!this.stopped) {
        this._retry();
      }
    };
  }

  _retry() {
    const ceiling = Math.min(MAX_DELAY_MS, 1000 * 2 ** this.attempt);
    const delay = ceiling / 2 + Math.random() * (ceiling / 2);
    this.attempt += 1;
    this.on.down(delay);
    this.timer = setTimeout(() => { this.timer = null; this._connectNow(); }, delay);
  }
}
