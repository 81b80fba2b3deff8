"""The embedded backend: a pyoxigraph `Store` in memory or in a directory on disk."""

from __future__ import annotations

import gzip
import io
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pyoxigraph as ox

from pgmr.stores.base import (
    GRAPH_VARIABLES,
    QueryResult,
    StoreError,
    StoreTimeout,
    Term,
    prepare_query,
    refuse_service_calls,
    term_from_oxigraph,
)

DEFAULT_TIMEOUT = 30.0
_BATCH = 20_000
_FORMAT_NAMES: dict[str, ox.RdfFormat] = {
    "nt": ox.RdfFormat.N_TRIPLES,
    "ntriples": ox.RdfFormat.N_TRIPLES,
    "n-triples": ox.RdfFormat.N_TRIPLES,
    "ttl": ox.RdfFormat.TURTLE,
    "turtle": ox.RdfFormat.TURTLE,
    "nq": ox.RdfFormat.N_QUADS,
    "nquads": ox.RdfFormat.N_QUADS,
    "n-quads": ox.RdfFormat.N_QUADS,
    "trig": ox.RdfFormat.TRIG,
    "rdf": ox.RdfFormat.RDF_XML,
    "rdfxml": ox.RdfFormat.RDF_XML,
    "rdf/xml": ox.RdfFormat.RDF_XML,
    "xml": ox.RdfFormat.RDF_XML,
    "owl": ox.RdfFormat.RDF_XML,
    "n3": ox.RdfFormat.N3,
    "jsonld": ox.RdfFormat.JSON_LD,
    "json-ld": ox.RdfFormat.JSON_LD,
}


@dataclass(frozen=True)
class LoadProgress:
    """Reported while loading: statements read so far and (compressed) bytes of the file consumed."""

    path: Path
    triples: int
    bytes_read: int
    total_bytes: int


ProgressCallback = Callable[[LoadProgress], None]


def rdf_format(path: Path, format: str | ox.RdfFormat | None = None) -> ox.RdfFormat:
    """The RDF format from an explicit name/media type or from the file suffix (a trailing .gz is skipped)."""
    if isinstance(format, ox.RdfFormat):
        return format
    if format:
        name = format.strip().lower()
        found = _FORMAT_NAMES.get(name.lstrip(".")) or ox.RdfFormat.from_media_type(name)
        if found is None:
            raise StoreError(f"unknown RDF format {format!r}; use one of nt, ttl, nq, trig, rdf, n3, jsonld")
        return found
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    found = _FORMAT_NAMES.get(suffixes[-1].lstrip(".")) if suffixes else None
    if found is None:
        raise StoreError(
            f"cannot tell the RDF format of {path} from its name; pass a format (nt, ttl, nq, ...)"
        )
    return found


def result_from_oxigraph(results: Any, cancelled: Callable[[], bool] = lambda: False) -> QueryResult:
    """Read pyoxigraph query results (QuerySolutions / QueryBoolean / QueryTriples) into a QueryResult.

    Oxigraph evaluates lazily while results are read, so `cancelled` is checked between rows: a streaming
    query abandoned after a timeout stops at its next row instead of running to the end.
    """
    if isinstance(results, ox.QueryBoolean):
        return QueryResult("boolean", boolean=bool(results))
    rows: list[dict[str, Term]] = []
    if isinstance(results, ox.QueryTriples):
        for triple in results:
            if cancelled():
                raise _Cancelled
            rows.append(dict(zip(GRAPH_VARIABLES, map(term_from_oxigraph, triple), strict=True)))
        return QueryResult("graph", GRAPH_VARIABLES, tuple(rows))
    variables = tuple(v.value for v in results.variables)
    for solution in results:
        if cancelled():
            raise _Cancelled
        rows.append(
            {
                name: term_from_oxigraph(value)
                for name, value in zip(variables, solution, strict=True)
                if value is not None
            }
        )
    return QueryResult("bindings", variables, tuple(rows))


class _Cancelled(Exception):
    pass


class _CountingReader:
    """A binary file wrapper that counts the bytes read, for progress over compressed or plain files."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.count += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        n = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        self.count += n or 0
        return n

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        # GzipFile wants one (to rewind, which loading never does); the count holds for forward reads only.
        raise io.UnsupportedOperation("seek")


class OxigraphStore:
    """A read-only `SparqlStore` over an embedded pyoxigraph store, plus bulk loading for building one.

    Queries run in a worker thread so that `timeout` holds even where pyoxigraph has no per-query timeout.
    After a timeout the worker is abandoned: a streaming query stops at its next result row, but one whose
    work happens before the first row (ORDER BY, GROUP BY, aggregates, ASK) finishes in the background, on
    a daemon thread that never keeps the process alive.

    pyoxigraph runs a SERVICE clause by sending the query to the endpoint it names, from this machine, so a
    query a model wrote could make pgmr call any address it can reach (a service on the loopback, a cloud
    metadata endpoint). Such queries raise `ServiceRefusedError` unless `allow_service` is true.
    """

    def __init__(
        self,
        store: Any,
        *,
        path: Path | None = None,
        read_only: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        allow_service: bool = False,
    ) -> None:
        self._store: Any = store
        self.path = path
        self.read_only = read_only
        self.timeout = timeout
        self.allow_service = allow_service

    # -- opening ---------------------------------------------------------------------------------------------

    @classmethod
    def in_memory(
        cls, *, timeout: float | None = DEFAULT_TIMEOUT, allow_service: bool = False
    ) -> OxigraphStore:
        return cls(ox.Store(), timeout=timeout, allow_service=allow_service)

    @classmethod
    def open(
        cls,
        path: Path | str,
        read_only: bool = True,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        allow_service: bool = False,
    ) -> OxigraphStore:
        """Open an on-disk store. Read-only needs an existing store directory; read-write creates one."""
        path = Path(path).expanduser()
        if read_only:
            if not path.is_dir():
                raise StoreError(
                    f"no oxigraph store at {path} (create one with `pgmr kg load FILE --store {path}`)"
                )
            try:
                store = ox.Store.read_only(str(path))
            except OSError as exc:
                raise StoreError(f"cannot open the oxigraph store at {path} read-only: {exc}") from None
        else:
            if path.exists() and not path.is_dir():
                raise StoreError(f"{path} is a file, not a store directory")
            try:
                path.mkdir(parents=True, exist_ok=True)
                store = ox.Store(str(path))
            except OSError as exc:
                raise StoreError(f"cannot open the oxigraph store at {path}: {exc}") from None
        return cls(store, path=path, read_only=read_only, timeout=timeout, allow_service=allow_service)

    @classmethod
    def from_file(
        cls,
        path: Path | str,
        format: str | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        allow_service: bool = False,
    ) -> OxigraphStore:
        """An in-memory store loaded from one RDF file (handy for small graphs such as the QALD-10 one)."""
        store = cls.in_memory(timeout=timeout, allow_service=allow_service)
        store.load(path, format)
        return store

    # -- loading ---------------------------------------------------------------------------------------------

    def load(
        self, path: Path | str, format: str | None = None, *, progress: ProgressCallback | None = None
    ) -> int:
        """Load an N-Triples / Turtle / N-Quads (/ TriG, RDF/XML, ...) file, `.gz` allowed; returns the number
        of statements read. On disk this uses oxigraph's bulk loader, which is not transactional: a file that
        fails to parse halfway leaves the statements before the error in the store."""
        store = self._open_store()
        if self.read_only:
            raise StoreError(f"the store at {self.path} is open read-only; open it read-write to load data")
        path = Path(path).expanduser()
        if not path.is_file():
            raise StoreError(f"RDF file {path} not found")
        fmt = rdf_format(path, format)
        total = path.stat().st_size
        insert = store.bulk_extend if self.path is not None else store.extend
        count = 0
        with path.open("rb") as raw:
            counter = _CountingReader(raw)
            stream: Any = gzip.GzipFile(fileobj=counter) if path.suffix.lower() == ".gz" else counter
            batch: list[Any] = []
            try:
                for quad in ox.parse(stream, fmt):
                    batch.append(quad)
                    if len(batch) >= _BATCH:
                        insert(batch)
                        count += len(batch)
                        batch = []
                        if progress:
                            progress(LoadProgress(path, count, counter.count, total))
                if batch:
                    insert(batch)
                    count += len(batch)
            except SyntaxError as exc:
                raise StoreError(
                    f"{path}: not valid {fmt.name}: {' '.join(str(exc).split())} "
                    f"({count} statements loaded before the error)"
                ) from None
            except (OSError, EOFError, ValueError) as exc:
                raise StoreError(
                    f"cannot read {path}: {exc} ({count} statements loaded before the error)"
                ) from None
        if self.path is not None:
            store.flush()
        if progress:
            progress(LoadProgress(path, count, total, total))
        return count

    def __len__(self) -> int:
        return len(self._open_store())

    # -- querying --------------------------------------------------------------------------------------------

    def query(self, sparql: str, *, timeout: float | None = None) -> QueryResult:
        prepared = prepare_query(sparql)
        if not self.allow_service:
            refuse_service_calls(prepared.text, "the embedded oxigraph store")
        store = self._open_store()
        limit = self.timeout if timeout is None else timeout
        if limit is not None and limit <= 0:
            raise StoreError(f"timeout must be positive, got {limit!r}")
        if limit is None:
            return self._evaluate(store, prepared.text, threading.Event())
        cancel = threading.Event()
        done = threading.Event()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = self._evaluate(store, prepared.text, cancel)
            except BaseException as exc:  # handed to the caller's thread below
                # pyoxigraph's result iterators must be dropped on the thread that made them (else the process
                # aborts), and a traceback keeps the frames holding them alive: cut it here, in the worker.
                exc.__traceback__ = exc.__context__ = exc.__cause__ = None
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="pgmr-oxigraph-query", daemon=True).start()
        if not done.wait(limit):
            cancel.set()
            raise StoreTimeout(f"the query did not finish within {limit:g} s (embedded oxigraph store)")
        if "error" in box:
            raise box["error"]
        return box["result"]

    @staticmethod
    def _evaluate(store: Any, text: str, cancel: threading.Event) -> QueryResult:
        try:
            return result_from_oxigraph(store.query(text), cancel.is_set)
        except _Cancelled:
            return QueryResult("bindings")  # nobody reads it: the caller has already timed out
        except SyntaxError as exc:  # cannot happen after prepare_query, but never leak a raw parser error
            raise StoreError(f"oxigraph refused the query: {exc}") from None
        except (OSError, ValueError, TypeError, RuntimeError) as exc:
            raise StoreError(f"query failed in the embedded store: {exc}") from None

    # -- lifecycle -------------------------------------------------------------------------------------------

    def _open_store(self) -> Any:
        if self._store is None:
            raise StoreError("the store is closed")
        return self._store

    def close(self) -> None:
        """Release the store (on disk: its lock). Workers of abandoned queries keep their own reference."""
        self._store = None

    def __enter__(self) -> OxigraphStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        service = ", allow_service=True" if self.allow_service else ""
        return f"OxigraphStore({where}, read_only={self.read_only}{service})"
