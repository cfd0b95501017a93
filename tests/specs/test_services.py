from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User

from specs import services
from specs.errors import SpecInputError, SpecNotFound, SpecPermissionError, SpecTransitionError
from specs.models import FeatureSpec, SpecDecision, SpecStatus, SpecVersion
from specs.selectors import spec_history
from tests.specs.conftest import spec_approved, spec_in_review

pytestmark = pytest.mark.django_db

S = SpecStatus


def spec_at(status: str, author: User, reviewer: User, name: str = "guide") -> SpecVersion:
    """A spec whose latest version has ``status``."""
    services.spec_create(name=name, title="Guide", body="# Guide\n\nv1\n", by=author)
    if status == S.DRAFT:
        return SpecVersion.objects.get(spec__name=name)
    services.spec_submit(name=name, by=author)
    if status == S.REJECTED:
        services.spec_reject(name=name, by=reviewer, note="too vague")
    elif status in (S.APPROVED, S.ARCHIVED):
        services.spec_approve(name=name, by=reviewer)
        if status == S.ARCHIVED:
            services.spec_archive(name=name, by=reviewer)
    return SpecVersion.objects.get(spec__name=name)


# -- create -------------------------------------------------------------------------------


def test_create_makes_version_1_draft_and_records_it(author: User) -> None:
    version = services.spec_create(name="wiring-guide", title="Wiring guide", body="# W\n\nText", by=author)
    assert (version.number, version.status, version.body) == (1, S.DRAFT, "# W\n\nText\n")
    assert version.spec.created_by == author and version.edited_by == author
    [decision] = SpecDecision.objects.all()
    assert (decision.from_status, decision.to_status, decision.by_username) == ("", S.DRAFT, "alice")


def test_create_rejects_duplicate_bad_name_and_empty_body(author: User) -> None:
    services.spec_create(name="guide", title="G", body="x", by=author)
    with pytest.raises(SpecInputError, match="already exists"):
        services.spec_create(name="guide", title="G", body="y", by=author)
    with pytest.raises(SpecInputError, match="invalid spec name 'Bad Name'"):
        services.spec_create(name="Bad Name", title="G", body="y", by=author)
    with pytest.raises(SpecInputError, match="non-empty"):
        services.spec_create(name="other", title="G", body="  \n", by=author)
    assert FeatureSpec.objects.count() == 1 and SpecVersion.objects.count() == 1


def test_create_accepts_name_with_md_extension(author: User) -> None:
    assert services.spec_create(name="guide.md", title="G", body="x", by=author).spec.name == "guide"


# -- legal transitions --------------------------------------------------------------------


def test_full_happy_path_records_every_decision(author: User, reviewer: User) -> None:
    services.spec_create(name="guide", title="G", body="x", by=author)
    assert services.spec_submit(name="guide", by=author).status == S.IN_REVIEW
    approved = services.spec_approve(name="guide", by=reviewer, note="fine")
    assert approved.status == S.APPROVED
    assert (approved.decided_by, approved.decision_note) == (reviewer, "fine") and approved.decided_at
    archived = services.spec_archive(name="guide", by=reviewer, note="retired")
    assert archived.status == S.ARCHIVED and archived.decision_note == "retired"
    steps = [(d.from_status, d.to_status, d.by_username) for d in spec_history(name="guide")]
    assert steps == [
        ("", S.DRAFT, "alice"),
        (S.DRAFT, S.IN_REVIEW, "alice"),
        (S.IN_REVIEW, S.APPROVED, "rita"),
        (S.APPROVED, S.ARCHIVED, "rita"),
    ]


def test_reject_needs_a_note_and_records_it(author: User, reviewer: User) -> None:
    spec_in_review("guide", author)
    with pytest.raises(SpecInputError, match="needs a note"):
        services.spec_reject(name="guide", by=reviewer, note="  ")
    assert SpecVersion.objects.get().status == S.IN_REVIEW
    rejected = services.spec_reject(name="guide", by=reviewer, note="Missing the source hierarchy.")
    assert rejected.status == S.REJECTED and rejected.decision_note == "Missing the source hierarchy."
    assert SpecDecision.objects.last().note == "Missing the source hierarchy."


# -- illegal transitions ------------------------------------------------------------------

ILLEGAL = [
    ("submit", S.IN_REVIEW, "version 1 is in review; it is waiting for a reviewer"),
    ("submit", S.APPROVED, "version 1 is approved; edit its body to start a new version"),
    ("submit", S.REJECTED, "version 1 was rejected; edit its body"),
    ("submit", S.ARCHIVED, "version 1 is archived; edit its body"),
    ("approve", S.DRAFT, "cannot approve 'guide': version 1 is a draft; submit it for review first"),
    ("approve", S.APPROVED, "version 1 is approved"),
    ("approve", S.REJECTED, "version 1 was rejected"),
    ("approve", S.ARCHIVED, "version 1 is archived"),
    ("reject", S.DRAFT, "cannot reject 'guide': version 1 is a draft; submit it for review first"),
    ("reject", S.APPROVED, "version 1 is approved"),
    ("reject", S.REJECTED, "version 1 was rejected"),
    ("reject", S.ARCHIVED, "version 1 is archived"),
    ("archive", S.DRAFT, "cannot archive 'guide': it has no approved version (latest is version 1, draft)"),
    ("archive", S.IN_REVIEW, "no approved version (latest is version 1, in review)"),
    ("archive", S.REJECTED, "no approved version (latest is version 1, rejected)"),
    ("archive", S.ARCHIVED, "no approved version (latest is version 1, archived)"),
]


@pytest.mark.parametrize(("action", "status", "message"), ILLEGAL)
def test_illegal_transition_raises_and_changes_nothing(
    action: str, status: str, message: str, author: User, reviewer: User
) -> None:
    spec_at(status, author, reviewer)
    decisions = SpecDecision.objects.count()
    kwargs = {"note": "why"} if action == "reject" else {}
    by = author if action == "submit" else reviewer
    with pytest.raises(SpecTransitionError) as caught:
        getattr(services, f"spec_{action}")(name="guide", by=by, **kwargs)
    assert message in str(caught.value)
    assert SpecVersion.objects.get().status == status
    assert SpecDecision.objects.count() == decisions


def test_unknown_spec_names_the_known_ones(author: User) -> None:
    with pytest.raises(SpecNotFound, match="there are no feature specs yet"):
        services.spec_submit(name="nope", by=author)
    services.spec_create(name="guide", title="G", body="x", by=author)
    with pytest.raises(SpecNotFound, match="No feature spec named 'nope'. Known specs: guide."):
        services.spec_submit(name="nope", by=author)


# -- permissions --------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_decisions_need_the_permission(action: str, author: User, outsider: User) -> None:
    spec_in_review("guide", author)
    expected = f"otto may not {action} 'guide': that needs the permission 'specs.approve_featurespec'"
    with pytest.raises(SpecPermissionError, match=expected):
        getattr(services, f"spec_{action}")(name="guide", by=outsider, note="n")
    assert SpecVersion.objects.get().status == S.IN_REVIEW


def test_archive_needs_the_permission(author: User, reviewer: User, outsider: User) -> None:
    spec_approved("guide", author, reviewer)
    with pytest.raises(SpecPermissionError, match="otto may not archive 'guide'"):
        services.spec_archive(name="guide", by=outsider)


def test_nobody_approves_their_own_spec(author: User, reviewer: User) -> None:
    spec_in_review("guide", reviewer)  # the reviewer wrote it
    with pytest.raises(SpecPermissionError, match="rita may not approve 'guide' version 1: they created or edited"):
        services.spec_approve(name="guide", by=reviewer)
    assert SpecVersion.objects.get().status == S.IN_REVIEW


def test_the_last_editor_may_not_approve_either(author: User, reviewer: User) -> None:
    services.spec_create(name="guide", title="G", body="v1", by=author)
    services.spec_edit(name="guide", body="v1 edited by rita", by=reviewer)
    services.spec_submit(name="guide", by=author)
    with pytest.raises(SpecPermissionError, match="created or edited"):
        services.spec_approve(name="guide", by=reviewer)


def test_the_spec_creator_may_not_approve_a_later_version(author: User, reviewer: User, outsider: User) -> None:
    author.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    author = User.objects.get(pk=author.pk)
    spec_approved("guide", author, reviewer, body="v1")
    services.spec_edit(name="guide", body="v2 by otto", by=outsider)
    services.spec_submit(name="guide", by=outsider)
    with pytest.raises(SpecPermissionError, match="alice may not approve"):
        services.spec_approve(name="guide", by=author)


def test_superuser_may_approve_own_spec(admin_user: User) -> None:
    spec_in_review("guide", admin_user)
    assert services.spec_approve(name="guide", by=admin_user).status == S.APPROVED


def test_reviewer_may_reject_own_spec(reviewer: User) -> None:
    spec_in_review("guide", reviewer)
    assert services.spec_reject(name="guide", by=reviewer, note="withdrawn").status == S.REJECTED


def test_inactive_users_cannot_act(author: User, reviewer: User) -> None:
    services.spec_create(name="guide", title="G", body="x", by=author)
    author.is_active = False
    author.save()
    with pytest.raises(SpecPermissionError, match="not an active user"):
        services.spec_submit(name="guide", by=author)


# -- versioning ---------------------------------------------------------------------------


def test_editing_a_draft_changes_it_in_place(author: User, outsider: User) -> None:
    services.spec_create(name="guide", title="G", body="v1", by=author)
    result = services.spec_edit(name="guide", body="v1 better", by=outsider)
    assert result.outcome == "updated" and result.version.number == 1
    assert SpecVersion.objects.get().body == "v1 better\n" and SpecVersion.objects.get().edited_by == outsider


def test_editing_with_the_same_body_is_a_no_op(author: User, reviewer: User) -> None:
    spec_approved("guide", author, reviewer, body="same")
    decisions = SpecDecision.objects.count()
    result = services.spec_edit(name="guide", body="same\n", by=author)
    assert result.outcome == "unchanged" and SpecVersion.objects.count() == 1
    assert SpecDecision.objects.count() == decisions


@pytest.mark.parametrize("status", [S.APPROVED, S.REJECTED, S.ARCHIVED])
def test_editing_a_decided_version_starts_a_new_draft(status: str, author: User, reviewer: User) -> None:
    spec_at(status, author, reviewer)
    result = services.spec_edit(name="guide", body="v2", by=author)
    assert result.outcome == "new_version"
    assert [(v.number, v.status) for v in SpecVersion.objects.order_by("number")] == [(1, status), (2, S.DRAFT)]
    assert result.version.body == "v2\n" and SpecVersion.objects.get(number=1).body == "# Guide\n\nv1\n"


def test_editing_a_version_in_review_withdraws_it(author: User, reviewer: User) -> None:
    spec_in_review("guide", author)
    result = services.spec_edit(name="guide", body="v2", by=author)
    old = SpecVersion.objects.get(number=1)
    assert old.status == S.REJECTED and "superseded by version 2" in old.decision_note
    assert (result.version.number, result.version.status) == (2, S.DRAFT)


def test_title_only_edit_updates_the_spec(author: User) -> None:
    services.spec_create(name="guide", title="Old", body="x", by=author)
    assert services.spec_edit(name="guide", body="x", title="New", by=author).outcome == "updated"
    assert FeatureSpec.objects.get().title == "New"


# -- import -------------------------------------------------------------------------------


def test_import_takes_name_from_stem_and_title_from_h1(tmp_path: Path, author: User) -> None:
    path = tmp_path / "Wiring Guide.md"
    path.write_text("```\n# not a title\n```\n\n# Wiring guide for AX-200\n\nUse the source hierarchy.\n")
    result = services.spec_import(path=path, by=author)
    assert result.outcome == "created"
    assert (result.version.spec.name, result.version.spec.title) == ("wiring-guide", "Wiring guide for AX-200")


def test_import_front_matter_wins_and_is_not_part_of_the_body(tmp_path: Path, author: User) -> None:
    path = tmp_path / "x.md"
    path.write_text("---\nname: install\ntitle: Installation manual\n---\n# Heading\n\nBody.\n")
    version = services.spec_import(path=path, by=author).version
    assert (version.spec.name, version.spec.title) == ("install", "Installation manual")
    assert version.body == "# Heading\n\nBody.\n"


def test_reimport_is_idempotent_and_a_changed_file_is_an_edit(tmp_path: Path, author: User, reviewer: User) -> None:
    path = tmp_path / "guide.md"
    path.write_text("# Guide\n\nv1\n")
    services.spec_import(path=path, by=author)
    assert services.spec_import(path=path, by=author).outcome == "unchanged"
    services.spec_submit(name="guide", by=author)
    services.spec_approve(name="guide", by=reviewer)
    path.write_text("# Guide\n\nv2\n")
    assert services.spec_import(path=path, by=author).outcome == "new_version"
    assert SpecVersion.objects.count() == 2


def test_import_bad_input(tmp_path: Path, author: User) -> None:
    with pytest.raises(SpecInputError, match="No such file"):
        services.spec_import(path=tmp_path / "missing.md", by=author)
    bad = tmp_path / "bad.md"
    bad.write_text("---\n- a list\n---\nbody\n")
    with pytest.raises(SpecInputError, match="front matter must be a mapping"):
        services.spec_import(path=bad, by=author)
    bad.write_text("---\nname: frontonly\n# Guide\n\nWrite it.\n")
    with pytest.raises(SpecInputError, match=r"bad.md:1: front matter opened by '---' is never closed"):
        services.spec_import(path=bad, by=author)
    bad.write_text("---\nname: guide\ntitle: [unclosed\n---\n# Guide\n")
    with pytest.raises(
        SpecInputError, match=r"bad.md:3:17: invalid front matter: while parsing a flow sequence expected ',' or '\]'"
    ):
        services.spec_import(path=bad, by=author)
    bad.write_text("---\nname: guide\ntitle: [1, 2]\n---\n# Guide\n")
    with pytest.raises(SpecInputError, match=r"bad.md: front matter 'title' must be text, not \[1, 2\] \(list\)"):
        services.spec_import(path=bad, by=author)
    bad.write_text("---\nname: 123\n---\n# Guide\n")
    with pytest.raises(SpecInputError, match=r"front matter 'name' must be text, not 123 \(int\); quote it"):
        services.spec_import(path=bad, by=author)
    binary = tmp_path / "bin.md"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(SpecInputError, match="cannot read"):
        services.spec_import(path=binary, by=author)
    assert not FeatureSpec.objects.exists()
