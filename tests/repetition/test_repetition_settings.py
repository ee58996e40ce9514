"""A tenant's repetition control: on by default with the measured penalties, off or
changed in the console (audited, ranges checked), and what Tandem's own surfaces sample
with; a request's own penalty wins over the tenant's."""

from __future__ import annotations

import pytest

from tandem.chat.sampling import WIDGET_REPETITION, sampling_for_tandem, sampling_options
from tandem.chat.validation import InvalidInput
from tandem.repetition.models import RepetitionSettings
from tenants.models import AuditLog, Membership
from tests.console.conftest import user
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def penalties(sampling) -> tuple[float, float, float]:
    return sampling.frequency_penalty, sampling.presence_penalty, sampling.repetition_penalty


def test_without_settings_replies_use_the_measured_defaults_and_a_request_overrides_them():
    quota = make_tenant(slug="defaults").tenant.quota
    assert WIDGET_REPETITION != (0.0, 0.0, 1.0)  # on by default
    assert penalties(sampling_for_tandem(quota=quota)) == WIDGET_REPETITION
    assert sampling_for_tandem(quota=quota, frequency_penalty=0.0).frequency_penalty == 0.0


def test_turned_off_no_penalty_applies_and_set_values_are_used():
    tenant = make_tenant(slug="tuned").tenant
    RepetitionSettings.objects.create(tenant=tenant, enabled=False, frequency_penalty=1.0, presence_penalty=0.2,
                                      repetition_penalty=1.3)
    assert penalties(sampling_for_tandem(quota=tenant.quota)) == (0.0, 0.0, 1.0)
    RepetitionSettings.objects.filter(tenant=tenant).update(enabled=True)
    assert penalties(sampling_for_tandem(quota=tenant.quota)) == (1.0, 0.2, 1.3)


@pytest.mark.parametrize("raw,param", [
    ("hot", "sampling"), ({"temperature": 3}, "sampling.temperature"), ({"top_p": 0}, "sampling.top_p"),
    ({"max_tokens": 0}, "sampling.max_tokens"), ({"seed": 1.5}, "sampling.seed"),
    ({"frequency_penalty": "x"}, "sampling.frequency_penalty"), ({"temperature": True}, "sampling.temperature"),
    ({"logit_bias": {}}, "sampling.logit_bias"),
])
def test_a_sockets_bad_sampling_option_names_itself(raw, param):
    with pytest.raises(InvalidInput) as exc:
        sampling_options(raw)
    assert exc.value.code == "invalid_sampling" and exc.value.param == param


def test_good_sampling_options_pass_and_null_ones_are_dropped():
    assert sampling_options({"temperature": 0.7, "top_p": 0.9, "max_tokens": 5, "seed": -3,
                             "repetition_penalty": 1.1, "presence_penalty": None}) == {
        "temperature": 0.7, "top_p": 0.9, "max_tokens": 5, "seed": -3, "repetition_penalty": 1.1}


def test_the_console_page_saves_audited_refuses_out_of_range_and_reads_only_for_viewers(client):
    t = make_tenant(slug="echo").tenant
    admin, viewer = user(), user()
    Membership.objects.create(user=admin, tenant=t, role="admin")
    Membership.objects.create(user=viewer, tenant=t, role="viewer")
    url = "/console/t/echo/assistant/repetition/"
    client.force_login(admin)
    page = client.get(url).content.decode()
    assert "Frequency penalty" in page and "(Tandem's defaults.)" in page
    assert 'aria-label="Repetition control"' in page
    assert "Change repetition control" in client.get("/console/t/echo/assistant/").content.decode()
    bad = client.post(url, {"enabled": "on", "frequency_penalty": "3", "presence_penalty": "0",
                            "repetition_penalty": "1"})
    assert bad.status_code == 400 and not RepetitionSettings.objects.filter(tenant=t).exists()
    ok = client.post(url, {"frequency_penalty": "0.7", "presence_penalty": "0.1", "repetition_penalty": "1.05"})
    assert ok.status_code == 302
    row = RepetitionSettings.objects.get(tenant=t)
    assert (row.enabled, row.frequency_penalty, row.presence_penalty, row.repetition_penalty) == (False, 0.7, 0.1, 1.05)
    entry = AuditLog.objects.filter(tenant=t, entity="repetition_settings").latest("pk")
    assert entry.actor == admin and "Repetition control off" in entry.summary
    client.force_login(viewer)
    read_only = client.get(url).content.decode()
    assert 'aria-label="Repetition control"' not in read_only and "Off: replies" in read_only
    assert client.post(url, {"frequency_penalty": "0", "presence_penalty": "0", "repetition_penalty": "1"}
                       ).status_code in (403, 404)
    assert RepetitionSettings.objects.get(tenant=t).frequency_penalty == 0.7
