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

from foundry_site.core import model_thresholds

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
    model_config = ConfigDict(extra="forbid", strict=True)


class EmbeddingConfig(_Section):
    model: str = LOCAL_EMBEDDER
    context_model: str = "none"
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 64

    _check_model = field_validator("model", "context_model")(_model_name)

    @field_validator("model")
    @classmethod
    def _not_none(cls, value: str) -> str:
        if value == "none":
            raise ValueError("the embedding model cannot be 'none'")
        return value


class IngestConfig(_Section):
    summary_model: str = EXTRACTIVE
    summary_max_tokens: Annotated[int, Field(ge=16, le=4000)] = 500
    max_file_mb: Annotated[float, Field(gt=0, le=10_000)] = 25
    include_private: bool = False
    chunk_tokens: Annotated[int, Field(ge=32, le=8192)] = 200
    # A chunk continuing a section repeats the last sentences/paragraphs of the previous
    # one, up to this many tokens (docs/decisions.md, "Chunks of 200 tokens").
    chunk_overlap_tokens: Annotated[int, Field(ge=0, le=4096)] = 0
    # Each run of this many consecutive sentences of a chunk is embedded too, and the dense
    # channel finds a chunk by the best of its vectors (0: whole chunks only). Finer units
    # rank better with MiniLM (docs/decisions.md, "Sentence windows").
    window_sentences: Annotated[int, Field(ge=0, le=16)] = 2

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
    top_k: Annotated[int, Field(ge=1, le=100)] = 10
    # hybrid: fuse the channels' ranks per document (a source ranks at its best chunk) or per chunk.
    # Document fusion (k=3) ranks documents best on SciFact, but it fills the passages with
    # one source's chunks; chunk fusion keeps answers' passages and sources varied
    # (docs/decisions.md, "Fusion per chunk").
    rrf_k: Annotated[int, Field(ge=1, le=1000)] = 60
    fusion: Literal["chunk", "document"] = "chunk"
    # Dense channel: "matrix" scans a memory-mapped copy of the vectors (retrieval/dense.py,
    # ~10x faster, same results); "vec0" scans the sqlite-vec table itself.
    dense_index: Literal["matrix", "vec0"] = "matrix"
    # Matrix holding more than dense_exact_max_rows vectors: rank every row by the Hamming distance
    # of its sign bits (48 bytes a 384-d row instead of 1,536), then score only the dense_shortlist
    # nearest by that exactly (retrieval/dense.py; docs/decisions.md). dense_shortlist 0: exact always.
    dense_shortlist: Annotated[int, Field(ge=0, le=1_000_000)] = 8000
    dense_exact_max_rows: Annotated[int, Field(ge=0)] = 200_000
    # Hybrid mode: the BM25 query leaves out terms found in more than this share of the chunks
    # and in more than 10,000 chunks (1 keeps every term; bm25 mode always does). ~4x faster
    # BM25 at 1M chunks for -0.002 nDCG@10 (retrieval.search.rare_terms; docs/decisions.md).
    bm25_max_df: Annotated[float, Field(gt=0, le=1)] = 0.05
    # ... and, rarest first, keeps terms while their chunk counts add up to at most this many times
    # the number of chunks (and 10,000): a long question's BM25 P95 at 1M chunks -30 %, hybrid
    # nDCG@10 unchanged (docs/decisions.md; 64 keeps every term).
    bm25_max_postings: Annotated[float, Field(gt=0, le=64)] = 0.1
    hyde: bool = False
    hyde_model: str = LOCAL_LLM
    scorer_model: str = "none"
    relevance_threshold: Annotated[float, Field(ge=0, le=10)] = 4
    # Gate defaults calibrated on SQuAD 2.0 dev together with the extractive reader's thresholds
    # (bench/reader_calibration.py, docs/decisions.md): the gate lets more answerable questions
    # through and the reader's own threshold refuses the out-of-corpus ones that pass it.
    min_score: Unit = 0.3
    min_chunks: Annotated[int, Field(ge=1, le=100)] = 1

    _check_model = field_validator("hyde_model", "scorer_model")(_model_name)
    # A follow-up in a conversation is made standalone before retrieval: by the rule, an LLM, or not at all.
    condense_model: str = CONDENSE_RULE
    _check_condenser = field_validator("condense_model")(_condenser_name)


class GenerationConfig(_Section):
    model: str = EXTRACTIVE
    token_budget: Annotated[int, Field(ge=256, le=1_000_000)] = 8192
    max_source_summaries: Annotated[int, Field(ge=0, le=1000)] = 10
    max_passages: Annotated[int, Field(ge=1, le=100)] = 5
    max_answer_tokens: Annotated[int, Field(ge=16, le=16_000)] = 160
    max_document_tokens: Annotated[int, Field(ge=64, le=32_000)] = 700
    cache_answers: bool = True
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    # Grounding: a sentence with less support than this from any passage window is removed. 0.6 with
    # the default model: a quarter fewer hallucinated answers than 0.45, the same correct ones
    # (bench/grounding_sweep.py, docs/decisions.md); re-measure when changing generation.model.
    min_support: Unit = 0.6
    # Between min_score and this, most questions that pass the gate are out of corpus (docs/decisions.md).
    low_confidence_score: Unit = 0.45
    min_coverage: Unit = 0.9
    # The extractive reader (generation.model: extractive): the best unit scoring under reader_min_score
    # is no answer (refusal "reader"), under reader_low_score a low-confidence one; it quotes up to
    # reader_max_units units. Calibrated on SQuAD 2.0 dev (bench/reader_calibration.py, docs/decisions.md).
    reader_min_score: Annotated[float, Field(ge=0, le=2)] = 0.8
    reader_low_score: Annotated[float, Field(ge=0, le=2)] = 1.0
    reader_max_units: Annotated[int, Field(ge=1, le=10)] = 3
    # Passages the extractive reader reads (best first): its time is embedding their units, and the
    # 4th and 5th passage add 0.007 to the answers holding a gold answer on SQuAD 2.0 dev (docs/decisions.md).
    reader_passages: Annotated[int, Field(ge=1, le=100)] = 3
    # A follow-up made standalone reads more: its question, the message and the words carried over, finds its answer
    # further down (bench/followups.py: 4 / 5 / 7 passages, 324 / 325 / 324 of 416 right against 319 with 3).
    reader_followup_passages: Annotated[int, Field(ge=1, le=100)] = 5
    # The extractive writer (documents) quotes a section's units scoring at least this against "topic: heading".
    # Lower than reader_min_score: a section heading asks for a topic, not one fact (docs/decisions.md).
    writer_min_score: Annotated[float, Field(ge=0, le=2)] = 0.5

    _check_model = field_validator("model")(_reader_name)

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> GenerationConfig:
        if self.reader_low_score < self.reader_min_score:
            raise ValueError(
                f"reader_low_score ({self.reader_low_score}) must not be below reader_min_score "
                f"({self.reader_min_score})"
            )
        return self


class LLMConfig(_Section):
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60
    retries: Annotated[int, Field(ge=0, le=10)] = 3
    api_base: str | None = None

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

    interval: str = "10m"  # a duration (30s, 10m, 1h) or "off": no scheduled sync (``foundry sync`` still works)

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
    answer_user: str = "templates/prompts/answer_user.txt"
    generate_system: str = "templates/prompts/generate_system.txt"
    hyde: str = "templates/prompts/hyde.txt"
    context_prefix: str = "templates/prompts/context_prefix.txt"
    summary: str = "templates/prompts/summary.txt"
    relevance: str = "templates/prompts/relevance.txt"
    conflicts: str = "templates/prompts/conflicts.txt"
    condense: str = "templates/prompts/condense.txt"  # {history} and {message}: retrieval.condense_model


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
