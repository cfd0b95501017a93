from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from specs import services
from specs.errors import SpecNotFound, SpecSelectionError
from specs.models import SpecStatus, SpecVersion
from specs.selectors import spec_for_generation
from tests.specs.conftest import spec_approved, spec_in_review

pytestmark = pytest.mark.django_db


def test_none_approved_says_how_to_approve_one(author: User) -> None:
    spec_in_review("draft-only", author)
    with pytest.raises(SpecSelectionError) as caught:
        spec_for_generation()
    message = str(caught.value)
    assert message.startswith("No approved feature spec.")
    assert "foundry specs import FILE.md" in message and "foundry specs approve NAME" in message


def test_exactly_one_approved_is_selected_automatically(author: User, reviewer: User) -> None:
    spec_approved("wiring-guide", author, reviewer, body="# Wiring\n\nRules.")
    spec_in_review("other", author)
    selected = spec_for_generation()
    assert (selected.name, selected.version, selected.body) == ("wiring-guide", 1, "# Wiring\n\nRules.\n")
    assert selected.approved_by == "rita" and selected.approved_at is not None


def test_several_approved_require_a_name_and_list_the_options(author: User, reviewer: User) -> None:
    spec_approved("wiring-guide", author, reviewer)
    spec_approved("install", author, reviewer)
    expected = r"Several approved feature specs: install, wiring-guide\. Choose one with --feature NAME\."
    with pytest.raises(SpecSelectionError, match=expected):
        spec_for_generation()
    assert spec_for_generation("install").name == "install"
    assert spec_for_generation(name="wiring-guide.md").name == "wiring-guide"


def test_named_spec_without_approved_version(author: User, reviewer: User) -> None:
    spec_approved("install", author, reviewer)
    spec_in_review("wiring-guide", author)
    with pytest.raises(
        SpecSelectionError,
        match=r"'wiring-guide' has no approved version \(latest is version 1, "
        r"in review\)\. Approved specs: install\.",
    ):
        spec_for_generation("wiring-guide")
    with pytest.raises(SpecNotFound, match="Known specs: install, wiring-guide"):
        spec_for_generation("nope")


def test_approved_version_stays_in_use_until_a_newer_one_is_approved(author: User, reviewer: User) -> None:
    spec_approved("guide", author, reviewer, body="v1")
    services.spec_edit(name="guide", body="v2", by=author)
    assert spec_for_generation().body == "v1\n"
    services.spec_submit(name="guide", by=author)
    assert spec_for_generation().body == "v1\n"
    services.spec_approve(name="guide", by=reviewer)
    selected = spec_for_generation()
    assert (selected.version, selected.body) == (2, "v2\n")
    v1 = SpecVersion.objects.get(number=1)
    assert v1.status == SpecStatus.ARCHIVED and v1.decision_note == "Superseded by version 2."


def test_rejected_new_version_keeps_the_old_approved_one(author: User, reviewer: User) -> None:
    spec_approved("guide", author, reviewer, body="v1")
    services.spec_edit(name="guide", body="v2", by=author)
    services.spec_submit(name="guide", by=author)
    services.spec_reject(name="guide", by=reviewer, note="no")
    assert spec_for_generation().version == 1


def test_archived_spec_is_no_longer_selected(author: User, reviewer: User) -> None:
    spec_approved("guide", author, reviewer)
    services.spec_archive(name="guide", by=reviewer)
    with pytest.raises(SpecSelectionError, match="No approved feature spec"):
        spec_for_generation()
