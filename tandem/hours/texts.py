"""What the assistant says when a visitor asks for a person in words and nobody can
take the conversation (out of hours, or no agent online): it never promises a person
who is not there. In the visitor's language (the locale the widget sends), English
otherwise; the widget shows the offline form beside it."""

from __future__ import annotations

UNAVAILABLE = {
    "en": "Nobody from our team is available right now. Leave your e-mail address and a message "
          "below, and we will answer by e-mail.",
    "fr": "Personne de notre équipe n'est disponible pour le moment. Laissez votre adresse e-mail "
          "et un message ci-dessous : nous vous répondrons par e-mail.",
    "de": "Gerade ist niemand aus unserem Team erreichbar. Hinterlassen Sie unten Ihre "
          "E-Mail-Adresse und eine Nachricht, wir antworten per E-Mail.",
    "es": "Ahora mismo no hay nadie de nuestro equipo disponible. Deje su correo electrónico y un "
          "mensaje abajo y le responderemos por correo.",
}


def unavailable_text(locale: str = "") -> str:
    return UNAVAILABLE.get((locale or "").split("-")[0].lower(), UNAVAILABLE["en"])
