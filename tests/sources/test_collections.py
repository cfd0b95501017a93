from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sources.models import Collection
from sources.services.collections import CollectionError, collection_create, collection_grant, collection_revoke

pytestmark = pytest.mark.django_db


def foundry(*args: str) -> str:
    out = StringIO()
    call_command("foundry", *args, stdout=out)
    return out.getvalue()


def test_create_grant_revoke_are_idempotent(make_user: object) -> None:
    make_user("alice")
    coll = collection_create(name="manuals", public=False)
    assert collection_grant(collection="manuals", username="alice") is True
    assert collection_grant(collection="manuals", username="alice") is False
    assert list(coll.readers.values_list("username", flat=True)) == ["alice"]
    assert collection_revoke(collection="manuals", username="alice") is True
    assert collection_revoke(collection="manuals", username="alice") is False
    assert not coll.readers.exists()


@pytest.mark.parametrize("name", ["../etc", "has space", "", "a/b", "x" * 101, "-x", "--"])
def test_create_rejects_names_that_are_not_slugs(name: str) -> None:
    with pytest.raises(CollectionError):
        collection_create(name=name)
    assert not Collection.objects.exists()


def test_create_twice_and_unknown_names_are_errors(make_user: object) -> None:
    collection_create(name="manuals")
    with pytest.raises(CollectionError, match="already exists"):
        collection_create(name="manuals")
    with pytest.raises(CollectionError, match="collection 'manuals' already exists \\(names that differ only in case"):
        collection_create(name="Manuals")
    with pytest.raises(CollectionError, match="no user"):
        collection_grant(collection="manuals", username="nobody")
    with pytest.raises(CollectionError, match="no collection"):
        collection_grant(collection="nothing", username="nobody")


def test_cli_round_trip(make_user: object) -> None:
    make_user("alice")
    assert "Created collection manuals (public)" in foundry("collections", "create", "manuals", "--public")
    assert "alice can now read collection manuals" in foundry("collections", "grant", "manuals", "alice")
    listing = foundry("collections", "list")
    assert "manuals" in listing and "yes" in listing and "alice" in listing
    assert "alice can no longer read" in foundry("collections", "revoke", "manuals", "alice")


def test_cli_errors_are_clear() -> None:
    with pytest.raises(CommandError, match="no collection named 'ghost'"):
        foundry("collections", "grant", "ghost", "alice")
