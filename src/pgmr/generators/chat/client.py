"""A minimal client for OpenAI-compatible chat servers (OpenAI, vLLM, Ollama, llama.cpp, ...) on httpx.

Only `POST /v1/chat/completions` and `GET /v1/models` are used. Every failure becomes a GeneratorError whose
message names the server, so a CLI can print it as it is.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from pgmr.generators.base import GeneratorError

# Statuses worth a retry: rate limits and a busy or restarting server. Anything else fails at once.
_RETRY_STATUSES = frozenset({429, 502, 503, 504})


def api_root(base_url: str) -> str:
    """`http://host:8080`, `http://host:8080/` and `http://host:8080/v1` -> `http://host:8080/v1`."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"server URL must start with http:// or https://, got {base_url!r}")
    return url if url.endswith("/v1") else f"{url}/v1"


class ServerHTTPError(GeneratorError):
    """The server answered with an HTTP error status (kept in `status`)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ServerModel:
    """One entry of `GET /v1/models`."""

    id: str
    owned_by: str = ""


class ChatClient:
    """Thread-safe (one httpx.Client shared by the generator's worker threads)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 1.0,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.root = api_root(base_url)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=httpx.Timeout(timeout), headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def models(self) -> list[ServerModel]:
        data = self._request("GET", "/models", None)
        items = data.get("data") if isinstance(data, Mapping) else None
        if not isinstance(items, list):
            raise GeneratorError(f"chat server {self.root}: /models answered without a 'data' list")
        return [
            ServerModel(str(m.get("id", "")), str(m.get("owned_by", "")))
            for m in items
            if isinstance(m, Mapping)
        ]

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        model: str,
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """The assistant text of the first choice."""
        body: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if stop:
            body["stop"] = list(stop)
        body.update(extra or {})
        data = self._request("POST", "/chat/completions", body)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise GeneratorError(
                f"chat server {self.root}: answer has no choices[0].message.content: {_snippet(data)}"
            ) from None
        # Some servers send null content for an empty answer.
        return "" if content is None else str(content)

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None) -> Any:
        url = self.root + path
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, url, json=body)
            except httpx.TimeoutException:
                raise GeneratorError(
                    f"chat server {self.root} did not answer {method} {path} within {self.timeout:g} s"
                ) from None
            except httpx.HTTPError as exc:
                raise GeneratorError(
                    f"chat server {self.root} cannot be reached ({type(exc).__name__}: {exc}); is it running?"
                ) from None
            if response.status_code in _RETRY_STATUSES and attempt < self.retries:
                time.sleep(self.backoff * 2**attempt)
                continue
            if response.status_code >= 400:
                raise ServerHTTPError(
                    f"chat server {self.root}: {method} {path} failed with HTTP {response.status_code}: "
                    f"{_snippet(response.text)}",
                    response.status_code,
                )
            try:
                return response.json()
            except ValueError:
                raise GeneratorError(
                    f"chat server {self.root}: {method} {path} answered with non-JSON: {_snippet(response.text)}"
                ) from None
        raise AssertionError("unreachable")  # the loop returns or raises


def _snippet(value: object, limit: int = 300) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
