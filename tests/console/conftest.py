"""What the console's tests share: the world (tests/world.py) and a Django admin form's data."""

from __future__ import annotations

# The world and its helpers live in tests/world.py, a plugin of tests/conftest.py, since the
# hand-off's tests use them too; the console's tests, and other packages', import them from here.
from tests.world import PASSWORD, conversation, forget_quota_counters, user, world  # noqa: F401


def admin_form_data(page, **fields) -> dict:
    """What a browser submits from a Django admin change or add page: every field of the
    main form and of its inline forms as the page fills them in, then `fields` on top."""
    form = {}
    main = page.context["adminform"].form
    for name in main.fields:
        value = main[name].value()
        if isinstance(value, bool):
            if value:
                form[name] = "on"
        elif value is not None:
            form[name] = value
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        form.update({f"{formset.prefix}-{k}": v for k, v in formset.management_form.initial.items()})
        for f in formset.forms:
            form.update({f.add_prefix(name): f[name].value() for name in f.fields if f[name].value() is not None})
    form.update(fields)
    return form
