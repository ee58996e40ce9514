// The widget's own strings, in the visitor's language: they come with the widget's
// configuration (`i18n`, also with a refusal: the server picks the language from
// TandemSettings.locale, the tenant's setting and the browser's languages, in that
// order: tandem/chat/widget.py), so the bundle carries no catalogue; a widget whose
// configuration could not be fetched at all does not show (app.js). `{n}` and
// `{origin}` are filled in by t().

/** The language and strings of the configuration's `i18n` ({locale, strings}). */
export function catalogueOf(i18n) {
  const ok = !!i18n && /^[a-z]{2,3}$/.test(i18n.locale);
  return { locale: ok ? i18n.locale : "en", strings: (ok && typeof i18n.strings === "object" && i18n.strings) || {} };
}

export function translator(strings = {}) {
  return (id, vars = {}) => String(strings[id] ?? id).replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? ""));
}

/** When the team is back (an ISO 8601 time), as the visitor reads it in `locale` and their
 * own time zone: the weekday and time within the week, else the date and time. */
export function formatWhen(iso, locale, now = new Date()) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  const later = at - now < 6 * 864e5 ? {} : { day: "numeric", month: "long" };
  try {
    return new Intl.DateTimeFormat(locale, { weekday: "long", hour: "2-digit", minute: "2-digit", ...later }).format(at);
  } catch { return at.toLocaleString(); }
}
