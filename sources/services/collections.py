"""Collections and who may read them."""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug

from sources.models import Collection

logger = logging.getLogger(__name__)


class CollectionError(ValueError):
    """A collection command cannot be carried out; the message says why."""


def _collection(name: str) -> Collection:
    collection = Collection.objects.filter(name=name).first()
    if collection is None:
        raise CollectionError(f"no collection named {name!r}")
    return collection


def _user(username: str) -> User:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CollectionError(f"no user named {username!r}")
    return user


def collection_name_check(name: str) -> None:
    """A new collection's name is a slug because it is also a folder name for uploads, and a new one."""
    try:
        validate_slug(name)
    except ValidationError:
        raise CollectionError(f"invalid collection name {name!r}: use letters, digits, '-' and '_'") from None
    if len(name) > 100:
        raise CollectionError("collection name is longer than 100 characters")
    if name.startswith("-"):  # the command line would read it as an option
        raise CollectionError(f"invalid collection name {name!r}: it must not start with '-'")
    existing = Collection.objects.filter(name__iexact=name).first()
    if existing is not None:  # names differing only in case are one folder on some file systems, and confusing
        same = "" if existing.name == name else " (names that differ only in case are the same name)"
        raise CollectionError(f"collection {existing.name!r} already exists{same}")


def collection_create(*, name: str, description: str = "", public: bool = False) -> Collection:
    """Create a collection."""
    collection_name_check(name)
    collection = Collection.objects.create(name=name, description=description, public=public)
    logger.info("collection created id=%s", collection.pk)
    return collection


def collection_grant(*, collection: str, username: str) -> bool:
    """Make ``username`` a reader of ``collection``. Returns False if they already were (idempotent)."""
    coll, user = _collection(collection), _user(username)
    if coll.readers.filter(pk=user.pk).exists():
        return False
    coll.readers.add(user)
    logger.info("collection grant collection=%s user=%s", coll.pk, user.pk)
    return True


def collection_revoke(*, collection: str, username: str) -> bool:
    """Remove ``username`` from the readers of ``collection``. Returns False if they were not one."""
    coll, user = _collection(collection), _user(username)
    if not coll.readers.filter(pk=user.pk).exists():
        return False
    coll.readers.remove(user)
    logger.info("collection revoke collection=%s user=%s", coll.pk, user.pk)
    return True
