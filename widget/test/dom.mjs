// A small stand-in for the browser's DOM, enough for the widget's modules to build and
// change their elements under Node (the browser tests in tests/ui run the real thing):
// elements with attributes, children, text, events, focus and simple selectors.

class Text {
  constructor(text) { this.nodeType = 3; this.data = String(text); this.parentNode = null; }
  get textContent() { return this.data; }
  remove() { if (this.parentNode) this.parentNode.removeChild(this); }
}

class ClassList {
  constructor(el) { this.el = el; }
  get list() { return (this.el.className || "").split(/\s+/).filter(Boolean); }
  contains(c) { return this.list.includes(c); }
  add(...cs) { this.el.className = [...new Set([...this.list, ...cs])].join(" "); }
  remove(...cs) { this.el.className = this.list.filter((c) => !cs.includes(c)).join(" "); }
  toggle(c, on = !this.contains(c)) { if (on) this.add(c); else this.remove(c); return on; }
}

export class Element {
  constructor(tag) {
    this.nodeType = 1;
    this.tagName = tag.toUpperCase();
    this.attributes = new Map();
    this.childNodes = [];
    this.parentNode = null;
    this.listeners = {};
    this.className = "";
    this.classList = new ClassList(this);
    this.dataset = {};
    this.style = { setProperty() {}, height: "" };
    this.value = "";
    this.disabled = false;
    this.hidden = false;
    this.checked = false;
  }

  get children() { return this.childNodes.filter((n) => n.nodeType === 1); }
  get id() { return this.getAttribute("id") || ""; }
  set id(v) { this.setAttribute("id", v); }

  setAttribute(k, v) {
    if (k === "class") { this.className = String(v); return; }
    if (k === "hidden") this.hidden = true;
    if (k === "disabled") this.disabled = true;
    if (k === "value") this.value = String(v);
    this.attributes.set(k, String(v));
  }

  getAttribute(k) { return k === "class" ? this.className : (this.attributes.has(k) ? this.attributes.get(k) : null); }
  hasAttribute(k) { return this.attributes.has(k); }
  removeAttribute(k) { this.attributes.delete(k); }

  _adopt(nodes) {
    return nodes.map((n) => {
      const node = typeof n === "object" ? n : new Text(n);
      if (node.parentNode) node.parentNode.removeChild(node);
      node.parentNode = this;
      return node;
    });
  }

  // Adopted first: a node moved within the same parent leaves it before it is added.
  append(...nodes) { const adopted = this._adopt(nodes); this.childNodes.push(...adopted); }
  prepend(...nodes) { const adopted = this._adopt(nodes); this.childNodes.unshift(...adopted); }
  insertBefore(node, ref) {
    if (ref && ref.parentNode !== this) { // as the DOM does
      throw new Error("NotFoundError: the node before which to insert is not a child of this node");
    }
    const [n] = this._adopt([node]);
    const i = ref ? this.childNodes.indexOf(ref) : -1;
    if (i < 0) this.childNodes.push(n); else this.childNodes.splice(i, 0, n);
    return n;
  }

  removeChild(n) { this.childNodes = this.childNodes.filter((c) => c !== n); n.parentNode = null; return n; }
  remove() { if (this.parentNode) this.parentNode.removeChild(this); }
  replaceChildren(...nodes) {
    const adopted = this._adopt(nodes);
    this.childNodes.forEach((c) => { c.parentNode = null; });
    this.childNodes = adopted;
    adopted.forEach((c) => { c.parentNode = this; });
  }

  get textContent() { return this.childNodes.map((n) => n.textContent).join(""); }
  set textContent(v) { this.replaceChildren(...(v === "" || v == null ? [] : [String(v)])); }

  get isConnected() {
    let n = this;
    while (n.parentNode) n = n.parentNode;
    return n === globalThis.document.documentElement || (n.host && n.host.isConnected);
  }

  contains(n) { for (let c = n; c; c = c.parentNode) if (c === this) return true; return false; }

  addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); }

  /** Fire `type` here and up the tree; returns the event (defaultPrevented). */
  dispatch(type, props = {}) {
    const event = { type, target: this, defaultPrevented: false, ...props,
      preventDefault() { this.defaultPrevented = true; }, stopPropagation() { this.stopped = true; } };
    for (let n = this; n && !event.stopped; n = n.parentNode || n.host) {
      (n.listeners && n.listeners[type] || []).forEach((fn) => fn(event));
    }
    return event;
  }

  click() {
    if (this.disabled) return;
    this.dispatch("click");
    if (this.getAttribute("type") === "submit" || (this.tagName === "BUTTON" && !this.hasAttribute("type"))) {
      let form = this.parentNode;
      while (form && form.tagName !== "FORM") form = form.parentNode;
      if (form) form.dispatch("submit");
    }
  }

  focus() {
    let n = this;
    while (n.parentNode) n = n.parentNode;
    n.activeElement = this;
    globalThis.document.activeElement = this;
  }

  attachShadow() {
    const root = new Element("#shadow-root");
    root.host = this;
    root.activeElement = null;
    this.shadowRoot = root;
    return root;
  }

  matches(selector) {
    return selector.split(",").some((one) => {
      const m = one.trim().match(/^([a-z]*)((?:\.[\w-]+)*)((?:\[[\w-]+(?:="[^"]*")?\])*)$/i);
      if (!m) throw new Error(`selector not supported here: ${one}`);
      const [, tag, classes, attrs] = m;
      if (tag && this.tagName !== tag.toUpperCase()) return false;
      if (classes && !classes.split(".").filter(Boolean).every((c) => this.classList.contains(c))) return false;
      for (const [, k, v] of attrs.matchAll(/\[([\w-]+)(?:="([^"]*)")?\]/g)) {
        if (!this.hasAttribute(k) || (v !== undefined && this.getAttribute(k) !== v)) return false;
      }
      return true;
    });
  }

  querySelectorAll(selector) {
    const out = [];
    const walk = (n) => n.children.forEach((c) => { if (c.matches(selector)) out.push(c); walk(c); });
    walk(this);
    return out;
  }

  querySelector(selector) { return this.querySelectorAll(selector)[0] || null; }

  get scrollHeight() { return 0; }
  get clientHeight() { return 0; }
}

/** Install the stand-in as the globals the widget's modules use. */
export function installDom() {
  const documentElement = new Element("html");
  const body = new Element("body");
  documentElement.append(body);
  globalThis.document = {
    documentElement, body, activeElement: null,
    createElement: (tag) => new Element(tag),
    createElementNS: (_ns, tag) => new Element(tag),
  };
  globalThis.CSSStyleSheet = class { replaceSync(text) { this.text = text; } };
  globalThis.requestAnimationFrame = (fn) => setTimeout(fn, 0);
  return globalThis.document;
}

/** A localStorage stand-in. */
export function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => { m.set(k, String(v)); },
    removeItem: (k) => { m.delete(k); },
    key: (i) => [...m.keys()][i] ?? null,
    get length() { return m.size; },
  };
}
