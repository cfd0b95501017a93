"""Users with the roles the spec workflow distinguishes, and a helper to get a spec into review."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from specs import services
from specs.models import SpecVersion


@pytest.fixture
def author(db: Any) -> User:
    return User.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def reviewer(db: Any) -> User:
    user = User.objects.create_user("rita", password="pw-rita-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    return User.objects.get(pk=user.pk)  # fresh instance: permissions are cached per object


@pytest.fixture
def outsider(db: Any) -> User:
    return User.objects.create_user("otto", password="pw-otto-123")


@pytest.fixture
def admin_user(db: Any) -> User:
    return User.objects.create_superuser("root", "root@example.com", "pw-root-123")


def spec_in_review(name: str, by: User, body: str = "# Wiring guide\n\nWrite wiring guides.\n") -> SpecVersion:
    services.spec_create(name=name, title=name.title(), body=body, by=by)
    return services.spec_submit(name=name, by=by)


def spec_approved(name: str, author: User, reviewer: User, body: str = "# Spec\n\nBody.\n") -> SpecVersion:
    spec_in_review(name, author, body)
    return services.spec_approve(name=name, by=reviewer)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """The users here need passwords only to exist; PBKDF2 would dominate the run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
