"""Domain errors of the spec workflow. Messages are written for the person who hit them."""

from __future__ import annotations


class SpecError(Exception):
    """Base class; ``status_code`` is what the JSON API answers with."""

    status_code = 409


class SpecInputError(SpecError):
    """Bad input: an invalid name, an empty body, a reject without a note, an unreadable file."""

    status_code = 400


class SpecNotFound(SpecError):
    status_code = 404


class SpecTransitionError(SpecError):
    """The requested status change is not allowed from the version's current status."""

    status_code = 409


class SpecPermissionError(SpecError):
    """The acting user may not take this decision (missing permission, or their own spec)."""

    status_code = 403


class SpecSelectionError(SpecError):
    """Generation cannot pick a spec: none approved, several approved, or the named one is not approved."""

    status_code = 400
