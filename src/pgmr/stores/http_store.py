"""The remote backend: a SPARQL 1.1 protocol endpoint over HTTP (Wikidata Query Service, QLever, Fuseki, ...)."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from pgmr import __version__
from pgmr.stores.base import (
    GRAPH_VARIABLES,
    QueryResult,
    QuerySyntaxError,
    StoreBadResponse,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    prepare_query,
)

USER_AGENT = f"pgmr/{__version__} (+https://github.com/pgmr; KGQA toolkit) httpx/{httpx.__version__}"
RESULTS_ACCEPT = "application/sparql-results+json, application/sparql-results+xml;q=0.5"
GRAPH_ACCEPT = "application/n-triples, text/turtle;q=0.9, application/rdf+xml;q=0.5"
# Longer encoded queries go by POST: many servers and proxies cap URLs at 2-8 KB.
GET_LIMIT = 2000
# No answer pgmr asks for comes near this; a runaway one (a cross product) must not fill the process's memory.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
_TRANSFER_HEADERS = ("content-encoding", "content-length", "transfer-encoding")
_BODY_SNIPPET = 500
# Blazegraph (the Wikidata Query Service) reports its own query timeout as a 500 with this in the body;
# retrying such a query would only time out again.
_SERVER_TIMEOUT_MARKERS = ("TimeoutException", "Query deadline is expired", "query timed out")


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _BODY_SNIPPET else text[:_BODY_SNIPPET] + " ..."


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header (delta-seconds or an HTTP date) as seconds from now."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class HttpSparqlStore:
    """A read-only `SparqlStore` speaking the SPARQL 1.1 protocol.

    Short queries go as GET `?query=`, long ones as a form-encoded POST. 429 and 5xx answers and connection
    failures are retried `retries` times with exponential backoff (`backoff`, 2x, 4x, ... seconds), waiting at
    least what a Retry-After header asks for; a wait over `max_retry_wait` gives up at once. Timeouts are not
    retried (a slow query stays slow): `timeout` bounds the whole exchange, from connecting to the last byte of
    the answer (a server that streams results would otherwise keep a per-read timeout from ever firing), and
    an answer over `max_bytes` is abandoned rather than held in memory.

    Each failure ends in a named `StoreError`: `StoreTimeout`, `StoreUnavailable` (refused or reset
    connections, 429/5xx past the retries), `StoreBadResponse` (a body cut short, which is retried first, or
    one that is not readable SPARQL results), `QuerySyntaxError` (HTTP 400), or `StoreError` for other 4xx.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        user_agent: str = USER_AGENT,
        headers: Mapping[str, str] | None = None,
        get_limit: int = GET_LIMIT,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        if not url.lower().startswith(("http://", "https://")):
            raise StoreError(f"not an http(s) SPARQL endpoint URL: {url!r}")
        if timeout is None or timeout <= 0:
            raise StoreError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if retries < 0 or backoff < 0:
            raise StoreError("retries and backoff must not be negative")
        if max_bytes < 1:
            raise StoreError(f"max_bytes must be positive, got {max_bytes!r}")
        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_retry_wait = max_retry_wait
        self.get_limit = get_limit
        self.max_bytes = max_bytes
        self.user_agent = user_agent
        self._client: httpx.Client | None = httpx.Client(
            headers={"User-Agent": user_agent, **(headers or {})}, follow_redirects=True
        )

    # -- querying --------------------------------------------------------------------------------------------

    def query(self, sparql: str, *, timeout: float | None = None) -> QueryResult:
        prepared = prepare_query(sparql)
        client = self._open_client()
        limit = self.timeout if timeout is None else timeout
        if limit is None or limit <= 0:
            raise StoreError(f"timeout must be positive, got {limit!r}")
        graph = prepared.form in ("construct", "describe")
        accept = GRAPH_ACCEPT if graph else RESULTS_ACCEPT
        problem = "no attempt made"
        failure: type[StoreError] = StoreUnavailable
        for attempt in range(self.retries + 1):
            try:
                response = self._send(client, prepared.text, accept, limit)
            except httpx.TimeoutException:
                raise StoreTimeout(f"{self.url} did not answer within {limit:g} s") from None
            except httpx.RemoteProtocolError as exc:
                # The connection closed before the declared body was complete (or mid-headers).
                problem = f"{self.url} sent an incomplete answer: {exc or type(exc).__name__}"
                failure = StoreBadResponse
                wait = self.backoff * 2**attempt
            except httpx.TransportError as exc:
                problem = f"cannot reach {self.url}: {exc or type(exc).__name__}"
                failure = StoreUnavailable
                wait = self.backoff * 2**attempt
            else:
                status = response.status_code
                if status == 200:
                    return self._parse(response, graph)
                body = response.text
                if status == 400:
                    raise QuerySyntaxError(f"the endpoint rejected the query (HTTP 400): {_snippet(body)}")
                if status >= 500 and any(m in body for m in _SERVER_TIMEOUT_MARKERS):
                    raise StoreTimeout(f"{self.url} gave up on the query (its own timeout): {_snippet(body)}")
                if status != 429 and status < 500:
                    raise StoreError(f"{self.url} answered HTTP {status}: {_snippet(body)}")
                failure = StoreUnavailable
                problem = f"{self.url} answered HTTP {status}" + (
                    f": {_snippet(body)}" if body.strip() else ""
                )
                asked = retry_after_seconds(response.headers.get("Retry-After"))
                wait = max(self.backoff * 2**attempt, asked or 0.0)
            if attempt == self.retries:
                break
            if wait > self.max_retry_wait:
                raise failure(f"{problem}; it asks to retry in {wait:.0f} s, more than pgmr waits")
            time.sleep(wait)
        tries = self.retries + 1
        raise failure(f"{problem} (gave up after {tries} attempt{'s' if tries > 1 else ''})")

    def _send(self, client: httpx.Client, text: str, accept: str, timeout: float) -> httpx.Response:
        headers = {"Accept": accept}
        if len(quote(text, safe="")) <= self.get_limit:
            request = client.build_request(
                "GET", self.url, params={"query": text}, headers=headers, timeout=timeout
            )
        else:
            request = client.build_request(
                "POST", self.url, data={"query": text}, headers=headers, timeout=timeout
            )
        deadline = time.monotonic() + timeout
        response = client.send(request, stream=True)
        try:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise StoreBadResponse(
                        f"{self.url} sent an answer over {self.max_bytes:,} bytes; pgmr stopped reading it "
                        "(add a LIMIT, or raise max_bytes)"
                    )
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the answer was still arriving at the deadline", request=request)
                chunks.append(chunk)
        finally:
            response.close()
        # The body was decoded while read (iter_bytes), so the copy must not name its transfer encoding.
        kept = [(k, v) for k, v in response.headers.items() if k.lower() not in _TRANSFER_HEADERS]
        return httpx.Response(response.status_code, headers=kept, content=b"".join(chunks), request=request)

    def _parse(self, response: httpx.Response, graph: bool) -> QueryResult:
        media = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        try:
            if graph:
                return _parse_graph(response.content, media)
            if "json" in media or (not media and response.content.lstrip()[:1] == b"{"):
                return QueryResult.from_json(json.loads(response.content))
            return _parse_results_other(response.content, media)
        except StoreBadResponse as exc:
            raise StoreBadResponse(f"{self.url}: {exc}") from None
        except StoreError:
            raise
        except (ValueError, SyntaxError, KeyError, TypeError) as exc:
            raise StoreBadResponse(
                f"{self.url} sent an answer pgmr cannot read ({media or 'no type'}): {exc}"
            ) from None

    # -- lifecycle -------------------------------------------------------------------------------------------

    def _open_client(self) -> httpx.Client:
        if self._client is None:
            raise StoreError("the store is closed")
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> HttpSparqlStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HttpSparqlStore({self.url!r})"


def _parse_graph(content: bytes, media: str) -> QueryResult:
    import pyoxigraph as ox

    from pgmr.stores.base import term_from_oxigraph

    fmt = ox.RdfFormat.from_media_type(media) if media else ox.RdfFormat.N_TRIPLES
    if fmt is None:
        raise StoreBadResponse(f"cannot read an RDF graph sent as {media!r}")
    rows: list[dict[str, Any]] = []
    for quad in ox.parse(content, fmt):
        terms = (quad.subject, quad.predicate, quad.object)
        rows.append(dict(zip(GRAPH_VARIABLES, map(term_from_oxigraph, terms), strict=True)))
    return QueryResult("graph", GRAPH_VARIABLES, tuple(rows))


def _parse_results_other(content: bytes, media: str) -> QueryResult:
    """SPARQL XML / TSV results, read by pyoxigraph."""
    import pyoxigraph as ox

    from pgmr.stores.oxigraph_store import result_from_oxigraph

    fmt = ox.QueryResultsFormat.from_media_type(media) if media else None
    if fmt is None:
        raise StoreBadResponse(f"cannot read SPARQL results sent as {media or 'an unnamed type'!r}")
    return result_from_oxigraph(ox.parse_query_results(content, fmt))
