"""The settings of a question's way through the pipeline, each with one default.

`StageConfig` is what the stages take: label grounding (pgmr.resolver.grounding.GroundingConfig), resolution
(pgmr.resolver.ResolverConfig), the KG choice (pgmr.resolver.kg_choice.KgChoiceConfig) and execution. Every
entry point builds one: `pgmr ask`/`serve` from `PipelineConfig`, the experiments from their settings,
`pgmr generate --resolve`, `pgmr resolve` and the demo from their options, so a default changed in one of
those dataclasses changes it everywhere.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pgmr.precision import DEFAULT_PRECISION, check_precision
from pgmr.resolver import ResolverConfig
from pgmr.resolver.grounding import GroundingConfig
from pgmr.resolver.kg_choice import KgChoiceConfig
from pgmr.resolver.support import shipped_threshold

_GROUNDING = GroundingConfig()
_RESOLVER = ResolverConfig()
_KG = KgChoiceConfig()


def shipped_resolver(**changes: Any) -> ResolverConfig:
    """The resolver as the entry points run it: the library's defaults, with refusal at the shipped threshold
    (the resolver's own default is 0: the library ranks, the caller decides)."""
    return ResolverConfig(**{"min_confidence": shipped_threshold(), **changes})


@dataclass(frozen=True)
class StageConfig:
    """What the stages (pgmr.pipeline.stages) need besides the loaded parts."""

    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    resolver: ResolverConfig = field(default_factory=shipped_resolver)
    kg: KgChoiceConfig = field(default_factory=KgChoiceConfig)
    timeout: float = 10.0
    max_answers: int = 100

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.max_answers < 1:
            raise ValueError(f"max_answers must be at least 1, got {self.max_answers}")


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of one pipeline (`pgmr ask`, `pgmr serve`); validated here, at construction.

    `model_dir` None: `pgmr.generators.default_model_dir()`; `memory_dir` None: `pgmr.config.default_memory_dir()`;
    `store` None: nothing is executed (status "resolved"); `data_dir`: where the label catalog for answers is
    read (None: the memory's labels). The defaults of the resolution settings are those of `StageConfig`'s parts.
    """

    model_dir: Path | None = None
    memory_dir: Path | None = None
    store: str | None = None
    data_dir: Path | None = None
    k: int = _RESOLVER.k
    # Similarity gates (off by default): a best candidate less similar than this is refused.
    entity_threshold: float = _RESOLVER.entity_threshold
    relation_threshold: float = _RESOLVER.relation_threshold
    # The refusal threshold: a placeholder whose support (pgmr.resolver.support: the estimated probability that
    # the memory holds what it names) is below it is refused. Default: the threshold chosen on LC-QuAD 2.0 validation
    # (src/pgmr/resolver/calibration.json); 0 turns refusal off.
    min_confidence: float = field(default_factory=shipped_threshold)
    kg_check: bool = _KG.enabled
    max_probes: int = _KG.max_probes
    timeout: float = StageConfig.timeout
    max_answers: int = StageConfig.max_answers
    # Questions generated together when several wait for the model (the service under load).
    max_batch: int = 16
    device: str = "cpu"
    # The models' number format for inference (pgmr.precision): `auto` is bfloat16 where the hardware computes it
    # natively (same Query EM on LC-QuAD 2.0 validation, 1.2-2x faster), else float32.
    precision: str = DEFAULT_PRECISION
    # Check every memory file's sha256 at load (~10 s for the full memory): on for the service, off for one-shot asks.
    verify_memory: bool = True
    num_beams: int | None = None
    max_new_tokens: int | None = None
    # Entity labels are snapped to the question span at least this similar before resolution
    # (pgmr.resolver.grounding; 1 turns it off).
    grounding: float = _GROUNDING.min_similarity
    # Numbers and quoted words of the skeleton that are not in the question snap to its closest one
    # (pgmr.resolver.grounding.ground_literals).
    literal_grounding: bool = _GROUNDING.literals
    # Score bonus for copying question spans into entity labels while decoding
    # (pgmr.generators.seq2seq.copying); None: the generator's default, 0 turns it off.
    copy_bias: float | None = None
    relation_copy_bias: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.grounding <= 1.0:
            raise ValueError(f"grounding must be in [0, 1], got {self.grounding}")
        for name in ("copy_bias", "relation_copy_bias"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 100.0:
                raise ValueError(f"{name} must be in [0, 100], got {value}")
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        for name in ("entity_threshold", "relation_threshold"):
            value = getattr(self, name)
            if not -1.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a similarity in [-1, 1], got {value}")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be a probability in [0, 1], got {self.min_confidence}")
        if self.max_probes < 1:
            raise ValueError(f"max_probes must be at least 1, got {self.max_probes}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.max_answers < 1:
            raise ValueError(f"max_answers must be at least 1, got {self.max_answers}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {self.max_batch}")
        check_precision(self.precision)

    def resolver_config(self) -> ResolverConfig:
        return ResolverConfig(
            k=self.k,
            entity_threshold=self.entity_threshold,
            relation_threshold=self.relation_threshold,
            search_k=max(_RESOLVER.search_k, self.k),
            min_confidence=self.min_confidence,
        )

    def stage_config(self) -> StageConfig:
        return StageConfig(
            grounding=GroundingConfig(self.grounding, literals=self.literal_grounding),
            resolver=self.resolver_config(),
            kg=KgChoiceConfig(self.kg_check, self.max_probes),
            timeout=self.timeout,
            max_answers=self.max_answers,
        )

    def to_json(self) -> dict[str, Any]:
        return {key: str(value) if isinstance(value, Path) else value for key, value in asdict(self).items()}


__all__ = ["PipelineConfig", "StageConfig", "shipped_resolver"]
