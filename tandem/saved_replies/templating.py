"""The variables a saved reply may hold, and filling them in for one conversation. A
plain `{{name}}` substitution (not Django's template language): an agent's text is data,
never code, and an unknown variable is refused when the reply is saved rather than sent
to a visitor as braces."""

from __future__ import annotations

import re

from tandem.chat.models import Conversation

VARIABLE = re.compile(r"\{\{\s*([a-z_.]+)\s*\}\}")
VARIABLES = {
    "visitor.name": "the name the visitor gave, else “there” (so “Hi {{visitor.name}}” reads “Hi there”)",
    "visitor.email": "the visitor's e-mail address, else nothing",
    "agent.name": "your first name, else your username",
    "tenant.name": "the tenant's name",
}


def unknown_variables(text: str) -> list[str]:
    return sorted({m.group(1) for m in VARIABLE.finditer(text)} - set(VARIABLES))


def fill(text: str, *, conversation: Conversation, agent) -> str:
    values = {
        "visitor.name": conversation.user_name or "there",
        "visitor.email": conversation.user_email,
        "agent.name": agent.first_name or agent.get_username(),
        "tenant.name": conversation.tenant.name,
    }
    return VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text)
