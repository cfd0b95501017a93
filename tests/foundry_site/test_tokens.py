from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from foundry_site.models import ApiToken
from foundry_site.services.tokens import (
    TokenError,
    token_authenticate,
    token_check,
    token_create,
    token_hash,
    token_revoke,
)

pytestmark = pytest.mark.django_db


def test_token_is_stored_only_as_hash(make_user: object) -> None:
    make_user("alice")
    new = token_create(username="alice", name="laptop")
    row = ApiToken.objects.get()
    assert row.token_hash == token_hash(new.plain) and new.plain not in row.token_hash
    assert new.plain.startswith(row.prefix) and len(row.prefix) < 12
    assert token_authenticate(new.plain).username == "alice"


def test_wrong_revoked_and_inactive_tokens_do_not_authenticate(make_user: object) -> None:
    alice = make_user("alice")
    new = token_create(username="alice")
    assert token_authenticate(new.plain + "x") is None
    assert token_authenticate("") is None
    alice.is_active = False
    alice.save()
    assert token_authenticate(new.plain) is None
    alice.is_active = True
    alice.save()
    token_revoke(token_id=new.token.pk)
    assert token_authenticate(new.plain) is None


def test_a_refused_token_says_why(make_user: object) -> None:
    alice = make_user("alice")
    new = token_create(username="alice")
    assert token_check(new.plain) == (alice, "")
    assert token_check("not-a-token")[1].startswith(
        "The bearer token sent is malformed: a Foundry token starts with fdy_"
    )
    assert "malformed" in token_check("fdy_" + "x" * 300)[1]
    assert token_check(new.plain + "x")[1].startswith("The bearer token sent is unknown")
    alice.is_active = False
    alice.save()
    assert token_check(new.plain)[1].startswith("The bearer token sent belongs to a deactivated user")
    token_revoke(token_id=new.token.pk)
    assert token_check(new.plain)[1].startswith("The bearer token sent was revoked")


def test_revoke_twice_or_unknown_is_an_error(make_user: object) -> None:
    make_user("alice")
    new = token_create(username="alice")
    token_revoke(token_id=new.token.pk)
    with pytest.raises(TokenError, match="already revoked"):
        token_revoke(token_id=new.token.pk)
    with pytest.raises(TokenError, match="no API token"):
        token_revoke(token_id=9999)
    with pytest.raises(TokenError, match="no user"):
        token_create(username="nobody")


def test_last_used_is_recorded_at_most_once_a_minute(make_user: object) -> None:
    make_user("alice")
    new = token_create(username="alice")
    token_authenticate(new.plain)
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    token_authenticate(new.plain)
    assert ApiToken.objects.get().last_used_at == first
    ApiToken.objects.update(last_used_at=timezone.now() - timedelta(minutes=5))
    token_authenticate(new.plain)
    assert ApiToken.objects.get().last_used_at > first - timedelta(minutes=1)


def test_cli_prints_token_once_and_revokes(make_user: object) -> None:
    make_user("alice")
    out = StringIO()
    call_command("foundry", "tokens", "create", "alice", "--name", "ci", stdout=out)
    plain = re.search(r"^(fdy_\S+)$", out.getvalue(), re.M).group(1)
    token = ApiToken.objects.get()
    assert token.name == "ci" and token_authenticate(plain) is not None

    listing = StringIO()
    call_command("foundry", "tokens", "list", stdout=listing)
    assert token.prefix in listing.getvalue() and plain not in listing.getvalue()

    call_command("foundry", "tokens", "revoke", str(token.pk), stdout=StringIO())
    assert token_authenticate(plain) is None
    with pytest.raises(CommandError, match="already revoked"):
        call_command("foundry", "tokens", "revoke", str(token.pk), stdout=StringIO())


def test_admin_revoke_action(client: object, make_user: object) -> None:
    make_user("alice")
    admin = make_user("root", superuser=True)
    new = token_create(username="alice")
    client.force_login(admin)
    response = client.post(
        "/admin/foundry_site/apitoken/", {"action": "revoke_selected", "_selected_action": [new.token.pk]}, follow=True
    )
    assert response.status_code == 200
    assert "Revoked 1 token(s)." in response.content.decode()
    assert token_authenticate(new.plain) is None
    assert client.get("/admin/foundry_site/apitoken/add/").status_code == 403
