"""`GET /text2sparql?dataset=...&question=...`: the interface of the TEXT2SPARQL challenge (text2sparql.aksw.org).

Each dataset (the challenge names one by IRI, e.g. `https://text2sparql.aksw.org/2025/corporate/`) is mapped to
a pipeline of its own: a memory of that graph and a generator (`pgmr serve --dataset NAME=MEMORY[,MODEL]`). The
answer is `{"dataset", "question", "query"}` with the final SPARQL, which the challenge runs itself. A dataset
the service does not hold is 404, naming those it does; a question the pipeline refuses is 422 with the
refusal's reason (code `refused`), and so is model output that yields no query (code `invalid`): a client is
told why there is no query instead of getting a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse

from pgmr.pipeline import Pipeline
from pgmr.service.limits import Limiter
from pgmr.service.schemas import MAX_QUESTION_CHARS, ErrorResponse, Text2SparqlResponse

MAX_DATASET_CHARS = 2000
RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "unknown dataset: the service holds no graph by that name"},
    422: {
        "model": ErrorResponse,
        "description": "no query: the question was refused (no support in the dataset's memory; the reason "
        "names the placeholder), the model's output gave no query, or the request is invalid",
    },
}


def error_json(status: int, code: str, message: str) -> JSONResponse:
    """The service's error body (as pgmr.service.app writes it)."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def add_text2sparql(
    app: FastAPI, limiter: Limiter, datasets: Mapping[str, Pipeline], responses: Mapping[int | str, Any]
) -> None:
    """Register the endpoint on `app`; `datasets` maps each dataset name to its pipeline (the caller's)."""
    names = ", ".join(sorted(datasets)) or "none (start `pgmr serve` with --dataset NAME=MEMORY)"

    @app.get(
        "/text2sparql",
        response_model=Text2SparqlResponse,
        summary="TEXT2SPARQL: a question to a SPARQL query over a dataset",
        responses={**responses, **RESPONSES},
    )
    async def text2sparql(
        dataset: str = Query(
            ..., min_length=1, max_length=MAX_DATASET_CHARS, description="The dataset's name"
        ),
        question: str = Query(
            ..., min_length=1, max_length=MAX_QUESTION_CHARS, examples=["Who is Ms. Brant?"]
        ),
    ) -> Any:
        pipeline = datasets.get(dataset)
        if pipeline is None:
            return error_json(
                404, "unknown_dataset", f"no dataset {dataset!r} here; this service answers for: {names}"
            )
        asked = " ".join(question.split())
        if not asked:
            return error_json(422, "invalid_request", "question: must not be blank")
        result = await limiter.run(pipeline.ask, asked)
        if result.status == "refused":
            return error_json(422, "refused", result.reason or "refused")
        if not result.sparql:
            code = result.error.code if result.error is not None else "invalid"
            return error_json(422, code, result.reason or "the model's output gave no query")
        return {"dataset": dataset, "question": question, "query": result.sparql}


__all__ = ["MAX_DATASET_CHARS", "RESPONSES", "add_text2sparql"]
