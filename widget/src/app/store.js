// What the widget keeps in the site's localStorage (first-party: the widget runs in the
// page), under keys starting with "tandem:" and the key's first characters:
//   tandem:<k>            {v: 1, visitor, conversations: {<owner>: <conversation id>}, rev}
//   tandem:<k>:p:<reply>  {i: last token index, t: text so far}   while a reply streams
//   tandem:<k>:csat       [conversation ids scored here], the newest 50
//   tandem:<k>:off        {<conversation id>: {email, text}}, what the offline form sent, the newest 20
// <owner> is "anon" or "user:<id>" for a visitor the site identified. `rev` changes when
// a message is sent or a reply ends, so other tabs of the site know to catch up (the
// `storage` event). Where storage is unavailable (blocked, private mode) it is memory.

const memory = new Map();

function backend() {
  try {
    const probe = "tandem:probe";
    localStorage.setItem(probe, "1");
    localStorage.removeItem(probe);
    return localStorage;
  } catch {
    return {
      getItem: (k) => (memory.has(k) ? memory.get(k) : null),
      setItem: (k, v) => memory.set(k, String(v)),
      removeItem: (k) => memory.delete(k),
      key: (i) => [...memory.keys()][i] ?? null,
      get length() { return memory.size; },
    };
  }
}

export class Store {
  constructor(widgetKey) {
    this.ns = "tandem:" + widgetKey.slice(0, 16);
    this.s = backend();
  }

  _read(k) {
    try { return JSON.parse(this.s.getItem(k)); } catch { return null; }
  }

  _write(k, v) {
    try { this.s.setItem(k, JSON.stringify(v)); } catch { /* full: the widget still works this session */ }
  }

  get state() {
    const st = this._read(this.ns);
    if (st && st.v === 1 && typeof st.visitor === "string") return st;
    // The visitor id is the server's: it sends a signed one on the first connect ("visitor").
    const fresh = { v: 1, visitor: "", conversations: {}, rev: 0 };
    this._write(this.ns, fresh);
    return fresh;
  }

  _update(change) {
    const st = this.state;
    change(st);
    st.rev = (st.rev || 0) + 1;
    this._write(this.ns, st);
  }

  get visitor() { return this.state.visitor; }

  /** The signed visitor id the server issued (it replaces one it did not accept). */
  setVisitor(token) {
    this._update((st) => {
      if (st.visitor !== token) st.conversations = {};
      st.visitor = token;
    });
  }

  conversation(owner) { return this.state.conversations[owner] || null; }

  setConversation(owner, id) {
    this._update((st) => {
      if (id) st.conversations[owner] = id;
      else delete st.conversations[owner];
    });
  }

  /** Tell the site's other tabs that the conversation changed. */
  touch() { this._update(() => {}); }

  newVisitor() {
    this._update((st) => { st.visitor = ""; st.conversations = {}; });
    this.clearPending();
  }

  pending(reply) { return this._read(`${this.ns}:p:${reply}`); }

  setPending(reply, index, text) { this._write(`${this.ns}:p:${reply}`, { i: index, t: text }); }

  dropPending(reply) {
    try { this.s.removeItem(`${this.ns}:p:${reply}`); } catch { /* ignore */ }
  }

  hasPending() { return this._pendingKeys().length > 0; }

  _pendingKeys() {
    const prefix = `${this.ns}:p:`;
    const found = [];
    for (let i = 0; i < this.s.length; i++) {
      const k = this.s.key(i);
      if (k && k.startsWith(prefix)) found.push(k);
    }
    return found;
  }

  clearPending() {
    this._pendingKeys().forEach((k) => { try { this.s.removeItem(k); } catch { /* ignore */ } });
  }

  isStateKey(k) { return k === this.ns; }

  /** Conversations this browser has scored (CSAT), so it is asked once. */
  csatGiven(conversation) {
    const list = this._read(`${this.ns}:csat`);
    return Array.isArray(list) && list.includes(conversation);
  }

  setCsatGiven(conversation) {
    const list = this._read(`${this.ns}:csat`);
    const next = (Array.isArray(list) ? list : []).filter((c) => c !== conversation).slice(-49);
    next.push(conversation);
    this._write(`${this.ns}:csat`, next);
  }

  /** What the visitor left in a conversation's offline form ({email, text}), or null:
   * shown in place of the form after a reload. */
  offlineSent(conversation) {
    const all = this._read(`${this.ns}:off`);
    const sent = all && typeof all === "object" ? all[conversation] : null;
    return sent && typeof sent.email === "string" && typeof sent.text === "string" ? sent : null;
  }

  setOfflineSent(conversation, email, text) {
    const all = this._read(`${this.ns}:off`);
    const kept = Object.entries(all && typeof all === "object" ? all : {}).filter(([c]) => c !== conversation).slice(-19);
    this._write(`${this.ns}:off`, Object.fromEntries([...kept, [conversation, { email, text }]]));
  }
}
