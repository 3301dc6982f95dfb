"""The FastAPI app: `create_app(policy, scorer=None, limits=ServerLimits())`.

- OpenAI-compatible `GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions` (serving/openai_api.py;
  sampling continuously batched and streamed token by token through serving/stream_engine.py, search requests
  batched through serving/batcher.py, errors in OpenAI's shape)

- `POST /generate` {prompt, max_new_tokens, temperature} -> {text, tokens}
- `POST /solve` {question, method: a registered search method (`lmgym.search.methods`: greedy, maj,
  weighted_maj, best_of_n, beam, mcts, ...), budget (the method's budget field: samples, beams or simulations;
  greedy ignores it)}
  -> {answer, solution, tokens, method}:
  the question becomes a one-problem stepwise `QuestionsEnv` and `run_search` answers it.
- `GET /health` -> {status, model, prm, methods}; model is a hub id as given, a local folder by its base name
  only (no response shows a path of the server's disk)

/generate and /solve compute one request at a time (one lock around the model, which the /v1 engine takes for
each decoding step and the /v1 queue for each batch). Bad requests get a 4xx whose body is
{"detail": "<one line>"}: 422 for a field of the wrong type or range (a non-finite number, or over a
limit), 413 for a body over `max_body_bytes` (refused before it is parsed) or a prompt or question longer
than `max_prompt_chars`, 400 for a method that needs a PRM the server lacks and for text no tokenizer can
encode (a body that is not UTF-8, a lone surrogate in any string: 400 on every route, /v1 included, as the
request's content rather than a field's type is wrong); 503 when the model stays busy past the request's
timeout, 504 when its compute runs past it (its sampling rows end at the next decoding step, not later).
"""
from __future__ import annotations

import threading
from pathlib import Path, PureWindowsPath

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # fastapi comes with the [serve] extra: one line naming it if missing
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException

from lmgym.envs.arithmetic import ARITHMETIC_INSTRUCTION
from lmgym.envs.questions import QuestionsEnv
from lmgym.search import SearchSettings, run_search
from lmgym.search.methods import search_methods
from lmgym.search.search_types import StepScorer
from lmgym.serving.batcher import BatchSettings
from lmgym.serving.body_limit import BodyLimit
from lmgym.serving.limits import ComputeTimeout, Deadline, ServerLimits, TimedPolicy, TimedScorer
from lmgym.serving.openai_api import OpenAIError, add_openai_routes
from lmgym.serving.openai_api import validation_error as openai_validation_error
from lmgym.serving.openai_engine import settings_for
from lmgym.serving.requests import DEFAULT_BUDGET, GenerateRequest, GenerateResponse, SolveRequest, SolveResponse
from lmgym.serving.text_check import not_utf8, unencodable_error


def create_app(policy, scorer: StepScorer | None = None, limits: ServerLimits | None = None,
               search: SearchSettings | None = None, instruction: str = ARITHMETIC_INSTRUCTION,
               max_steps: int = 8, batching: BatchSettings | None = None) -> FastAPI:
    """The app serving `policy` (and `scorer`, a PRM, for best_of_n, beam and mcts).

    search: what /solve samples with besides the method and budget (temperature, tokens per step,
    beam_expand, aggregation, the MCTSConfig; default SearchSettings()). instruction, max_steps: the QuestionsEnv's.
    batching: how the OpenAI routes' queue collects requests (serving/openai_api.py; default BatchSettings())."""
    limits = limits if limits is not None else ServerLimits()
    search = search if search is not None else SearchSettings()
    if not isinstance(limits, ServerLimits) or not isinstance(search, SearchSettings):
        raise TypeError("create_app: limits must be a ServerLimits and search a SearchSettings")
    if scorer is not None and not isinstance(scorer, StepScorer):
        raise TypeError(f"create_app: scorer must have score_branches(branches), got {type(scorer).__name__}")
    QuestionsEnv(["?"], instruction=instruction, max_steps=max_steps)  # bad arguments fail now, not per request
    for method in search_methods():
        settings_for(search, method, 1)
    app, lock = FastAPI(title="rlgym search server"), threading.Lock()
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    model = model_name(getattr(policy, "name_or_path", None), type(policy).__name__)
    app.state.batcher = add_openai_routes(app, policy, scorer, limits, search, batching, lock, model, instruction,
                                          max_steps)

    @app.exception_handler(RequestValidationError)
    async def one_line_validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        if request.url.path.startswith("/v1/"):
            return openai_validation_error(error)
        text = unencodable_error(error)
        if text is not None:
            return JSONResponse(status_code=400, content={"detail": text["message"]})
        return JSONResponse(status_code=422, content={"detail": validation_message(error)})

    @app.exception_handler(StarletteHTTPException)
    async def one_line_http_error(request: Request, error: StarletteHTTPException) -> Response:
        """A body that is not UTF-8 or nests too deep (fastapi's 400 "error parsing the body") named as such; /v1
        in OpenAI's shape."""
        if isinstance(error.__cause__, UnicodeDecodeError):
            error = HTTPException(400, not_utf8(error.__cause__))
        elif isinstance(error.__cause__, RecursionError):
            error = HTTPException(400, "the body nests arrays or objects deeper than this server parses")
        if request.url.path.startswith("/v1/"):
            return OpenAIError(error.status_code, str(error.detail), None, None).response()
        return await http_exception_handler(request, error)

    def computing(work):
        """Run `work(deadline)` holding the model lock, within the request's timeout."""
        deadline = Deadline(limits.timeout_seconds)
        if not lock.acquire(timeout=deadline.left()):
            raise HTTPException(503, f"the model stayed busy for the whole timeout of {limits.timeout_seconds:g} s; "
                                     f"try again")
        try:
            result = work(deadline)
            deadline.check()  # its last sampling call may have been cut short when the deadline passed
            return result
        except ComputeTimeout as error:
            raise HTTPException(504, str(error)) from None
        finally:
            lock.release()

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "model": model,
                "prm": scorer is not None,
                "methods": [name for name, method in search_methods().items()
                            if scorer is not None or not method.needs_scorer]}

    @app.post("/generate", response_model=GenerateResponse)
    def generate(body: GenerateRequest) -> GenerateResponse:
        check_length("prompt", body.prompt, limits)
        if body.max_new_tokens > limits.max_new_tokens:
            raise HTTPException(422, f"max_new_tokens {body.max_new_tokens} is over this server's limit of "
                                     f"{limits.max_new_tokens} (max_new_tokens)")

        def work(deadline: Deadline) -> GenerateResponse:
            timed = TimedPolicy(policy, deadline)
            [[generation]] = timed.sample([policy.format_prompt(body.prompt)], 1, body.max_new_tokens,
                                           body.temperature)
            return GenerateResponse(text=generation.text, tokens=len(generation.completion_ids))

        return computing(work)

    @app.post("/solve", response_model=SolveResponse)
    def solve(body: SolveRequest) -> SolveResponse:
        check_length("question", body.question, limits)
        budget = body.budget if body.budget is not None else min(DEFAULT_BUDGET, limits.max_budget)
        if budget > limits.max_budget:
            raise HTTPException(422, f"budget {budget} is over this server's limit of {limits.max_budget} "
                                     f"(max_budget)")
        if search_methods()[body.method].needs_scorer and scorer is None:
            raise HTTPException(400, f"method {body.method} needs a PRM, and this server has none "
                                     f"(start it with --prm); use greedy or maj")
        settings = settings_for(search, body.method, budget)
        env = QuestionsEnv([body.question], instruction=instruction, max_steps=max_steps)

        def work(deadline: Deadline) -> SolveResponse:
            timed_scorer = TimedScorer(scorer, deadline) if scorer is not None else None
            (result,) = run_search(TimedPolicy(policy, deadline), env, [{"options": {"index": 0}}], settings,
                                   timed_scorer)
            solution = result.trajectory.text if result.trajectory is not None else ""
            return SolveResponse(answer=result.answer, solution=solution, tokens=result.tokens, method=body.method)

        return computing(work)

    return app


def model_name(name_or_path: str | None, fallback: str) -> str:
    """What /health calls the model: a hub id (or the embedded alias) as given; a local folder (one that
    exists, or an absolute, ~ or ./ path) by its base name only; `fallback` when there is no name."""
    text = str(name_or_path or "").strip()
    if not text:
        return fallback
    if "\\" in text:  # a Windows path
        return PureWindowsPath(text).name or fallback
    path = Path(text).expanduser()
    if path.is_absolute() or text.startswith((".", "~")) or path.exists():
        return path.resolve().name or fallback
    return text


def check_length(name: str, text: str, limits: ServerLimits) -> None:
    """413 when `text` is longer than the server takes."""
    if len(text) > limits.max_prompt_chars:
        raise HTTPException(413, f"{name} is {len(text)} characters; this server takes at most "
                                 f"{limits.max_prompt_chars} (max_prompt_chars)")


def validation_message(error: RequestValidationError) -> str:
    """Pydantic's complaints as one line: "field: message" for each, joined by "; "."""
    parts = []
    for item in error.errors():
        if item.get("type") == "json_invalid":
            parts.append(f"the body is not valid JSON: {item.get('ctx', {}).get('error', 'decode error')} "
                         f"(at character {item['loc'][-1]})")
            continue
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body") or "body"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return " ".join("; ".join(parts).split())
