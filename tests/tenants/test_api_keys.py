import pytest

from tenants import keys, services
from tenants.models import ApiKey
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


def test_secret_key_plaintext_is_never_stored():
    created = make_tenant()
    plaintext = created.secret_key.plaintext
    row = ApiKey.objects.get(pk=created.secret_key.api_key.pk)
    stored = [str(getattr(row, f.attname)) for f in ApiKey._meta.concrete_fields]
    assert all(plaintext not in value for value in stored)
    assert row.key_hash == keys.hash_key(plaintext)
    assert row.prefix == plaintext[: keys.DISPLAY_CHARS]
    assert plaintext.startswith("sk_") and len(plaintext) > 40


def test_authenticate_returns_the_key_and_its_tenant():
    created = make_tenant()
    api_key = services.api_key_authenticate(plaintext=created.secret_key.plaintext)
    assert api_key.tenant == created.tenant
    assert api_key.last_used_at is not None


@pytest.mark.parametrize("bad", ["", "sk_wrong", "x" * 500, None])
def test_authenticate_rejects_a_wrong_key(bad):
    make_tenant()
    with pytest.raises(services.AuthenticationFailed):
        services.api_key_authenticate(plaintext=bad)


def test_authenticate_rejects_a_revoked_key():
    created = make_tenant()
    services.api_key_revoke(api_key=created.secret_key.api_key)
    with pytest.raises(services.AuthenticationFailed) as exc:
        services.api_key_authenticate(plaintext=created.secret_key.plaintext)
    assert exc.value.code == "revoked_api_key"


def test_authenticate_rejects_a_key_of_an_inactive_tenant():
    created = make_tenant()
    created.tenant.is_active = False
    created.tenant.save()
    with pytest.raises(services.AuthenticationFailed) as exc:
        services.api_key_authenticate(plaintext=created.secret_key.plaintext)
    assert exc.value.code == "tenant_inactive"


def test_authenticate_rejects_a_widget_key_where_a_secret_key_is_required():
    created = make_tenant()
    with pytest.raises(services.AuthenticationFailed) as exc:
        services.api_key_authenticate(plaintext=created.widget_key.plaintext, kind=ApiKey.Kind.SECRET)
    assert exc.value.code == "wrong_key_kind"


def test_rotating_revokes_the_old_secret_key_and_the_new_one_works():
    created = make_tenant()
    issued = services.tenant_rotate_secret_key(tenant=created.tenant)
    with pytest.raises(services.AuthenticationFailed):
        services.api_key_authenticate(plaintext=created.secret_key.plaintext)
    assert services.api_key_authenticate(plaintext=issued.plaintext).tenant == created.tenant


def test_widget_key_only_works_from_its_allowed_origins():
    created = make_tenant(origins=["https://shop.acme.test"])
    widget = created.widget_key.api_key
    assert services.origin_allowed(api_key=widget, origin="https://shop.acme.test")
    assert services.origin_allowed(api_key=widget, origin="https://SHOP.acme.test/")
    assert not services.origin_allowed(api_key=widget, origin="https://evil.test")
    assert not services.origin_allowed(api_key=widget, origin=None)


def test_refreshing_a_key_reads_its_tenant_again_and_refuses_it_once_revoked():
    created = make_tenant()
    held = services.api_key_authenticate(plaintext=created.widget_key.plaintext)
    quota = created.tenant.quota
    quota.max_output_tokens = 11
    quota.save()
    assert services.api_key_refresh(api_key=held).tenant.quota.max_output_tokens == 11
    services.api_key_revoke(api_key=created.widget_key.api_key)
    with pytest.raises(services.AuthenticationFailed) as exc:
        services.api_key_refresh(api_key=held)
    assert exc.value.code == "revoked_api_key"
