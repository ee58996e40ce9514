"""The engine benchmark's prompts: chat prompts of a support assistant (its system prompt
and support questions, through the tokenizer's chat template), distinct from each other,
and long prompts (a pasted ticket history) for the mixed workload's arrivals."""

from __future__ import annotations

SYSTEM_PROMPT = "You are the support assistant for Acme Cloud. Answer briefly and politely."
QUESTIONS = [
    "My invoice for March shows the same charge twice. Can you refund the duplicate payment to the card I used?",
    "I lost my phone and can no longer log in with two-factor authentication. How do I get back into my account?",
    "Our team plan renews next week. How do I move from monthly to yearly billing without losing the discount?",
    "The export to CSV has been stuck at 90 percent for an hour. Is there an outage, or should I start it again?",
    "How do I add a colleague as an admin to our workspace without giving them access to the billing page?",
    "I was charged in euros although my account is set to US dollars. Why did that happen, and can it be fixed?",
    "The mobile app logs me out every time I switch to another app. Is this a known bug on Android 14?",
    "Can I get an invoice with our company VAT number on it for last month's subscription payment, please?",
    "We need to delete all data for a customer who asked to be forgotten. What is the right way to do that?",
    "Password reset emails never arrive in my inbox, and they are not in spam either. What else can I try?",
    "How many API requests per minute does the business plan allow, and what happens when we go over it?",
    "Our webhook endpoint returns 200 but your dashboard says the deliveries failed. How can I debug this?",
    "I want to cancel my subscription at the end of the current period, not right now. How do I do that?",
    "The search in the help center returns nothing for words that I know appear in several of the articles.",
    "Can we use single sign-on with Okta on the standard plan, or do we need to upgrade to enterprise first?",
    "A file I uploaded yesterday is gone from the shared folder. Is there a trash or version history somewhere?",
    "The dashboard shows last week's numbers even after I refresh. How often are the usage charts updated?",
    "I entered the wrong shipping address for my hardware order. Can it still be changed before it ships?",
    "How do I rotate our API keys without downtime for the integrations that are using the current ones?",
    "My coupon code says it has expired, but the email said it is valid until the end of the month. Help?",
    "We are moving to a new domain. Will the links our customers already have to our portal keep working?",
    "The invoice PDF is blank when I open it in Chrome, but it works in Firefox. Is this a known problem?",
    "How can I see which member of our team changed the notification settings for the whole workspace?",
    "Is it possible to pause the subscription for two months over the summer instead of cancelling it?",
    "Our data residency must stay in the EU. Which region are our backups stored in, and can we choose?",
    "The import tool rejects my spreadsheet with an error about row 1532, but that row looks fine to me.",
    "I get a 429 error from the API even though we sent only a few requests in the last few minutes.",
    "Can I transfer ownership of the workspace to my colleague before I leave the company next month?",
    "The chat widget does not show up on our website after we added the script tag to the page header.",
    "How do I download all of our invoices from last year at once for our accountant's annual review?",
    "We were billed for ten seats but only seven people use the account. How are seats counted exactly?",
    "Notifications arrive twice on my desktop, once from the browser and once from the app. How to fix?",
    "What is your uptime guarantee on the business plan, and how do we claim a credit after an outage?",
    "I changed my email address and now the old one still receives all of the weekly summary reports.",
    "Does the reporting API support filtering by custom fields, or only by the standard ticket fields?",
    "Our scheduled report failed overnight with a timeout. Can it be rerun for the same period again?",
    "How do I set up an auto-reply in Spanish for customers whose browser language is set to Spanish?",
    "The dark mode setting does not stick; every time I sign in the interface switches back to light.",
    "Is there a way to merge two customer profiles that were created for the same person by mistake?",
    "We want to test the new workflow features in a sandbox first. Do you offer a staging environment?",
]


def chat_ids(tokenizer, user: str) -> list[int]:
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True))


def stream_prompts(tokenizer, n: int) -> list[list[int]]:
    """n chat prompts of ~60 tokens, cycling through the support questions; from the
    second round on a ticket number makes each prompt distinct."""
    out = []
    for i in range(n):
        q = QUESTIONS[i % len(QUESTIONS)]
        out.append(chat_ids(tokenizer, q if i < len(QUESTIONS) else f"(ticket {4000 + i}) {q}"))
    return out


def long_prompt(tokenizer, i: int, n_tokens: int) -> list[int]:
    """A distinct chat prompt of about n_tokens: a pasted ticket history, ending with a
    question. Distinct from its first user tokens, so no prefix cache would help."""
    order = QUESTIONS[i % len(QUESTIONS):] + QUESTIONS[: i % len(QUESTIONS)]
    history = " ".join(f"[{j + 1}] {q}" for j, q in enumerate(order * 4))
    head = f"Ticket {7000 + i} history follows. "
    tail = " Summarise the open issues for the agent."
    overhead = len(chat_ids(tokenizer, head + tail))
    body = tokenizer.encode(history, add_special_tokens=False)
    budget = n_tokens - overhead
    ids: list[int] = []
    for _ in range(6):  # decode/encode round trips can shift a token or two
        ids = chat_ids(tokenizer, head + tokenizer.decode(body[: max(0, budget)]) + tail)
        if len(ids) == n_tokens:
            break
        budget += n_tokens - len(ids)
    return ids
