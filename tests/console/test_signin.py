"""Sign in and out, password change, and the throttle on failed sign-ins."""

from __future__ import annotations

import pytest

from tandem.console import throttle
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_throttle(redis_client):
    for key in redis_client.scan_iter(throttle.PREFIX + ":*"):
        redis_client.delete(key)


def test_sign_in_then_out(client, world):
    page = client.get("/console/login/").content.decode()
    assert '<label for="id_username">Username</label>' in page and '<label for="id_password">Password</label>' in page
    response = client.post("/console/login/", {"username": world.owner_a.username, "password": PASSWORD})
    # An owner's role has the inbox: that is where they land (tests/handoff/test_inbox_workspace.py).
    assert response.status_code == 302 and response["Location"] == "/console/t/alpha/inbox/"
    assert client.get("/console/t/alpha/").status_code == 200
    assert client.post("/console/logout/").status_code == 302
    assert client.get("/console/t/alpha/").status_code == 302


def test_failed_sign_ins_are_throttled_even_with_the_right_password_after(client, world):
    name = world.owner_a.username
    for _ in range(throttle.MAX_PER_USERNAME):
        wrong = client.post("/console/login/", {"username": name, "password": "wrong"})
        assert wrong.status_code == 200 and "Please enter a correct username and password" in wrong.content.decode()
    refused = client.post("/console/login/", {"username": name, "password": PASSWORD})
    assert refused.status_code == 429
    assert "Too many failed sign-in attempts" in refused.content.decode()
    assert int(refused["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session
    # another person is not locked out by it
    ok = client.post("/console/login/", {"username": world.viewer_a.username, "password": PASSWORD})
    assert ok.status_code == 302


def test_a_successful_sign_in_clears_the_count(client, world):
    name = world.owner_a.username
    for _ in range(throttle.MAX_PER_USERNAME - 1):
        client.post("/console/login/", {"username": name, "password": "wrong"})
    assert client.post("/console/login/", {"username": name, "password": PASSWORD}).status_code == 302
    client.post("/console/logout/")
    for _ in range(throttle.MAX_PER_USERNAME - 1):
        client.post("/console/login/", {"username": name, "password": "wrong"})
    assert client.post("/console/login/", {"username": name, "password": PASSWORD}).status_code == 302


def test_the_admin_sign_in_goes_through_the_console_sign_in(client, world):
    response = client.get("/admin/login/?next=/admin/tenants/")
    assert response.status_code == 302
    assert response["Location"] == "/console/login/?next=%2Fadmin%2Ftenants%2F"
    client.force_login(world.viewer_a)  # signed in, not staff: no redirect loop
    assert client.get("/admin/login/?next=/admin/")["Location"] == "/console/"


def test_password_change(client, world):
    client.force_login(world.owner_a)
    page = client.get("/console/password/").content.decode()
    assert "Old password" in page and "<button type=\"submit\">Save</button>" in page
    bad = client.post("/console/password/", {"old_password": "nope", "new_password1": "x", "new_password2": "y"})
    assert bad.status_code == 200 and 'class="errorlist"' in bad.content.decode()
    ok = client.post("/console/password/", {"old_password": PASSWORD, "new_password1": "a brand new secret",
                                            "new_password2": "a brand new secret"})
    assert ok.status_code == 302
    world.owner_a.refresh_from_db()
    assert world.owner_a.check_password("a brand new secret")


def test_a_live_panel_polling_after_sign_out_sends_the_whole_page_to_sign_in(client, world):
    response = client.get("/console/live/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/console/t/alpha/")
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/console/login/?next=%2Fconsole%2Ft%2Falpha%2F"
    assert client.get("/console/t/alpha/live/", HTTP_HX_REQUEST="true")["HX-Redirect"].startswith("/console/login/")
