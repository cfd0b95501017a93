"""The conflicts an answer shows, one box per disagreement: a quantity three sources give three values is one
box naming every side, not the pairs detection found (A≠B, A≠C, B≠C). Each side links to the source viewer at
its lines, when the viewer may read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sources.selectors import readable_chunks
from sources.viewer import viewer_url


@dataclass
class ConflictBox:
    quantity: str  # "" when a model found it (it names no quantity)
    # label, source, where, quote, dated, letter, url ("" unreadable), newest (the latest date, when dates differ)
    sides: list[dict] = field(default_factory=list)


def conflict_boxes(conflicts: list[dict], viewer: Any) -> list[ConflictBox]:
    """``conflicts`` (``Conflict.as_dict``, pairs) merged into one box per disagreement: pairs about the same
    quantity, or (a model's, naming none) sharing a side, are one. Sides in order of first mention, each once."""
    boxes: list[ConflictBox] = []
    for conflict in conflicts:
        pair = [s for s in (conflict.get("a"), conflict.get("b")) if s]
        box = next((b for b in boxes if _same_disagreement(b, conflict["quantity"], pair)), None)
        if box is None:
            box = ConflictBox(conflict["quantity"])
            boxes.append(box)
        for side in pair:
            if _key(side) not in {_key(s) for s in box.sides}:
                box.sides.append(dict(side))
    for box in boxes:
        for i, side in enumerate(box.sides):
            side["letter"] = chr(ord("A") + i) if i < 26 else str(i + 1)
        newest_side(box.sides)
    _link(boxes, viewer)
    return boxes


def newest_side(sides: list[dict]) -> None:
    """Mark ``newest`` the sides of the latest date, when the sides' dates differ (a conflict between a document and
    its later revision is read by its date); sides without a date (logged before dates were kept) are never newest."""
    dates = {side.get("dated", "") for side in sides} - {""}
    latest = max(dates) if len(dates) > 1 else None
    for side in sides:
        side["newest"] = latest is not None and side.get("dated") == latest


def _key(side: dict) -> tuple[str, str]:
    return side.get("source", ""), " ".join(side.get("quote", "").split())


def _same_disagreement(box: ConflictBox, quantity: str, pair: list[dict]) -> bool:
    if quantity or box.quantity:
        return quantity.lower() == box.quantity.lower()
    return bool({_key(s) for s in pair} & {_key(s) for s in box.sides})


def _link(boxes: list[ConflictBox], viewer: Any) -> None:
    wanted = {s["chunk_id"] for b in boxes for s in b.sides if s.get("chunk_id")}
    readable = dict(readable_chunks(viewer).filter(pk__in=wanted).values_list("pk", "source_id")) if wanted else {}
    for box in boxes:
        for side in box.sides:
            source_id = readable.get(side.get("chunk_id") or 0)
            side["url"] = viewer_url(source_id, side["chunk_id"], side.get("lines")) if source_id else ""
