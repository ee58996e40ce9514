// The widget's own strings. English is the fallback for any missing one. `{n}` and
// `{origin}` are filled in by t().
const catalogue = {
  en: {
    chat: "Chat",
    open: "Open chat",
    close: "Close chat",
    options: "More options",
    newConversation: "New conversation",
    message: "Message",
    placeholder: "Type your message…",
    send: "Send",
    stop: "Stop",
    greeting: "Hi! How can we help you today?",
    conversation: "Conversation",
    queued: "Waiting for the assistant…",
    typing: "The assistant is typing…",
    stopped: "Stopped.",
    assistantSays: "Assistant:",
    unread1: "1 new reply",
    unreadN: "{n} new replies",
    rateLimited: "You are sending messages too quickly. Please try again in {n} seconds.",
    rateLimitedLater: "This chat has reached its limit for now. Please try again later.",
    busy: "The assistant is busy right now. Please try again in a moment.",
    timeout: "The reply took too long. Please try again.",
    tooLong: "Your message is too long. Please shorten it and try again.",
    offline: "Connection lost. Reconnecting in {n} s…",
    reconnecting: "Connection lost. Reconnecting…",
    originNotAllowed: "This chat is not enabled for this website ({origin}). Site owner: add this origin to the widget key's allowed origins in Tandem.",
    unavailable: "This chat is not available right now (its key is invalid, revoked or inactive).",
    identity: "We could not verify who you are, so this chat cannot be used. Please sign in again or reload the page.",
    failed: "Something went wrong. Please try again.",
    replyFailed: "This reply could not be completed.",
    person: "Talk to a person",
    waitingPerson: "Waiting for a person from the team…",
    personJoined: "{n} joined the conversation.",
    offlineAsk: "No one is online. Leave your e-mail and a message.",
    email: "Your e-mail",
    offlineSent: "Thanks! We will reply by e-mail.",
    personTyping: "{n} is typing…",
    sources: "Sources",
    helpful: "Helpful",
    notHelpful: "Not helpful",
    rateReply: "Rate this reply",
    tellMore: "Tell us more (optional)",
    feedbackThanks: "Thanks for your feedback.",
    csatAsk: "How did we do?",
    csatScore: "{n} out of 5",
    csatComment: "Anything to add? (optional)",
    csatThanks: "Thank you for rating this conversation.",
  },
  fr: {
    chat: "Chat",
    open: "Ouvrir le chat",
    close: "Fermer le chat",
    options: "Plus d'options",
    newConversation: "Nouvelle conversation",
    message: "Message",
    placeholder: "Écrivez votre message…",
    send: "Envoyer",
    stop: "Arrêter",
    greeting: "Bonjour ! Comment pouvons-nous vous aider ?",
    conversation: "Conversation",
    queued: "En attente de l'assistant…",
    typing: "L'assistant écrit…",
    stopped: "Arrêté.",
    assistantSays: "Assistant :",
    unread1: "1 nouvelle réponse",
    unreadN: "{n} nouvelles réponses",
    rateLimited: "Vous envoyez des messages trop vite. Réessayez dans {n} secondes.",
    rateLimitedLater: "Ce chat a atteint sa limite pour le moment. Réessayez plus tard.",
    busy: "L'assistant est occupé. Réessayez dans un instant.",
    timeout: "La réponse a pris trop de temps. Veuillez réessayer.",
    tooLong: "Votre message est trop long. Raccourcissez-le et réessayez.",
    offline: "Connexion perdue. Nouvelle tentative dans {n} s…",
    reconnecting: "Connexion perdue. Reconnexion…",
    originNotAllowed: "Ce chat n'est pas activé pour ce site ({origin}). Propriétaire du site : ajoutez cette origine aux origines autorisées de la clé du widget dans Tandem.",
    unavailable: "Ce chat n'est pas disponible pour le moment (clé invalide, révoquée ou inactive).",
    identity: "Nous n'avons pas pu vérifier votre identité : ce chat ne peut pas être utilisé. Reconnectez-vous ou rechargez la page.",
    failed: "Une erreur s'est produite. Veuillez réessayer.",
    replyFailed: "Cette réponse n'a pas pu être terminée.",
    person: "Parler à une personne",
    waitingPerson: "En attente d'une personne de l'équipe…",
    personJoined: "{n} a rejoint la conversation.",
    offlineAsk: "Personne n'est en ligne. Laissez votre e-mail et un message.",
    email: "Votre e-mail",
    offlineSent: "Merci ! Nous répondrons par e-mail.",
    personTyping: "{n} écrit…",
    helpful: "Utile",
    notHelpful: "Pas utile",
    rateReply: "Noter cette réponse",
    tellMore: "Dites-nous en plus (facultatif)",
    feedbackThanks: "Merci pour votre avis.",
    csatAsk: "Comment nous sommes-nous débrouillés ?",
    csatScore: "{n} sur 5",
    csatComment: "Quelque chose à ajouter ? (facultatif)",
    csatThanks: "Merci d'avoir noté cette conversation.",
  },
};

export const LOCALES = Object.keys(catalogue);

/** The first supported language among `wanted` (e.g. "fr-CA"), then the browser's. */
export function pickLocale(...wanted) {
  const candidates = [...wanted, ...(navigator.languages || [navigator.language])];
  for (const tag of candidates) {
    const lang = typeof tag === "string" ? tag.toLowerCase().split(/[-_]/)[0] : "";
    if (catalogue[lang]) return lang;
  }
  return "en";
}

export function translator(locale) {
  const strings = { ...catalogue.en, ...catalogue[locale] };
  return (id, vars = {}) => strings[id].replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? ""));
}
