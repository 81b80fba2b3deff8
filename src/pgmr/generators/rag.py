"""Candidate retrieval for the RAG baselines: question n-grams -> memory hits -> a block of candidate lines.

The block is what a RAG generator sees beside the question, one candidate per line:

    Q1055 Hamburg: city and state in northern Germany
    P1082 population: number of people inhabiting the place
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pgmr.kg.ids import Kind, id_number
from pgmr.query.question import STOP_WORDS

if TYPE_CHECKING:
    from pgmr.memory import Memory, MemoryHit

_WORD = re.compile(r"\w+(?:['’.\-]\w+)*")


@dataclass(frozen=True)
class Candidate:
    id: str
    label: str
    description: str | None
    score: float

    def line(self, max_description_words: int | None = 8) -> str:
        words = (self.description or "").split()
        description = " ".join(words if max_description_words is None else words[:max_description_words])
        return f"{self.id} {self.label}: {description}" if description else f"{self.id} {self.label}"


def question_ngrams(question: str, max_n: int = 3) -> list[str]:
    """Word n-grams (n = 1..max_n) in order of appearance, unique, skipping those made only of stop words."""
    words = _WORD.findall(question)
    grams: dict[str, None] = {}
    for n in range(1, max_n + 1):
        for start in range(len(words) - n + 1):
            gram = words[start : start + n]
            if all(w.lower() in STOP_WORDS for w in gram):
                continue
            grams.setdefault(" ".join(gram), None)
    return list(grams)


class CandidateRetriever:
    """Top entity and relation IDs for questions, searched in a `Memory` by the questions' word n-grams."""

    def __init__(
        self,
        memory: Memory,
        *,
        k_entities: int = 5,
        k_relations: int = 5,
        max_n: int = 3,
        max_description_words: int | None = 8,
        chunk_size: int = 1024,
        cache_size: int = 400_000,
    ) -> None:
        if k_entities < 0 or k_relations < 0 or max_n < 1 or chunk_size < 1 or cache_size < 0:
            raise ValueError(
                "need k_entities, k_relations >= 0, max_n >= 1, chunk_size >= 1 and cache_size >= 0"
            )
        self.memory = memory
        self.k = {"entity": k_entities, "relation": k_relations}
        self.max_n = max_n
        self.max_description_words = max_description_words
        # Questions per search call: all their n-grams are embedded at once, which bounds memory use.
        self.chunk_size = chunk_size
        # Hits per n-gram, kept across calls: a third of the n-grams of LC-QuAD 2.0's 23k training questions
        # recur in other chunks of 512, and embedding and searching them is nearly all of retrieval's time.
        # Emptied when full (no LRU bookkeeping: a training set is read once, in order).
        self.cache_size = cache_size
        self._hits: dict[str, dict[Kind, list[MemoryHit]]] = {}

    @classmethod
    def from_settings(cls, memory: Memory, settings: Mapping[str, Any] | None) -> CandidateRetriever:
        """The retriever a RAG model was trained with, from the `retriever` settings its card records
        (defaults where a setting is missing, as in cards written before it existed)."""
        used = settings or {}
        words = used.get("max_description_words", 8)
        return cls(
            memory,
            k_entities=int(used.get("k_entities", 5)),
            k_relations=int(used.get("k_relations", 5)),
            max_n=int(used.get("max_n", 3)),
            max_description_words=None if words is None else int(words),
        )

    def candidates(self, questions: Sequence[str]) -> list[list[Candidate]]:
        """Per question: its top entities (best first), then its top relations (best first)."""
        if isinstance(questions, str):
            raise TypeError("candidates takes a sequence of questions, not one string")
        results: list[list[Candidate]] = []
        for start in range(0, len(questions), self.chunk_size):
            results.extend(self._chunk(questions[start : start + self.chunk_size]))
        return results

    def contexts(self, questions: Sequence[str]) -> list[str]:
        """Per question, the candidate block (lines joined by newlines; empty when nothing was found)."""
        return [
            "\n".join(c.line(self.max_description_words) for c in found)
            for found in self.candidates(questions)
        ]

    def context(self, question: str) -> str:
        return self.contexts([question])[0]

    def settings(self) -> dict[str, Any]:
        """What decides the candidate blocks (besides the memory): recorded in model cards and context caches."""
        return {
            "k_entities": self.k["entity"],
            "k_relations": self.k["relation"],
            "max_n": self.max_n,
            "max_description_words": self.max_description_words,
        }

    def _search(self, texts: Sequence[str]) -> dict[str, dict[Kind, list[MemoryHit]]]:
        """Hits of each n-gram in each dictionary with k > 0: from the cache, else embedded and searched."""
        kinds: list[Literal["entity", "relation"]] = [kind for kind in ("entity", "relation") if self.k[kind]]
        found = {t: self._hits[t] for t in texts if t in self._hits}
        new = [t for t in texts if t not in found]
        if new and kinds:
            # Both dictionaries share the memory's encoder: embed the n-grams once, search twice.
            vectors = self.memory.encoder.encode(new)
            per_kind = {k: self.memory.dictionary(k).search_vectors(vectors, k=self.k[k]) for k in kinds}
            if len(self._hits) + len(new) > self.cache_size:
                self._hits.clear()
            for i, text in enumerate(new):
                found[text] = {k: per_kind[k][i] for k in kinds}
                if len(self._hits) < self.cache_size:
                    self._hits[text] = found[text]
        return found

    def _chunk(self, questions: Sequence[str]) -> list[list[Candidate]]:
        grams = [question_ngrams(q, self.max_n) for q in questions]
        texts = list(dict.fromkeys(g for per_question in grams for g in per_question))
        out: list[list[Candidate]] = [[] for _ in questions]
        kinds: tuple[Kind, ...] = ("entity", "relation")
        hits = self._search(texts) if texts and any(self.k.values()) else {}
        for kind in kinds:
            k = self.k[kind]
            if not k or not hits:
                continue
            for i, per_question in enumerate(grams):
                best: dict[str, Candidate] = {}
                for gram in per_question:
                    for hit in hits[gram][kind]:
                        if hit.id not in best or hit.score > best[hit.id].score:
                            best[hit.id] = Candidate(hit.id, hit.label, hit.description, hit.score)
                # Scores are rounded for the order: the same n-gram embedded in another batch differs in the
                # last float bits, and an exact tie (two labels both equal to n-grams) must not flip with it.
                ranked = sorted(best.values(), key=lambda c: (-round(c.score, 5), id_number(c.id), c.id))
                out[i].extend(ranked[:k])
        return out


CONTEXT_CACHE_FILE = "rag-contexts.jsonl"


def memory_fingerprint(memory_dir: Path) -> str:
    """Names one memory build: the sha256 of its manifest (which holds the sha256 of every memory file)."""
    manifest = Path(memory_dir) / "manifest.json"
    try:
        return hashlib.sha256(manifest.read_bytes()).hexdigest()
    except OSError:
        return str(memory_dir)


class ContextCache:
    """Candidate blocks kept in a JSONL file, so that retrieval for a training set is done once.

    Retrieving candidates for the 22k LC-QuAD 2.0 training questions takes the better part of an hour on 2
    CPU cores; an interrupted `pgmr train --mode rag` must not redo it. The file's first line records the
    retriever's settings and the memory; each further line is one {question, context}, appended and flushed
    chunk by chunk, so an interruption loses at most one chunk. A file made with other settings or another
    memory is not reused (it is replaced); a torn last line is ignored.
    """

    def __init__(
        self, retriever: CandidateRetriever, path: Path, *, memory_id: str, chunk: int = 512
    ) -> None:
        if chunk < 1:
            raise ValueError("chunk must be positive")
        self.retriever = retriever
        self.path = Path(path)
        self.header = {"retriever": retriever.settings(), "memory": memory_id}
        self.chunk = chunk

    def _load(self) -> dict[str, str]:
        if not self.path.is_file():
            return {}
        known: dict[str, str] = {}
        with self.path.open(encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        try:
            header = json.loads(lines[0])
        except (json.JSONDecodeError, IndexError):
            return {}
        if header != self.header:
            return {}
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # the torn end of an interrupted run
            if (
                isinstance(row, dict)
                and isinstance(row.get("question"), str)
                and isinstance(row.get("context"), str)
            ):
                known[row["question"]] = row["context"]
        return known

    def contexts(
        self, questions: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> list[str]:
        """Per question its candidate block: from the file where it is there, else retrieved and appended.
        `progress(done, total)` is called after each chunk."""
        known = self._load()
        missing = list(dict.fromkeys(q for q in questions if q not in known))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not known:
            # Write the header with the first chunk's rows; a stale file of other settings is replaced.
            self.path.write_text(json.dumps(self.header) + "\n", encoding="utf-8")
        total, done = len(missing), 0
        with self.path.open("a", encoding="utf-8") as handle:
            if known and not self._ends_with_newline():
                handle.write("\n")  # close a torn line before appending
            for start in range(0, total, self.chunk):
                part = missing[start : start + self.chunk]
                for question, context in zip(part, self.retriever.contexts(part), strict=True):
                    known[question] = context
                    handle.write(json.dumps({"question": question, "context": context}) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
                done += len(part)
                if progress is not None:
                    progress(done, total)
        return [known[q] for q in questions]

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return True
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
