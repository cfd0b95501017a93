"""Sources (one row per file), their chunks and summaries, and collections."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop  # choice labels: translated where a page shows them

from core.units import maps_line_by_line


def cited_names(path: str, roots: list[str]) -> dict[str, str]:
    """How citations name the sources at ``path`` under each of ``roots``: the path alone when one folder has
    it; otherwise, in front of it, the fewest trailing folder names of each root that tell them apart."""
    if len(roots) < 2:
        return {root: path for root in roots}
    parts = {root: PurePosixPath(root).parts[1:] for root in roots}
    for depth in range(1, max(len(p) for p in parts.values()) + 1):
        prefix = {root: "/".join(p[-depth:]) for root, p in parts.items()}
        if len(set(prefix.values())) == len(roots):
            break
    return {root: f"{prefix[root]}/{path}" if prefix[root] else f"/{path}" for root in roots}


class Collection(models.Model):
    """A named set of sources; readers see only the collections they belong to."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    readers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="collections")
    public = models.BooleanField(default=False, help_text="Readable by every signed-in user.")
    folder = models.CharField(
        max_length=1024,
        blank=True,
        editable=False,
        help_text="Absolute folder the collection is bound to: `foundry sync` re-ingests it (changes in, deletions "
        "out). Set with `foundry collections bind` / `unbind`.",
    )
    synced_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When the bound folder was last synced (its ingest job started).",
    )
    sync_error = models.TextField(
        blank=True, editable=False, help_text="Why the last sync of the bound folder failed; empty when it worked."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return self.name


class Source(models.Model):
    class Kind(models.TextChoices):
        TXT = "txt", "Text"
        MD = "md", "Markdown"
        PDF = "pdf", "PDF"
        JSON = "json", "JSON"
        DOCX = "docx", "Word"
        HTML = "html", "HTML"
        PPTX = "pptx", "PowerPoint"
        XLSX = "xlsx", "Excel"
        CSV = "csv", "CSV"
        IMAGE = "image", "Image"

    class Status(models.TextChoices):
        PENDING = "pending", gettext_noop("Pending")
        INGESTED = "ingested", gettext_noop("Ingested")
        SKIPPED = "skipped", gettext_noop("Skipped")
        FAILED = "failed", gettext_noop("Failed")

    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="sources")
    root = models.CharField(max_length=1024, editable=False, help_text="Absolute folder the path is relative to.")
    path = models.CharField(max_length=1024, editable=False)
    name = models.CharField(
        max_length=2048,
        editable=False,
        help_text="How citations name the file: its path, with the folder it was ingested from "
        "in front while another folder of its collection has a file at the same path.",
    )
    title = models.CharField(max_length=500, blank=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, editable=False)
    size = models.BigIntegerField(default=0, editable=False)
    mtime = models.DateTimeField(null=True, blank=True, editable=False)
    issued = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="The date the document gives itself in its metadata (last modified, else created); "
        "empty when it gives none.",
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    reason = models.TextField(blank=True)
    chunk_count = models.PositiveIntegerField(default=0, editable=False)
    embedding_model = models.CharField(max_length=200, blank=True, editable=False)
    chunking = models.CharField(
        max_length=400,
        blank=True,
        editable=False,
        help_text="Chunking settings the chunks were built with (sources.services.chunking_settings); "
        "ingest re-chunks the file when foundry.yaml sets others.",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)
    ingested_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["root", "path"], name="source_unique_root_path")]
        indexes = [
            models.Index(fields=["status"]),
            models.Index(fields=["collection", "status"]),
            models.Index(fields=["path"]),
        ]

    def __str__(self) -> str:
        return self.path

    def save(self, *args, **kwargs) -> None:
        if not self.name:  # a path no other folder has; ingest qualifies it when one does (source_names_refresh)
            self.name = self.path
        super().save(*args, **kwargs)

    @property
    def dated(self) -> datetime | None:
        """The source's date for recency: the one it gives itself, else its file's modification time."""
        return self.issued or self.mtime

    @property
    def absolute_path(self) -> str:
        return f"{self.root.rstrip('/')}/{self.path}"


# What Chunk.line_start/line_end count for each kind of source (every other kind counts lines).
LINE_UNITS = {"docx": "paragraphs", "xlsx": "rows", "csv": "rows"}


# The words of a location, one message each so a page can say them in its language (``location_label``); what is
# stored, parsed and sent by the APIs is always these English forms (``location_text``).
_PAGE_WORDS = {"p.": gettext_noop("p. %(page)s"), "slide": gettext_noop("slide %(page)s")}
_ONE = {
    "lines": gettext_noop("line %(line)s"),
    "rows": gettext_noop("row %(line)s"),
    "paragraphs": gettext_noop("paragraph %(line)s"),
}
_SPAN = {
    "lines": gettext_noop("lines %(first)s-%(last)s"),
    "rows": gettext_noop("rows %(first)s-%(last)s"),
    "paragraphs": gettext_noop("paragraphs %(first)s-%(last)s"),
}
_SHEET = gettext_noop("sheet %(name)s")
_OCR = gettext_noop("OCR, confidence %(confidence)s %%")


def _as_is(message: str) -> str:
    return message


def place_text(
    page_start: int | None,
    page_end: int | None,
    line_start: int,
    line_end: int,
    kind: str = "",
    *,
    say: Callable[[str], str] = _as_is,
) -> str:
    """``p. 2, lines 4-15``; a chunk that crosses pages numbers its lines per page, so each end names
    its page: ``p. 1, line 26 – p. 2, line 4``. A slide stands where a page would (``slide 3``), and
    Word, Excel and CSV sources count paragraphs and rows. ``say`` translates each word's message (``gettext``)."""
    unit = LINE_UNITS.get(kind, "lines")
    page = say(_PAGE_WORDS["slide" if kind == Source.Kind.PPTX else "p."])
    one = say(_ONE[unit])
    if page_start and page_end and page_end != page_start:
        start = f"{page % {'page': page_start}}, {one % {'line': line_start}}"
        return f"{start} – {page % {'page': page_end}}, {one % {'line': line_end}}"
    lines = (
        one % {"line": line_start}
        if line_start == line_end
        else say(_SPAN[unit]) % {"first": line_start, "last": line_end}
    )
    if page_start:
        return f"{page % {'page': page_start}}, {lines}"
    return lines


def titled_path(title: str, path: list[str]) -> str:
    """A heading path under its document's title, " > " joined; a path that starts with the title (a Markdown
    H1) does not name it twice."""
    return " > ".join(path if not title or path[:1] == [title] else [title, *path])


def location_text(
    *,
    kind: str,
    heading: str,
    page_start: int | None,
    page_end: int | None,
    line_start: int,
    line_end: int,
    ocr_confidence: float | None = None,
    say: Callable[[str], str] = _as_is,
) -> str:
    """Where a passage sits, in the terms of its kind of file: the one formatter every citation uses.

    ``§ Install > Power, p. 7, lines 4-15`` (PDF); ``§ Agenda, slide 3, lines 2-4`` (PowerPoint);
    ``sheet Pumps, rows 20-45`` (Excel); ``rows 20-45`` (CSV); ``§ Safety, paragraphs 12-15`` (Word);
    and ``OCR, confidence 91 %`` after the rest when the text was read from an image. In English, as stored
    and parsed; ``say`` (``gettext``) words it in the active language for a page (``location_label``).
    """
    parts = []
    if heading:
        parts.append(say(_SHEET) % {"name": heading} if kind == Source.Kind.XLSX else f"§ {heading}")
    parts.append(place_text(page_start, page_end, line_start, line_end, kind, say=say))
    if ocr_confidence is not None:
        parts.append(say(_OCR) % {"confidence": f"{ocr_confidence:.0f}"})
    return ", ".join(parts)


def location_label(**fields: Any) -> str:
    """``location_text`` in the active language, for a page; never stored or parsed."""
    return location_text(**fields, say=gettext)


class Chunk(models.Model):
    """A passage of a source. ``text`` is verbatim source text; ``context`` is only embedded."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    heading = models.CharField(max_length=1000, blank=True, help_text="Heading path, ' > ' separated.")
    page_start = models.PositiveIntegerField(null=True, blank=True)
    page_end = models.PositiveIntegerField(null=True, blank=True)
    line_start = models.PositiveIntegerField()
    line_end = models.PositiveIntegerField()
    token_count = models.PositiveIntegerField()
    context = models.TextField(blank=True, help_text="Contextual prefix embedded with the text; never shown as source.")
    ocr_confidence = models.FloatField(
        null=True,
        blank=True,
        editable=False,
        help_text="Read by OCR from an image: the lowest mean word confidence "
        "(0-100) of its pages. Empty for text the file holds as text.",
    )
    language = models.CharField(
        max_length=8, default="en", editable=False, help_text="The language the text is written in (en, nl, de)."
    )
    stems = models.TextField(
        blank=True,
        editable=False,
        help_text="The text's content words stemmed in its language, for keyword search; empty for English, "
        "which the keyword index stems itself.",
    )
    line_map = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="The source lines [first, last] (rows, paragraphs) of each line of the text, null for a line that "
        "stands for none (a table's header row over its rows); empty when the text maps line by line.",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["source_id", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["source", "ordinal"], name="chunk_unique_ordinal")]

    def __str__(self) -> str:
        return f"{self.source.path}#{self.ordinal}"

    def _where(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "heading": self.heading,
            "page_start": self.page_start,
            "page_end": self.page_end,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "ocr_confidence": self.ocr_confidence,
        }

    @property
    def location(self) -> str:
        """Human citation of where the chunk sits, in the terms of its kind of file (``location_text``)."""
        return location_text(**self._where())

    @property
    def location_label(self) -> str:
        """``location`` in the active language, for a page."""
        return location_label(**self._where())

    @property
    def under(self) -> str:
        """The document's title and the chunk's heading path: what every sentence of the chunk is read under."""
        return titled_path(self.source.title or self.source.name, self.heading.split(" > ") if self.heading else [])

    @property
    def place(self) -> str:
        """Page(s) or slide(s) and lines (rows, paragraphs), without the section."""
        return place_text(self.page_start, self.page_end, self.line_start, self.line_end, self.kind)

    @property
    def kind(self) -> str:
        """The kind of file the chunk comes from ("" for a chunk not yet attached to a source)."""
        return self.source.kind if self.source_id else ""

    def line_spans(self) -> list[tuple[tuple[int, int] | None, str]]:
        """Each line of the text with the source lines (rows, paragraphs) it stands for, as citations count them:
        by its ``line_map`` (None for a line that stands for none, such as a table's header row over its rows), else
        one line each when the text maps line by line (``maps_line_by_line``); [] when neither tells."""
        lines = self.text.split("\n")
        if self.line_map and len(self.line_map) == len(lines):
            return [((span[0], span[1]) if span else None, text) for span, text in zip(self.line_map, lines)]
        if not maps_line_by_line(self.text, self.line_start, self.line_end, self.page_start, self.page_end):
            return []
        return [((n, n), text) for n, text in enumerate(lines, start=self.line_start)]

    def numbered_lines(self) -> list[tuple[int, str]]:
        """Each line of the text that stands for a source line, with its (first) line there (``line_spans``)."""
        return [(span[0], text) for span, text in self.line_spans() if span]


def location_fields(chunk: Chunk, lines: list[int] | None = None) -> dict:
    """A citation's location fields for the JSON API, MCP and OpenAI-compatible citations: the kind of file, the
    last page (slide), the OCR confidence (None unless read by OCR) and ``location``, the text ``location_text``
    writes. ``lines`` narrows the lines (rows, paragraphs) to the quoted ones."""
    first, last = lines or (chunk.line_start, chunk.line_end)
    return {
        "kind": chunk.kind,
        "page_end": chunk.page_end,
        "ocr_confidence": None if chunk.ocr_confidence is None else round(chunk.ocr_confidence, 1),
        "location": location_text(
            kind=chunk.kind,
            heading=chunk.heading,
            page_start=chunk.page_start,
            page_end=chunk.page_end,
            line_start=first,
            line_end=last,
            ocr_confidence=chunk.ocr_confidence,
        ),
    }


def citation_location(citation: dict) -> str:
    """The location of a stored citation: its ``location``; for one recorded before citations had it, the same
    text made from the fields it has (page and lines; no kind was recorded then)."""
    if citation.get("location"):
        return str(citation["location"])
    lines = citation.get("lines") or [0, 0]
    return location_text(
        kind=str(citation.get("kind") or ""),
        heading=str(citation.get("heading") or ""),
        page_start=citation.get("page"),
        page_end=citation.get("page_end"),
        line_start=lines[0],
        line_end=lines[-1],
        ocr_confidence=citation.get("ocr_confidence"),
    )


class SourceSummary(models.Model):
    source = models.OneToOneField(Source, on_delete=models.CASCADE, related_name="summary")
    text = models.TextField()
    model = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = "source summary"
        verbose_name_plural = "source summaries"

    def __str__(self) -> str:
        return f"Summary of {self.source.path}"


class IngestJob(models.Model):
    """One `foundry ingest` (or upload) run: which files, how far it got, and what happened to each.

    Workers write progress here and the CLI progress bar and web pages read it.
    Only ``sources.services.ingest_jobs`` changes ``status``.
    """

    class Status(models.TextChoices):
        PENDING = "pending", gettext_noop("Pending")
        RUNNING = "running", gettext_noop("Running")
        SUCCEEDED = "succeeded", gettext_noop("Succeeded")
        FAILED = "failed", gettext_noop("Failed")

    class Stage(models.TextChoices):
        QUEUED = "queued", gettext_noop("Queued")
        CHECKING = "checking", gettext_noop("Checking files for changes")
        PROCESSING = "processing", gettext_noop("Extracting, embedding and storing")
        REMOVING = "removing", gettext_noop("Removing sources whose file is gone")
        DONE = "done", gettext_noop("Done")

    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="ingest_jobs")
    target = models.CharField(max_length=1024, editable=False, help_text="Folder or file that was asked for.")
    root = models.CharField(max_length=1024, editable=False, help_text="Folder the file paths are relative to.")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING, editable=False)
    stage = models.CharField(max_length=12, choices=Stage.choices, default=Stage.QUEUED, editable=False)
    options = models.JSONField(
        default=dict,
        editable=False,
        help_text="include_private, embedding model, whether target is a folder, "
        "and the scanned candidates [[path, skip reason], …].",
    )
    files_total = models.PositiveIntegerField(default=0, editable=False)
    files_done = models.PositiveIntegerField(default=0, editable=False)
    chunks_done = models.PositiveIntegerField(default=0, editable=False)
    results = models.JSONField(
        default=list, editable=False, help_text="Per-file results in completion order: {path, status, reason, chunks}."
    )
    error = models.TextField(blank=True, editable=False, help_text="Why the whole job failed.")
    attempts = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True, editable=False)
    finished_at = models.DateTimeField(null=True, blank=True, editable=False)
    heartbeat_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"ingest job {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)


class IngestJobFile(models.Model):
    """A file of an ingest job that was sent to the workers and has no result yet (broker mode only).

    ``beat_at`` is when the worker preparing it last reported (empty: sent, not yet started). A file
    whose worker falls silent while its job goes on is sent again by the stale-run sweeper, up to
    FOUNDRY_JOB_MAX_ATTEMPTS sends in all, then failed on its own. The row goes with the file's result.
    Only ``sources.services.ingest_jobs`` and ``ingest_sweep`` write these rows.
    """

    job = models.ForeignKey(IngestJob, on_delete=models.CASCADE, related_name="files_in_flight")
    path = models.CharField(max_length=1024, editable=False)
    attempts = models.PositiveIntegerField(default=1, editable=False, help_text="How often the file was sent.")
    beat_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "path"], name="ingest_job_file_once")]
        indexes = [models.Index(fields=["beat_at"])]

    def __str__(self) -> str:
        return f"{self.path} of ingest job {self.job_id}"


def citation_label(citation: dict) -> str:
    """A stored citation's location in the active language, for a page: made again from its fields when it
    recorded its kind; else its stored text (``citation_location``)."""
    if not citation.get("kind"):
        return citation_location(citation)
    lines = citation.get("lines") or [0, 0]
    return location_label(
        kind=str(citation["kind"]),
        heading=str(citation.get("heading") or ""),
        page_start=citation.get("page"),
        page_end=citation.get("page_end"),
        line_start=lines[0],
        line_end=lines[-1],
        ocr_confidence=citation.get("ocr_confidence"),
    )
