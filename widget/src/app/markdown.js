// Replies are Markdown, rendered by marked and sanitised by DOMPurify. No HTML from a
// reply ever executes:
// - raw HTML in the Markdown is shown as text, not parsed (renderer.html escapes it);
// - images become links (a reply cannot make the page load anything);
// - DOMPurify then keeps only the tags and attributes below, and only http(s), mailto
//   and tel links (or relative ones), whatever marked produced;
// - links open in a new tab, without an opener or referrer.
import { Marked } from "marked";
import DOMPurify from "dompurify";

const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => ({
  "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
}[c]));

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow ugc");
  }
});
const PURIFY = {
  ALLOWED_TAGS: ["p", "br", "strong", "em", "del", "s", "code", "pre", "ul", "ol", "li", "a", "blockquote",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td"],
  ALLOWED_ATTR: ["href", "title", "start", "align"],
  ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto|tel):|[^a-z]|[a-z+.-]+(?:[^a-z+.:-]|$))/i,
  RETURN_DOM_FRAGMENT: true,
};

/**
 * Markdown that is still being written, closed off so that it renders as what it will
 * be: an open code fence, inline code span or bold run is closed at the end.
 */
export function closeOpenMarkdown(text) {
  let out = text;
  const fences = (out.match(/^\s*(```|~~~)/gm) || []).length;
  if (fences % 2 === 1) return out + "\n```";
  const last = out.slice(out.lastIndexOf("\n\n") + 1); // the paragraph being written
  const withoutCode = last.replace(/`[^`]*`/g, "");
  if ((last.match(/`/g) || []).length % 2 === 1) out += "`";
  else if ((withoutCode.match(/\*\*/g) || []).length % 2 === 1) out += "**";
  return out;
}

/** A reply's Markdown as a sanitised DocumentFragment. */
export function renderMarkdown(text, { streaming = false } = {}) {
  const html = marked.parse(streaming ? closeOpenMarkdown(text) : text);
  return purify.sanitize(html, PURIFY);
}
