from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser

from sources import selectors
from tests.conftest import World

pytestmark = pytest.mark.django_db


def names(qs: object) -> set[str]:
    return {c.name for c in qs}


def test_reader_sees_own_and_public_collections(world: World) -> None:
    assert names(selectors.readable_collections(world.users["alice"])) == {"alpha", "handbook"}
    assert names(selectors.readable_collections(world.users["bob"])) == {"beta", "handbook"}


def test_superuser_sees_everything_staff_does_not(world: World) -> None:
    assert names(selectors.readable_collections(world.users["root"])) == {"alpha", "beta", "handbook"}
    # Staff status alone grants no reading rights.
    assert names(selectors.readable_collections(world.users["carol"])) == {"alpha", "handbook"}


def test_anonymous_and_inactive_users_see_nothing(world: World) -> None:
    assert not selectors.readable_collections(AnonymousUser()).exists()
    alice = world.users["alice"]
    alice.is_active = False
    assert not selectors.readable_sources(alice).exists()


def test_sources_chunks_and_ids_follow_the_collections(world: World) -> None:
    alice = world.users["alice"]
    assert {s.path for s in selectors.readable_sources(alice)} == {"alpha.md", "handbook.md"}
    readable = world.chunks["alpha"] + world.chunks["handbook"]
    assert {c.pk for c in selectors.readable_chunks(alice)} == {c.pk for c in readable}
    assert selectors.readable_collection_ids(alice) == sorted([world.collections[n].pk for n in ("alpha", "handbook")])


def test_a_reader_in_two_ways_is_not_counted_twice(world: World) -> None:
    world.collections["handbook"].readers.add(world.users["alice"])
    assert selectors.readable_sources(world.users["alice"]).count() == 2


def test_upload_needs_membership_unless_staff(world: World) -> None:
    assert names(selectors.uploadable_collections(world.users["alice"])) == {"alpha"}
    assert names(selectors.uploadable_collections(world.users["carol"])) == {"alpha", "beta", "handbook"}
    assert not selectors.uploadable_collections(AnonymousUser()).exists()
