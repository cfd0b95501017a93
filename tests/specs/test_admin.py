from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from specs import services
from specs.models import FeatureSpec, SpecStatus, SpecVersion
from tests.specs.conftest import spec_approved, spec_in_review

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/specs/featurespec/"


@pytest.fixture
def admin_client(client: Client, admin_user: User) -> Client:
    client.force_login(admin_user)
    return client


def ids(*names: str) -> list[int]:
    return list(FeatureSpec.objects.filter(name__in=names).values_list("pk", flat=True))


def post_action(client: Client, action: str, names: list[str], **extra: str) -> list[str]:
    response = client.post(
        CHANGELIST, {"action": action, "_selected_action": ids(*names), "index": 0, **extra}, follow=True
    )
    assert response.status_code == 200
    return [str(m) for m in response.context["messages"]]


def test_changelist_filters_and_search(admin_client: Client, author: User, reviewer: User) -> None:
    spec_approved("wiring-guide", author, reviewer)
    spec_in_review("install", author)
    page = admin_client.get(CHANGELIST)
    assert page.status_code == 200 and b"wiring-guide" in page.content and b"install" in page.content
    in_review = admin_client.get(CHANGELIST, {"status": "in_review"})
    assert b"install" in in_review.content and b"wiring-guide" not in in_review.content
    in_use = admin_client.get(CHANGELIST, {"approved": "yes"})
    assert list(in_use.context["cl"].result_list) == list(FeatureSpec.objects.filter(name="wiring-guide"))
    found = admin_client.get(CHANGELIST, {"q": "wiring"})
    assert [s.name for s in found.context["cl"].result_list] == ["wiring-guide"]
    for url in (
        "/admin/specs/specversion/",
        "/admin/specs/specdecision/",
        f"{CHANGELIST}{ids('wiring-guide')[0]}/change/",
    ):
        assert admin_client.get(url).status_code == 200


def test_add_and_edit_go_through_the_services(admin_client: Client, author: User, reviewer: User) -> None:
    response = admin_client.post(f"{CHANGELIST}add/", {"name": "guide", "title": "Guide", "body": "# G\r\n\r\nv1"})
    assert response.status_code == 302
    version = SpecVersion.objects.get(spec__name="guide")
    assert (version.number, version.status, version.body) == (1, SpecStatus.DRAFT, "# G\n\nv1\n")
    services.spec_submit(name="guide", by=author)
    services.spec_approve(name="guide", by=reviewer)
    change = f"{CHANGELIST}{ids('guide')[0]}/change/"
    admin_client.post(change, {"title": "Guide", "body": "# G\r\n\r\nv1"})  # unchanged (CRLF from a browser)
    assert SpecVersion.objects.count() == 1
    admin_client.post(change, {"title": "Guide", "body": "# G\r\n\r\nv2"})
    assert [(v.number, v.status) for v in SpecVersion.objects.order_by("number")] == [
        (1, SpecStatus.APPROVED),
        (2, SpecStatus.DRAFT),
    ]


def test_add_rejects_bad_names(admin_client: Client) -> None:
    response = admin_client.post(f"{CHANGELIST}add/", {"name": "Bad Name", "title": "x", "body": "x"})
    assert response.status_code == 200 and not FeatureSpec.objects.exists()


def test_submit_and_approve_report_per_item(admin_client: Client, author: User) -> None:
    services.spec_create(name="a-spec", title="A", body="a", by=author)
    spec_in_review("b-spec", author)
    msgs = post_action(admin_client, "submit_selected", ["a-spec", "b-spec"])
    assert "Version 1 of 'a-spec' submitted for review." in msgs
    assert any(m.startswith("cannot submit 'b-spec': version 1 is in review") for m in msgs)
    msgs = post_action(admin_client, "approve_selected", ["a-spec", "b-spec"])
    assert msgs == ["Version 1 of 'a-spec' approved.", "Version 1 of 'b-spec' approved."]
    assert set(SpecVersion.objects.values_list("status", flat=True)) == {SpecStatus.APPROVED}
    assert SpecVersion.objects.filter(decided_by__username="root").count() == 2


def test_reject_asks_for_a_note_first(admin_client: Client, author: User) -> None:
    spec_in_review("guide", author)
    confirm = admin_client.post(CHANGELIST, {"action": "reject_selected", "_selected_action": ids("guide"), "index": 0})
    assert confirm.status_code == 200 and b"Reject feature specs" in confirm.content
    assert SpecVersion.objects.get().status == SpecStatus.IN_REVIEW
    empty = admin_client.post(
        CHANGELIST, {"action": "reject_selected", "_selected_action": ids("guide"), "confirm": "yes", "note": " "}
    )
    assert b"This field is required" in empty.content
    assert SpecVersion.objects.get().status == SpecStatus.IN_REVIEW
    done = admin_client.post(
        CHANGELIST,
        {"action": "reject_selected", "_selected_action": ids("guide"), "confirm": "yes", "note": "Too vague."},
        follow=True,
    )
    assert "Version 1 of 'guide' rejected." in [str(m) for m in done.context["messages"]]
    version = SpecVersion.objects.get()
    assert (version.status, version.decision_note) == (SpecStatus.REJECTED, "Too vague.")


def test_staff_reviewer_cannot_approve_own_spec_in_admin(client: Client, reviewer: User, author: User) -> None:
    reviewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_featurespec", "change_featurespec"]))
    client.force_login(reviewer)
    spec_in_review("own", reviewer)
    spec_in_review("theirs", author)
    msgs = post_action(client, "approve_selected", ["own", "theirs"])
    assert any(m.startswith("rita may not approve 'own' version 1") for m in msgs)
    assert "Version 1 of 'theirs' approved." in msgs


def test_approve_actions_hidden_without_permission(client: Client, author: User, outsider: User) -> None:
    outsider.is_staff = True
    outsider.save()
    outsider.user_permissions.add(*Permission.objects.filter(codename__in=["view_featurespec", "change_featurespec"]))
    client.force_login(outsider)
    spec_in_review("guide", author)
    choices = [c[0] for c in client.get(CHANGELIST).context["action_form"].fields["action"].choices]
    assert "submit_selected" in choices and "approve_selected" not in choices and "reject_selected" not in choices
    client.post(CHANGELIST, {"action": "approve_selected", "_selected_action": ids("guide"), "index": 0})
    assert SpecVersion.objects.get().status == SpecStatus.IN_REVIEW


def test_approve_permission_alone_opens_the_admin_and_approves(client: Client, reviewer: User, author: User) -> None:
    """docs/specs.md: approving needs staff status and ``specs.approve_featurespec``, not also ``view_featurespec``."""
    assert not reviewer.has_perm("specs.view_featurespec")
    client.force_login(reviewer)
    spec_in_review("theirs", author, body="# Wiring guide\n\nWrite wiring guides for the RS-485 bus.\n")
    index = client.get("/admin/").content.decode()
    assert "You don’t have permission to view or edit anything" not in index and CHANGELIST in index
    page = client.get(CHANGELIST)
    assert page.status_code == 200 and b"theirs" in page.content
    choices = [c[0] for c in page.context["action_form"].fields["action"].choices]
    assert "approve_selected" in choices and "reject_selected" in choices
    change = client.get(f"{CHANGELIST}{ids('theirs')[0]}/change/")
    assert change.status_code == 200 and b"Write wiring guides for the RS-485 bus." in change.content
    version = SpecVersion.objects.get(spec__name="theirs")
    assert client.get(f"/admin/specs/specversion/{version.pk}/change/").status_code == 200
    assert client.get("/admin/specs/specdecision/").status_code == 200
    assert post_action(client, "approve_selected", ["theirs"]) == ["Version 1 of 'theirs' approved."]
    version.refresh_from_db()
    assert (version.status, version.decided_by) == (SpecStatus.APPROVED, reviewer)
    # Viewing is all the permission adds: the spec cannot be edited or added.
    client.post(f"{CHANGELIST}{ids('theirs')[0]}/change/", {"title": "Hijacked", "body": "x"})
    assert FeatureSpec.objects.get(name="theirs").title == "Theirs" and SpecVersion.objects.count() == 1
    assert client.get(f"{CHANGELIST}add/").status_code == 403


def test_staff_without_the_approve_permission_still_sees_no_specs(client: Client, author: User, outsider: User) -> None:
    outsider.is_staff = True
    outsider.save()
    client.force_login(outsider)
    spec_in_review("guide", author)
    assert client.get(CHANGELIST).status_code == 403
    assert client.get("/admin/specs/specversion/").status_code == 403
