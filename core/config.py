"""``foundry.yaml``: the pipeline knobs, validated once at startup.

Every key is optional; the defaults are the offline ones (local embedding model
and local LLM). An LLM role set to ``none`` switches that step off. A wrong
value stops startup with the key, the value and what is allowed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import yaml
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from core import model_thresholds

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

LOCAL_LLM = "local/smollm2-135m"
# The extractive reader/writer (generation.reader): quotes the sources' best units, calls no LLM.
EXTRACTIVE = "extractive"
LOCAL_EMBEDDER = "local/all-minilm-l6-v2"
MODEL_PATTERN = re.compile(r"^(none|[a-z0-9_\-]+/[A-Za-z0-9_.:\-/@]+)$")

Unit = Annotated[float, Field(ge=0.0, le=1.0)]


def _model_name(value: str) -> str:
    if not isinstance(value, str) or not MODEL_PATTERN.match(value):
        raise ValueError("expected 'none' or 'provider/model' (e.g. local/smollm2-135m, openai/gpt-4o)")
    return value


def _reader_name(value: str) -> str:
    """A role that can also be filled by the extractive reader (no LLM)."""
    if value == EXTRACTIVE:
        return value
    if not isinstance(value, str) or not MODEL_PATTERN.match(value):
        raise ValueError(
            "expected 'extractive' (quote the sources, no LLM), 'provider/model' "
            "(e.g. local/smollm2-135m, openai/gpt-4o) or 'none'"
        )
    return value


# retrieval.condense_model: the deterministic follow-up rule (generation.condense), no LLM.
CONDENSE_RULE = "rule"


def _condenser_name(value: str) -> str:
    """The follow-up condensing role: the rule, an LLM, or none (follow-ups are asked as typed)."""
    if value == CONDENSE_RULE:
        return value
    if not isinstance(value, str) or not MODEL_PATTERN.match(value):
        raise ValueError(
            "expected 'none' or 'provider/model' (e.g. openai/gpt-4o), "
            "or 'rule' (the deterministic follow-up rule, no LLM)"
        )
    return value


class _Section(BaseModel):
    # Each key's docstring is its meaning in docs/configuration.md (scripts/config_reference.py writes it).
    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


class EmbeddingConfig(_Section):
    model: str = LOCAL_EMBEDDER
    """The embedding model of chunks, windows and questions: `local/all-minilm-l6-v2`, `local/multilingual-e5-small`
    or a litellm provider's; it also names the vector tables. Changing it needs a re-ingest (check E004)."""
    context_model: str = "none"
    """D0004: an LLM that writes a situating sentence before each chunk is embedded, or `none` (the chunk is embedded
    after its title and heading path only)."""
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 64
    """Texts sent to the embedding model in one call."""

    _check_model = field_validator("model", "context_model")(_model_name)

    @field_validator("model")
    @classmethod
    def _not_none(cls, value: str) -> str:
        if value == "none":
            raise ValueError("the embedding model cannot be 'none'")
        return value


class IngestConfig(_Section):
    summary_model: str = EXTRACTIVE
    """D0008: the summary written per source at ingest: `extractive` (its lead and most central sentences,
    verbatim), an LLM (grounding-checked against the chunks it read), or `none`."""
    summary_max_tokens: Annotated[int, Field(ge=16, le=4000)] = 500
    """Length limit of a source summary, in tokens."""
    max_file_mb: Annotated[float, Field(gt=0, le=10_000)] = 25
    """Files larger than this are skipped by ingest and refused on upload."""
    include_private: bool = False
    """Ingest `private/` folders too (as `foundry ingest --include-private`)."""
    chunk_tokens: Annotated[int, Field(ge=32, le=8192)] = 200
    """Word pieces per chunk (MiniLM reads at most 256); D0015."""
    chunk_overlap_tokens: Annotated[int, Field(ge=0, le=4096)] = 0
    """A chunk continuing a section repeats the last sentences of the previous one, up to this many tokens;
    less than half of `chunk_tokens` (D0015)."""
    window_sentences: Annotated[int, Field(ge=0, le=16)] = 2
    """Each run of this many consecutive sentences of a chunk is embedded too, and the dense channel finds a chunk
    by the best of its vectors; 0: whole chunks only (D0013)."""

    _check_model = field_validator("summary_model")(_reader_name)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IngestConfig:
        if self.chunk_overlap_tokens >= self.chunk_tokens // 2:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be less than half of "
                f"chunk_tokens ({self.chunk_tokens})"
            )
        return self


class RetrievalConfig(_Section):
    mode: Literal["hybrid", "dense", "bm25"] = "hybrid"
    """The search channels: BM25 (FTS5) and dense fused by RRF, or one of them alone (D0005)."""
    top_k: Annotated[int, Field(ge=1, le=100)] = 10
    """Candidate chunks kept after fusion, before the gate."""
    rrf_k: Annotated[int, Field(ge=1, le=1000)] = 60
    """Reciprocal Rank Fusion: a chunk scores the sum of 1 / (rrf_k + rank) over the channels (D0010)."""
    fusion: Literal["chunk", "document"] = "chunk"
    """Hybrid: fuse the channels' ranks per chunk, or per document (a source ranks at its best chunk; use rrf_k 3
    for document search). Chunk fusion keeps the passages and their sources varied (D0010)."""
    recency_weight: Annotated[float | None, Field(ge=0, le=1)] = None
    """Hybrid: how much the later revision of a text is preferred: among candidates that are revisions of one
    another (`revision_overlap`), a fused score × (1 + weight × r), r from 0 for the oldest source date among
    them to 1 for the newest (a source's date: the one its metadata gives, else its file's modification time).
    Null: the weight `bench/fit_recency.py` fitted (retrieval/data/recency.json); 0: dates are ignored."""
    revision_overlap: Annotated[float | None, Field(gt=0, le=1)] = None
    """Two chunks of different sources are revisions of one text when this share of their words is shared
    (Jaccard). Null: the overlap `bench/fit_recency.py` fitted."""
    dense_index: Literal["matrix", "vec0"] = "matrix"
    """Dense channel: `matrix` scans a memory-mapped copy of the vectors (exact, fast); `vec0` scans the
    sqlite-vec table itself, or on PostgreSQL searches the pgvector table (HNSW) (D0016)."""
    dense_shortlist: Annotated[int, Field(ge=0, le=1_000_000)] = 8000
    """Above `dense_exact_max_rows` vectors, rows scored exactly after ranking every row by its sign bits;
    0: score every row (D0016)."""
    dense_exact_max_rows: Annotated[int, Field(ge=0)] = 200_000
    """Up to this many vectors the matrix is scanned exactly; above it the sign-bit shortlist applies (D0016).
    On PostgreSQL, `dense_index: vec0` scans a pgvector table of up to this many vectors exactly too."""
    hnsw_ef_search: Annotated[int, Field(ge=1, le=1000)] = 100
    """PostgreSQL, `dense_index: vec0`: candidates pgvector's HNSW index keeps per search (recall against time)."""
    bm25_max_df: Annotated[float, Field(gt=0, le=1)] = 0.05
    """Hybrid: the BM25 query leaves out terms found in more than this share of the chunks and in more than
    10,000 chunks; 1 keeps every term, and `mode: bm25` always does (D0012)."""
    bm25_max_postings: Annotated[float, Field(gt=0, le=64)] = 0.1
    """Hybrid: rarest first, BM25 keeps terms while their chunk counts add up to at most this many times the
    number of chunks (and 10,000); 64 keeps every term (D0012)."""
    hyde: bool = False
    """D0006: search the dense channel with the embedding of a short answer `hyde_model` writes (D0018)."""
    hyde_model: str = LOCAL_LLM
    """The LLM that writes the HyDE answer, when `hyde` is on."""
    scorer_model: str = "none"
    """D0007: an LLM that rates each passage past the gate 0-10 (passages under `relevance_threshold` are
    dropped), or `none` (D0019)."""
    relevance_threshold: Annotated[float, Field(ge=0, le=10)] = 4
    """With `scorer_model`: passages rated under this are dropped."""
    min_score: Unit = 0.3
    """The gate: no candidate chunk this similar to the question (cosine), and the answer is refused with no LLM
    call. 0.3 with the extractive reader, 0.45 with an LLM (D0022); calibrated per embedding model."""
    min_chunks: Annotated[int, Field(ge=1, le=100)] = 1
    """The gate: how many chunks must reach `min_score` (D0022)."""

    _check_model = field_validator("hyde_model", "scorer_model")(_model_name)
    condense_model: str = CONDENSE_RULE
    """A follow-up in a conversation is made standalone before retrieval: by the deterministic `rule`, by an LLM
    (prompt `prompts.condense`), or `none` (asked as typed; D0027)."""
    _check_condenser = field_validator("condense_model")(_condenser_name)


class GenerationConfig(_Section):
    model: str = EXTRACTIVE
    """Who writes answers and documents: `extractive` (quotes the passages' best units verbatim, no LLM; D0021)
    or an LLM (`local/smollm2-135m`, `openai/gpt-4o`, …) whose every sentence is grounding-checked."""
    token_budget: Annotated[int, Field(ge=256, le=1_000_000)] = 8192
    """Tokens of the prompt an LLM is given at most (passages and summaries are cut to fit)."""
    max_source_summaries: Annotated[int, Field(ge=0, le=1000)] = 10
    """Source summaries given to a document prompt as "Background from sources", at most."""
    max_passages: Annotated[int, Field(ge=1, le=100)] = 5
    """Passages given to an LLM (after the gate, best first)."""
    max_answer_tokens: Annotated[int, Field(ge=16, le=16_000)] = 160
    """Length limit of an LLM's answer."""
    max_document_tokens: Annotated[int, Field(ge=64, le=32_000)] = 700
    """Length limit of an LLM-written document; a reply cut off there loses its unfinished last sentence."""
    cache_answers: bool = True
    """The same question, scope, configuration and index: serve the logged answer again (logged as a new row)."""
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    """Sampling temperature of an LLM answer or document."""
    min_support: Unit = 0.6
    """Grounding: a sentence an LLM writes with less support than this from any passage window is removed (D0028);
    re-measure when changing `generation.model`."""
    low_confidence_score: Unit = 0.45
    """Best question-chunk similarity under this: the answer is marked low confidence (D0023)."""
    min_coverage: Unit = 0.9
    """Share of an LLM's sentences kept by grounding under this: the answer (or document) is marked low confidence."""
    reader_min_score: Annotated[float | None, Field(ge=0.0, le=1.0)] = None
    """Extractive reader: a reading whose answerability (the probability of `generation/answerability.py`'s model)
    is under this is no answer, refusal `reader`; unset: the threshold fitted with the embedding model's
    answerability model (`generation/data/answerability.json`, `bench/fit_answerability.py`)."""
    reader_low_score: Annotated[float | None, Field(ge=0.0, le=1.0)] = None
    """Extractive reader: answerability under this is a low-confidence answer; not below `reader_min_score`;
    unset: the fitted one."""
    reader_max_units: Annotated[int, Field(ge=1, le=10)] = 3
    """Extractive reader: sentences, list items or table rows quoted at most (D0025)."""
    reader_passages: Annotated[int, Field(ge=1, le=100)] = 3
    """Extractive reader: passages read, best first, for a question asked on its own (D0026)."""
    reader_followup_passages: Annotated[int, Field(ge=1, le=100)] = 5
    """Extractive reader: passages read for a follow-up made standalone (D0026)."""
    writer_min_score: Annotated[float, Field(ge=0, le=2)] = 0.5
    """Extractive writer (documents): a section quotes units scoring at least this against "topic: heading"
    (cosine + 0.5 x the share of the heading's words held)."""

    _check_model = field_validator("model")(_reader_name)

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> GenerationConfig:
        low, least = self.reader_low_score, self.reader_min_score
        if low is not None and least is not None and low < least:
            raise ValueError(f"reader_low_score ({low}) must not be below reader_min_score ({least})")
        return self


class LLMConfig(_Section):
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60
    """Seconds an LLM or embedding call may take before it fails (and is retried)."""
    retries: Annotated[int, Field(ge=0, le=10)] = 3
    """Retries of an LLM call after a transient error (timeout, rate limit, connection)."""
    api_base: str | None = None
    """Base URL of an OpenAI-compatible or Ollama server for litellm, e.g. `http://127.0.0.1:11434`; `null` for
    the provider's own."""

    @field_validator("api_base")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("expected an http:// or https:// URL, e.g. http://127.0.0.1:11434")
        return value


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def parse_duration(text: str) -> float:
    """Seconds in a duration written as a number and a unit: ``30s``, ``10m``, ``1h``, ``1.5h``, ``1d``.

    Raises ValueError saying what is allowed for anything else (no unit, an unknown unit, zero).
    """
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"invalid duration {text!r}: expected a number and a unit s, m, h or d (e.g. 30s, 10m, 1h)")
    seconds = float(match.group(1)) * DURATION_UNITS[match.group(2)]
    if seconds < 1:
        raise ValueError(f"invalid duration {text!r}: it must be at least 1 second")
    return seconds


class SyncConfig(_Section):
    """Folders bound to collections (``foundry collections bind``) are synced this often by Celery beat."""

    interval: str = "10m"
    """How often Celery beat syncs the folders bound to collections: a duration (`30s`, `10m`, `1h`, `1d`) or `off`
    (no scheduled sync; `foundry sync` still works)."""

    @field_validator("interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        if value != "off":
            parse_duration(value)
        return value

    @property
    def interval_seconds(self) -> float | None:
        """The interval in seconds, or None when the scheduled sync is off."""
        return None if self.interval == "off" else parse_duration(self.interval)


class PromptsConfig(_Section):
    """Paths of prompt templates; relative paths are taken from the project root."""

    answer_system: str = "templates/prompts/answer_system.txt"
    """System prompt of an LLM answer."""
    answer_user: str = "templates/prompts/answer_user.txt"
    """User message of an LLM answer: `{question}`, restated after the passages (D0029)."""
    generate_system: str = "templates/prompts/generate_system.txt"
    """System prompt of an LLM-written document (the spec body goes in it)."""
    hyde: str = "templates/prompts/hyde.txt"
    """Prompt of the HyDE answer (`retrieval.hyde`)."""
    context_prefix: str = "templates/prompts/context_prefix.txt"
    """Prompt of the situating sentence (`embedding.context_model`)."""
    summary: str = "templates/prompts/summary.txt"
    """Prompt of an LLM source summary (`ingest.summary_model`)."""
    relevance: str = "templates/prompts/relevance.txt"
    """Prompt of the relevance rating (`retrieval.scorer_model`)."""
    conflicts: str = "templates/prompts/conflicts.txt"
    """Prompt of the LLM conflict detector."""
    condense: str = "templates/prompts/condense.txt"
    """Prompt of an LLM condenser (`retrieval.condense_model`): `{history}` and `{message}`."""


class FoundryConfig(_Section):
    embedding: EmbeddingConfig = EmbeddingConfig()
    ingest: IngestConfig = IngestConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    generation: GenerationConfig = GenerationConfig()
    llm: LLMConfig = LLMConfig()
    sync: SyncConfig = SyncConfig()
    prompts: PromptsConfig = PromptsConfig()
    # Threshold keys ("section.key") taken from the embedding model's calibrated row, not from foundry.yaml.
    _model_defaults: frozenset[str] = PrivateAttr(default=frozenset())

    @classmethod
    def build(cls, data: dict) -> FoundryConfig:
        """Validate ``data``, each threshold it leaves out taken from its embedding model's row
        (``model_thresholds``); raises ValidationError."""
        embedding = data.get("embedding")
        model = embedding.get("model", LOCAL_EMBEDDER) if isinstance(embedding, dict) else LOCAL_EMBEDDER
        filled, taken = model_thresholds.fill(data, model if isinstance(model, str) else LOCAL_EMBEDDER)
        conf = cls.model_validate(filled)
        conf._model_defaults = taken
        return conf

    def with_overrides(self, **sections: dict) -> FoundryConfig:
        """A validated copy with some keys of some sections replaced, e.g. ``ingest={"summary_model": "none"}``.

        Thresholds that came from the embedding model's row follow a new ``embedding.model``.
        """
        data = self.model_dump()
        for key in self._model_defaults:
            section, name = key.split(".")
            data[section].pop(name, None)
        for name, values in sections.items():
            data[name] = {**data[name], **values}
        return FoundryConfig.build(data)

    def model_roles(self) -> dict[str, tuple[str, str]]:
        """Each configured model by its key: ``{"generation.model": ("local/smollm2-135m", "chat"), …}``.

        Roles set to ``none`` and a HyDE model while HyDE is off are left out.
        """
        keys = {
            "embedding.model": (self.embedding.model, "embedding"),
            "embedding.context_model": (self.embedding.context_model, "chat"),
            "ingest.summary_model": (self.ingest.summary_model, "chat"),
            "retrieval.scorer_model": (self.retrieval.scorer_model, "chat"),
            "retrieval.condense_model": (self.retrieval.condense_model, "chat"),
            "generation.model": (self.generation.model, "chat"),
        }
        if self.retrieval.hyde:
            keys["retrieval.hyde_model"] = (self.retrieval.hyde_model, "chat")
        return {key: value for key, value in keys.items() if value[0] not in ("none", EXTRACTIVE, CONDENSE_RULE)}

    def llm_models(self) -> set[str]:
        """Every LLM model a configured role will call (``none`` roles left out)."""
        roles = {
            self.embedding.context_model,
            self.ingest.summary_model,
            self.retrieval.scorer_model,
            self.retrieval.condense_model,
            self.generation.model,
        }
        if self.retrieval.hyde:
            roles.add(self.retrieval.hyde_model)
        return {m for m in roles if m not in ("none", EXTRACTIVE, CONDENSE_RULE)}


def _describe(error: ErrorDetails) -> str:
    key = ".".join(str(part) for part in error["loc"])
    value = error.get("input")
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key (value {value!r})"
    return f"{key}: invalid value {value!r}: {error['msg']}"


def parse_config(data: object, *, origin: str = "foundry.yaml") -> FoundryConfig:
    """Validate a parsed YAML document; raise ImproperlyConfigured naming each bad key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f"{origin}: expected a mapping of sections, got {type(data).__name__}")
    try:
        return FoundryConfig.build(data)
    except ValidationError as exc:
        lines = "\n  ".join(_describe(e) for e in exc.errors())
        raise ImproperlyConfigured(f"{origin} is invalid:\n  {lines}") from None


def load_config(path: Path) -> FoundryConfig:
    """Read and validate ``path``; a missing file means all defaults."""
    if not path.exists():
        return FoundryConfig.build({})
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ImproperlyConfigured(f"{path}: not valid YAML: {exc}") from None
    return parse_config(data, origin=str(path))
