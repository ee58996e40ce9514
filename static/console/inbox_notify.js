// An agent's notifications, on every console page of a tenant whose inbox they use: a
// desktop notification (the Notification API, after the browser's permission prompt)
// and/or a short sound, for a new hand-over, a conversation assigned to them, and a
// visitor's message in one of theirs. Both are opt-in, per person and browser
// (localStorage), switched on the inbox page (#notify-settings). The events come over
// the inbox feed socket (/ws/agent/<tenant>/, tandem/handoff/inbox_feed.py), which the
// page opens only while one of them is on. Several tabs open: each event is announced
// once (the feed's entry id, remembered in localStorage).
(function () {
  const count = document.getElementById("inbox-count");
  if (!count || !count.dataset.feed) return;
  const KEY = `tandem.notify.${count.dataset.user || ""}`;
  const SEEN = "tandem.notified";
  const supported = "Notification" in window;
  let sock = null, retryMs = 1000, audio = null;

  function prefs() {
    try { return JSON.parse(localStorage.getItem(KEY)) || {}; } catch { return {}; }
  }
  function save(p) {
    try { localStorage.setItem(KEY, JSON.stringify(p)); } catch { /* private mode: this page only */ }
  }
  function desktopOn() { return !!prefs().desktop && supported && Notification.permission === "granted"; }
  function wanted() { return desktopOn() || !!prefs().sound; }

  function firstTime(id) {
    // One tab announces an event; the others see its id already remembered.
    let seen = [];
    try { seen = JSON.parse(localStorage.getItem(SEEN)) || []; } catch { seen = []; }
    if (seen.includes(id)) return false;
    seen.push(id);
    try { localStorage.setItem(SEEN, JSON.stringify(seen.slice(-50))); } catch { /* nothing to share */ }
    return true;
  }

  function beep() {
    try {
      audio = audio || new (window.AudioContext || window.webkitAudioContext)();
      if (audio.state === "suspended") audio.resume();
      [660, 880].forEach((hz, i) => {
        const osc = audio.createOscillator(), gain = audio.createGain();
        const at = audio.currentTime + i * 0.16;
        osc.frequency.value = hz;
        gain.gain.setValueAtTime(0.0001, at);
        gain.gain.exponentialRampToValueAtTime(0.15, at + 0.02);
        gain.gain.exponentialRampToValueAtTime(0.0001, at + 0.14);
        osc.connect(gain).connect(audio.destination);
        osc.start(at);
        osc.stop(at + 0.15);
      });
    } catch { /* no audio here: the desktop notification still says it */ }
  }

  function words(f) {
    const who = f.visitor || "A visitor";
    if (f.type === "handover") return [`${who} is waiting for a person`, "Open the inbox to answer."];
    if (f.type === "assigned") return [`${who} was assigned to you`, "The conversation is yours to answer."];
    return [`${who} wrote`, f.text || "A new message in your conversation."];
  }

  function announce(f) {
    if (!f.id || !firstTime(f.id)) return;
    // Already looking at that very conversation: its transcript shows the message.
    if (f.type === "message" && location.pathname === f.url && document.visibilityState === "visible") return;
    if (prefs().sound) beep();
    if (!desktopOn()) return;
    const [title, body] = words(f);
    try {
      const n = new Notification(title, { body, tag: `${f.type}:${f.conversation}` });
      n.onclick = () => { window.focus(); location.href = f.url; n.close(); };
    } catch { /* a browser that only notifies from a service worker: the sound and the count remain */ }
    // The nav's count (and the title) at once, not at its next poll.
    const now = document.getElementById("inbox-count");
    if (window.htmx && now && f.type === "handover") {
      window.htmx.ajax("GET", now.getAttribute("hx-get"), { target: "#inbox-count", swap: "outerHTML" });
    }
  }

  function connect() {
    if (sock || !wanted()) return;
    const url = new URL(count.dataset.feed, location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    sock = new WebSocket(url);
    sock.onopen = () => { retryMs = 1000; };
    sock.onmessage = (e) => {
      const f = JSON.parse(e.data);
      if (f.type === "ready") document.documentElement.dataset.notifyFeed = "ready";
      else if (f.type === "handover" || f.type === "assigned" || f.type === "message") announce(f);
    };
    sock.onclose = (e) => {
      sock = null;
      delete document.documentElement.dataset.notifyFeed;
      if (e.code < 4000 && wanted()) { setTimeout(connect, retryMs); retryMs = Math.min(retryMs * 2, 30000); }
    };
  }
  function disconnect() {
    if (sock) { const s = sock; sock = null; s.onclose = null; s.close(); }
    delete document.documentElement.dataset.notifyFeed;
  }
  function refresh() { if (wanted()) connect(); else disconnect(); }

  // The switches, on the inbox page only.
  const box = document.getElementById("notify-settings");
  if (box) {
    const desktop = box.querySelector("#notify-desktop");
    const sound = box.querySelector("#notify-sound");
    const state = box.querySelector("#notify-state");
    const show = () => {
      desktop.checked = desktopOn();
      sound.checked = !!prefs().sound;
      if (!supported) state.textContent = "This browser has no desktop notifications; the sound still works.";
      else if (Notification.permission === "denied") state.textContent = "Your browser blocks notifications from this site: allow them in its site settings, then switch them on here.";
      else state.textContent = desktopOn() ? "Desktop notifications are on in this browser." : "";
    };
    desktop.disabled = !supported;
    desktop.addEventListener("change", async () => {
      const p = prefs();
      if (desktop.checked) {
        const answer = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
        p.desktop = answer === "granted";
      } else p.desktop = false;
      save(p);
      show();
      refresh();
    });
    sound.addEventListener("change", () => {
      const p = prefs();
      p.sound = sound.checked;
      save(p);
      if (p.sound) beep();  // a click is the gesture that lets the page play sound; it also says how it sounds
      show();
      refresh();
    });
    show();
  }
  // Switched in another tab: follow it here.
  addEventListener("storage", (e) => { if (e.key === KEY) refresh(); });
  refresh();
})();
