// The widget's own strings. English travels in the bundle; the visitor's language, when
// it is another, comes with the widget's configuration (the server picks it from
// TandemSettings.locale, the tenant's setting and the browser's languages, in that
// order: tandem/chat/widget.py), so the bundle does not carry every catalogue.
// `{n}` and `{origin}` are filled in by t(); English is the fallback for a missing one.
import en from "../i18n/en.json";

/** The languages this page asks for, best first: TandemSettings.locale, then the browser's. */
export function wantedLocales(settingsLocale, nav = globalThis.navigator) {
  const browser = nav ? (nav.languages && nav.languages.length ? nav.languages : [nav.language]) : [];
  return [settingsLocale, ...browser].filter((l) => typeof l === "string" && l);
}

/** The language and strings of the configuration's `i18n` ({locale, strings}), else English. */
export function catalogueOf(i18n) {
  if (!i18n || typeof i18n.locale !== "string" || !/^[a-z]{2,3}$/.test(i18n.locale)) return { locale: "en", strings: {} };
  return { locale: i18n.locale, strings: i18n.strings && typeof i18n.strings === "object" ? i18n.strings : {} };
}

export function translator(strings = {}) {
  const all = { ...en, ...strings };
  return (id, vars = {}) => String(all[id] ?? en[id] ?? id).replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? ""));
}

/** When the team is back (an ISO 8601 time), as the visitor reads it in `locale` and their
 * own time zone: the weekday and time within the week, else the date and time. */
export function formatWhen(iso, locale, now = new Date()) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  const soon = at - now < 6 * 864e5;
  const opts = soon ? { weekday: "long", hour: "2-digit", minute: "2-digit" }
    : { weekday: "long", day: "numeric", month: "long", hour: "2-digit", minute: "2-digit" };
  try { return new Intl.DateTimeFormat(locale, opts).format(at); } catch { return at.toLocaleString(); }
}
