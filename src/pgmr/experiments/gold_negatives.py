"""Wrong queries made from gold queries, for the draft verifier (pgmr.generators.verifier).

The members' own drafts of their training questions are right 80% of the time, so the verifier sees few of the
mistakes it has to tell apart on new questions. These negatives are one edit away from the gold query, each an
edit the generators are seen to make (docs/research-log.md, "2026-12-05 — Runners-up as extra drafts"):

- `relation`: one property swapped for a near neighbour in the memory (by the embedding of its label and
  description) among the properties the training queries use: end time / start time, place of death / place
  of burial, follows / followed by;
- `reversed`: one `wdt:` triple whose subject and object are both entities or variables, turned round;
- `entity`: one entity swapped for a homonym in the memory (another ID with the same label), or, when there is
  none, for its nearest neighbour in the memory.

Every edit gives a query that is not Query-EM equal to the gold one (checked by the caller). The choice per
question is a function of the seed and the question's index, so a resumed training run sees the same
examples.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from pgmr.query import IntermediateQueryError
from pgmr.query.lexer import Token, tokenize

KINDS = ("relation", "reversed", "entity")
_PROPERTY_PREFIXES = frozenset({"wdt", "p", "ps", "pq"})


def _tokens(sparql: str) -> list[Token] | None:
    try:
        return [t for t in tokenize(sparql) if t.kind != "comment"]
    except IntermediateQueryError:
        return None


def _ids(tokens: Sequence[Token], prefixes: frozenset[str]) -> list[str]:
    return list(
        dict.fromkeys(t.local for t in tokens if t.kind == "pname" and t.prefix in prefixes and t.local)
    )


def _replace_spans(sparql: str, spans: Sequence[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, text in sorted(spans):
        out.append(sparql[last:start])
        out.append(text)
        last = end
    out.append(sparql[last:])
    return "".join(out)


def _label_vectors(dictionary: Any, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Per ID, the vector of its label row without description (the first row when it has none)."""
    kept, rows = [], []
    for wid in ids:
        positions = dictionary.rows_of(wid)
        if not positions:
            continue
        plain = [
            p
            for p in positions
            if not dictionary.rows[p].is_alias and dictionary.rows[p].text == dictionary.rows[p].label
        ]
        kept.append(wid)
        rows.append((plain or list(positions))[0])
    if not rows:
        return [], np.zeros((0, 1), dtype=np.float32)
    return kept, np.asarray(dictionary.index.reconstruct(np.asarray(rows, dtype=np.int64)), dtype=np.float32)


class GoldNegatives:
    """Makes the negatives of gold queries over one memory; `golds` (the training queries) decide which
    properties a relation may be swapped for and which entities need neighbours."""

    def __init__(self, memory: Any, golds: Iterable[str], *, neighbours: int = 3, seed: int = 0) -> None:
        if neighbours < 1:
            raise ValueError("neighbours must be at least 1")
        self.seed = seed
        token_lists = [t for t in (_tokens(g) for g in golds) if t is not None]
        properties = list(dict.fromkeys(p for ts in token_lists for p in _ids(ts, _PROPERTY_PREFIXES)))
        entities = list(dict.fromkeys(e for ts in token_lists for e in _ids(ts, frozenset({"wd"}))))
        self.relation_neighbours = self._relation_neighbours(memory, properties, neighbours)
        self.entity_swaps = self._entity_swaps(memory, entities, neighbours)

    @staticmethod
    def _relation_neighbours(memory: Any, properties: Sequence[str], k: int) -> dict[str, tuple[str, ...]]:
        ids, vectors = _label_vectors(memory.dictionary("relation"), properties)
        if len(ids) < 2:
            return {}
        scores = vectors @ vectors.T
        np.fill_diagonal(scores, -np.inf)
        top = np.argsort(-scores, axis=1)[:, :k]
        return {wid: tuple(ids[j] for j in row) for wid, row in zip(ids, top.tolist(), strict=True)}

    @staticmethod
    def _entity_swaps(memory: Any, entities: Sequence[str], k: int) -> dict[str, tuple[str, ...]]:
        dictionary = memory.dictionary("entity")
        by_label: dict[str, list[str]] = {}
        for wid in dictionary.ids():
            row = dictionary.get(wid)
            if row is not None:
                by_label.setdefault(row.label.casefold(), []).append(wid)
        swaps: dict[str, tuple[str, ...]] = {}
        lonely = []
        for wid in entities:
            row = dictionary.get(wid)
            if row is None:
                continue
            homonyms = sorted(o for o in by_label.get(row.label.casefold(), ()) if o != wid)
            if homonyms:
                swaps[wid] = tuple(homonyms[:k])
            else:
                lonely.append(wid)
        ids, vectors = _label_vectors(dictionary, lonely)
        if ids:
            for wid, hits in zip(ids, dictionary.search_vectors(vectors, k + 1), strict=True):
                others = tuple(h.id for h in hits if h.id != wid)[:k]
                if others:
                    swaps[wid] = others
        return swaps

    def candidates(self, gold: str, rng: random.Random) -> dict[str, str]:
        """One edited query per kind that applies to `gold` (kind -> SPARQL)."""
        tokens = _tokens(gold)
        if tokens is None:
            return {}
        out: dict[str, str] = {}
        swapped = _swap(gold, tokens, _PROPERTY_PREFIXES, self.relation_neighbours, rng)
        if swapped is not None:
            out["relation"] = swapped
        triples = [
            (tokens[i - 1], tokens[i + 1])
            for i in range(1, len(tokens) - 1)
            if tokens[i].kind == "pname"
            and tokens[i].prefix == "wdt"
            and all(_node(t) for t in (tokens[i - 1], tokens[i + 1]))
            and tokens[i - 1].text != tokens[i + 1].text
        ]
        if triples:
            subject, obj = rng.choice(triples)
            out["reversed"] = _replace_spans(
                gold, [(subject.start, subject.end, obj.text), (obj.start, obj.end, subject.text)]
            )
        swapped = _swap(gold, tokens, frozenset({"wd"}), self.entity_swaps, rng)
        if swapped is not None:
            out["entity"] = swapped
        return out

    def __call__(self, index: int, gold: str, count: int) -> list[tuple[str, str]]:
        """Up to `count` (kind, SPARQL) negatives of the gold query of question `index`, kinds in a random
        order drawn from the seed and the index."""
        rng = random.Random(self.seed * 1_000_003 + index)
        made = self.candidates(gold, rng)
        kinds = [k for k in KINDS if k in made]
        rng.shuffle(kinds)
        return [(k, made[k]) for k in kinds[:count]]


def _swap(
    gold: str,
    tokens: Sequence[Token],
    prefixes: frozenset[str],
    swaps: dict[str, tuple[str, ...]],
    rng: random.Random,
) -> str | None:
    """`gold` with one of its IDs under `prefixes` that has swaps replaced, wherever it occurs, by one of them;
    None when none of its IDs has any."""
    ids = [i for i in _ids(tokens, prefixes) if i in swaps]
    if not ids:
        return None
    old = rng.choice(ids)
    new = rng.choice(swaps[old])
    return _replace_spans(
        gold,
        [
            (t.start, t.end, f"{t.prefix}:{new}")
            for t in tokens
            if t.kind == "pname" and t.prefix in prefixes and t.local == old
        ],
    )


def _node(token: Token) -> bool:
    """An entity (`wd:Q..`) or a variable: what can stand on either side of a triple turned round."""
    if token.kind == "pname":
        return token.prefix == "wd"
    return token.kind == "other" and token.text[:1] in "?$" and len(token.text) > 1


__all__ = ["KINDS", "GoldNegatives"]
