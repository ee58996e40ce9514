"""The hand-off: a conversation goes from the assistant to a person of the tenant and back
(docs/handoff.md). One package for the feature, whichever surface it shows on:

    states.py        the state machine of who answers (bot, pending_human, human,
                     resolved), one conditional UPDATE per edge; agents' replies and
                     notes; the visitor's messages held for a person; typing; what the
                     CPU tier's "asks for a person in words" check needs (`handoff_spec`)
    assignment.py    agents' presence (online / away, heartbeats), whom a conversation
                     may be assigned to, round-robin, and the `handoff` event's reach
                     (`unreachable`: nobody online, or out of business hours)
    offline.py       the widget's offline form and its answer by e-mail
    events.py        a conversation's live events and the tenant's inbox feed (Redis
                     Streams), which every socket below tails
    live.py          the widget socket's side (tandem.chat.consumers owns the socket):
                     "talk to a person", typing, events forwarded as frames
    agent_socket.py  `/ws/agent/<slug>/<conversation>/`: one conversation, live, for an
                     agent; streams a suggested reply (drafts.py) into their reply box
    inbox_feed.py    `/ws/agent/<slug>/`: an agent's notifications on every console page
    drafts.py        "suggest a reply": the assistant's draft for the agent who owns it
    inbox.py         the inbox's reads: lists, filters, counts, transcript, side panel
    bulk.py          the inbox's bulk actions on ticked conversations
    views.py         the inbox's console pages and POSTs (thin)
    phrases.py       hand-over phrases as a person edits them, to and from the one
                     stored field (`Tenant.handover_patterns`)

What stays elsewhere, and why:
- The models (`Conversation.handoff` and its fields, `AgentPresence`, `OfflineMessage`)
  stay in tandem.chat with their migrations: moving models between apps is a migration
  risk worth nothing here. So this package is no Django app: it has no models, and its
  pages use the console's URLs (tandem/console/urls.py, names "console:inbox…"),
  templates (templates/console/inbox*.html) and template tags
  (tandem.console.templatetags.inbox).
- The matching of phrases in a visitor's message runs on the CPU tier
  (inference/text/handover.py), which imports nothing of `tandem`; the tenant's fields
  keep their stored names (`Tenant.handover_patterns`, `handover_text`,
  `handover_round_robin`), as do the request spec's keys and the wire's frame types.
- The pipeline reports a reply that handed over to tandem.chat.reply_sink, which calls
  `states.handoff_by_assistant` and `states.announce_waiting`.
- A person's access stream, which the agent sockets watch, is the console's
  (tandem.console.access_events): every console socket closes on it.

The spelling in code is "handoff"; what people read says "hand-over" or "a person"."""
