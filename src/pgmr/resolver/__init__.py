"""Post-generation resolution of placeholders against the memory, with refusal."""

from __future__ import annotations

from pgmr.resolver.model import Candidate, PlaceholderEvidence, Refusal, Resolution
from pgmr.resolver.ranking import Prior, normalize_label
from pgmr.resolver.resolver import ResolutionError, Resolver, ResolverConfig, placeholder_text, resolved_ids

__all__ = [
    "Candidate",
    "PlaceholderEvidence",
    "Prior",
    "Refusal",
    "Resolution",
    "ResolutionError",
    "Resolver",
    "ResolverConfig",
    "normalize_label",
    "placeholder_text",
    "resolved_ids",
]
