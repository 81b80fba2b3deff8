"""A draft verifier: a cross-encoder that reads a question beside a resolved query written with the memory's
labels in place of IDs, and scores whether the query answers the question (beyond the paper).

Why: the ensemble's members disagree on about a third of LC-QuAD 2.0 validation questions, and when they do a
right draft is often there (some draft is right for 57% of validation questions; the linear reranker picked a
right one for 50%). The reranker's other signals say how well the memory supports each placeholder, which a
wrong relation or a triple written backwards does not change; reading "[Toshiro Mifune] <place of death> ?v0 .
?v0 <contains the administrative territorial entity> [Shinjuku-ku]" against the question can. Its score is one
more signal of the reranker (pgmr.pipeline.rerank), which weighs it with the rest.

Training data need no labelling: the members draft a query for every training question (on their own training
questions a member's draft is still wrong about 20% of the time), each draft is resolved like any output and
compared with the gold query; a right draft is a positive example, a wrong one a negative, and the gold query is
the positive of a question no draft gets right (`pgmr.experiments.verifier_fit`; `pgmr train-verifier`).

The shipped default (models/pgmr-ensemble) has one since 2026-12-05 (docs/research-log.md, "2026-12-05 — The
draft verifier ships"); its first version added only 0.2 points of Query EM on LC-QuAD 2.0 validation for about
twice a question's time ("2026-12-05 — A draft verifier, first version"). An ensemble directory with
`verifier/` and a reranker fitted with it uses one.

- `text`: verbalization (`verbalize`, `memory_describer`);
- `model`: the `Verifier` (load, save, score) and its directory format;
- `train`: `VerifierConfig`, `train_verifier` (resumable).
"""

from pgmr.generators.verifier.model import MAX_LOGIT, VERIFIER_DIR, Verifier, VerifierError, new_verifier
from pgmr.generators.verifier.text import Describe, memory_describer, verbalize
from pgmr.generators.verifier.train import CHECKPOINT, VerifierConfig, VerifierExample, train_verifier

__all__ = [
    "CHECKPOINT",
    "MAX_LOGIT",
    "VERIFIER_DIR",
    "Describe",
    "Verifier",
    "VerifierConfig",
    "VerifierError",
    "VerifierExample",
    "memory_describer",
    "new_verifier",
    "train_verifier",
    "verbalize",
]
