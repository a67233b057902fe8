"""What every route of one app shares: the loaded models, their batchers, readiness, and the checks and model
calls the JSON routes and the standard protocols' routes both make.

The routes only decode their bodies and delegate here, so /detect and a v2 infer of the same texts pass the
same limits and give the same scores. Failures are raised as HTTPException or as the batcher's and the
runtime's exceptions; electra.serving.error_responses turns them into answers.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from litestar import Litestar
from litestar.exceptions import HTTPException

from electra.errors import InputError
from electra.serving import statistics, timing
from electra.serving.arrivals import arrived
from electra.serving.batcher import Arrivals, Batcher
from electra.serving.encoded import Encoded
from electra.serving.generator import GeneratorRunner
from electra.serving.metrics import ModelMetrics
from electra.serving.postprocess import classify_result, detect_result
from electra.serving.runtime import ModelRunner
from electra.serving.schemas import ClassifyResult, DetectResult
from electra.serving.settings import ServeSettings
from electra.serving.suggest import Target, attach, flagged, plan
from electra.serving.windows import (
    Document,
    TokenLogits,
    default_stride,
    first_window,
    max_stride,
    merge,
    split,
)

log = logging.getLogger("electra.serving")

# Requests with more characters than this are tokenized in a worker thread rather than on the event loop.
INLINE_TOKENIZE_CHARS = 4096
KIND_ROUTE = {"discriminator": "/detect", "classifier": "/classify", "tagger": "/tag"}


def load_runners(settings: ServeSettings) -> dict[str, ModelRunner]:
    """Every bundle of the settings, loaded (InputError naming the bundle on the first bad one)."""
    runners = {}
    for spec in settings.models:
        try:
            runners[spec.name] = ModelRunner(spec.name, spec.path, settings.device, settings.threads)
        except InputError as e:
            raise InputError(f"model {spec.name!r}: {e}") from None
    return runners


class ServerState:
    """Runners, their batchers, and readiness; shared by the route handlers of one app."""

    def __init__(
        self,
        settings: ServeSettings,
        runners: dict[str, ModelRunner],
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.runners = runners
        self.by_kind = {k: {n: r for n, r in runners.items() if r.kind == k} for k in KIND_ROUTE}
        # Each generator has a batcher and metrics of its own, under its name ("detector/generator").
        self.generators = {r.generator.name: r.generator for r in runners.values() if r.generator}
        self.metrics = {name: ModelMetrics.for_model(name) for name in [*runners, *self.generators]}
        self.statistics = statistics.Statistics(runners)
        self.batchers: dict[str, Batcher] = {}
        self.arrivals = Arrivals()
        self.ready = False
        self.failure: str | None = None
        self.on_ready = on_ready
        self._keys = [k.encode() for k in settings.api_keys]

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        for name, runner in [*self.runners.items(), *self.generators.items()]:
            batcher = Batcher(
                runner,
                self.metrics[name],
                s.max_batch_tokens,
                s.max_batch_size,
                s.max_wait_ms,
                s.max_queue,
                self.arrivals,
                s.inline_max_ms,
            )
            batcher.start()
            self.batchers[name] = batcher

    async def warm_up(self) -> None:
        try:
            for runner in self.runners.values():
                await asyncio.to_thread(runner.warm_up)
        except Exception as e:  # a model that cannot run keeps the pod unready, with the reason visible
            self.failure = f"warm-up failed: {e.__class__.__name__}: {e}"
            log.exception("warm-up failed")
            return
        self.ready = True
        if self.on_ready is not None:
            self.on_ready()
        log.info("ready: %s", ", ".join(f"{n} ({r.kind})" for n, r in self.runners.items()))

    async def stop(self) -> None:
        self.ready = False
        await asyncio.gather(*(b.close() for b in self.batchers.values()))

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        """The app's lifespan: batchers start, warm-up runs in the background; on shutdown they drain."""
        self.start()
        warm = asyncio.create_task(self.warm_up(), name="warm-up")
        try:
            yield
        finally:
            if not warm.done():
                warm.cancel()
            await self.stop()

    # --- model calls ------------------------------------------------------------------------------------

    async def score_tokens(
        self,
        runner: ModelRunner,
        texts: list[str],
        threshold: float,
        level: str,
        stride: int | None,
        suggest: int | None = None,
    ) -> list[DetectResult]:
        """Every token of every text scored through windows (`stride` None: the first window only); with
        `suggest`, each flagged one also gets the generator's `suggest` best replacements."""
        out = []
        scored = await self.token_logits(runner, texts, stride)
        for text, s in zip(texts, scored, strict=True):
            result = detect_result(text, s.encoded, s.logits, threshold, level)
            result.windows = s.windows
            out.append(result)
        if suggest is not None:
            targets = [flagged(r, s.encoded, level) for r, s in zip(out, scored, strict=True)]
            rows = await self.suggestions(runner, [s.doc for s in scored], targets, suggest, level == "word")
            generator = self._generator(runner)
            for text, s, result, found, row in zip(texts, scored, out, targets, rows, strict=True):
                attach(
                    text,
                    s.encoded,
                    result,
                    found,
                    row,
                    generator.tokens,
                    generator.prefix,
                    generator.lowercase,
                )
        return out

    async def suggestions(
        self,
        runner: ModelRunner,
        docs: list[Document],
        targets: list[list[Target]],
        top_k: int,
        whole_words: bool,
        candidates: tuple[int, ...] | None = None,
    ) -> list[list[np.ndarray]]:
        """Per document, each target's `top_k` tokens from the generator (TOP_TOKENS rows), through its
        batcher."""
        generator = self._generator(runner)
        mask_id = runner.mask_id
        plans = [
            plan(doc, found, mask_id, top_k, whole_words, candidates=candidates)
            for doc, found in zip(docs, targets, strict=True)
        ]
        inputs = [x for p in plans for x in p.inputs]
        if not inputs:
            return [[] for _ in docs]
        self.check_fits(len(inputs), "generator inputs", "fewer texts or a higher threshold (fewer flagged)")
        rows = iter(await self.submit(generator.name, inputs, sum(1 for t in targets if t)))
        out = []
        for p, found in zip(plans, targets, strict=True):
            answer: list[np.ndarray] = [np.empty(0)] * len(found)
            for answered, row in zip(p.answers, [next(rows) for _ in p.inputs], strict=True):
                for target, top in zip(answered, row, strict=True):
                    answer[target] = top
            out.append(answer)
        return out

    def _generator(self, runner: ModelRunner) -> GeneratorRunner:
        if runner.generator is None:
            raise HTTPException(
                status_code=400,
                detail=f"model {runner.name!r} has no generator, so it cannot suggest replacements; export "
                "it with `electra export --generator` (the generator it was pre-trained with)",
            )
        return runner.generator

    async def token_logits(
        self, runner: ModelRunner, texts: list[str], stride: int | None
    ) -> list[TokenLogits]:
        """Each text's per-token logits, from windows that overlap by `stride` tokens merged into one
        document (see electra.serving.windows), or with `stride` None from its first window only."""
        whole = await self.tokenize(runner, runner.encode_whole, texts)
        if stride is None:
            encoded = [first_window(enc, runner.max_seq_len) for enc in whole]
            self.check_fits(len(encoded), "model windows")
            rows = await self.run(runner, encoded, len(texts))
            return [TokenLogits(enc, row, 1) for enc, row in zip(encoded, rows, strict=True)]
        docs = [split(enc, runner.max_seq_len, stride) for enc in whole]
        self.check_fits(sum(len(doc.windows) for doc in docs), "model windows")
        rows = iter(await self.run(runner, [w for doc in docs for w in doc.windows], len(texts)))
        return [
            TokenLogits(doc.full, merge(doc, [next(rows) for _ in doc.windows]), len(doc.windows), doc)
            for doc in docs
        ]

    async def classify_pairs(
        self, runner: ModelRunner, pairs: list[tuple[str, str | None]], truncate: bool
    ) -> list[ClassifyResult]:
        encoded, rows = await self.classify_logits(runner, pairs, truncate)
        return [
            classify_result(row, runner.labels, runner.regression, runner.multi_label, enc.truncated)
            for enc, row in zip(encoded, rows, strict=True)
        ]

    async def classify_logits(
        self, runner: ModelRunner, pairs: list[tuple[str, str | None]], truncate: bool
    ) -> tuple[list[Encoded], list[np.ndarray]]:
        """Checked, tokenized (TooLong over the model with truncate off) and run: each input's logits."""
        self.check_sizes([a for a, _ in pairs], "inputs")
        self.check_chars([b for _, b in pairs if b is not None])
        self.check_fits(len(pairs), "model inputs")
        self.check_ready()
        encoded = await self.tokenize(runner, functools.partial(runner.encode, truncate=truncate), pairs)
        return encoded, await self.run(runner, encoded, len(encoded))

    async def tokenize(
        self, runner: ModelRunner, encode: Callable[[list[Any]], list[Encoded]], items: list[Any]
    ) -> list[Encoded]:
        """`encode(items)`, off the event loop when the texts are long (TooLong: see error_response)."""
        # From here on the request is the model's: it counts in its statistics as a success or a failure.
        statistics.entered(runner.name)
        start = time.perf_counter()
        chars = sum(len(x) if isinstance(x, str) else len(x[0]) + len(x[1] or "") for x in items)
        if chars <= INLINE_TOKENIZE_CHARS:
            encoded = encode(items)
        else:
            encoded = await asyncio.to_thread(encode, items)
        elapsed = time.perf_counter() - start
        self.metrics[runner.name].tokenization.observe(elapsed)
        timing.add("tokenize", elapsed)
        return encoded

    async def run(self, runner: ModelRunner, encoded: list[Encoded], inputs: int) -> list[Any]:
        """Rows from the model's batcher (QueueFull, ShuttingDown or InferenceFailed: see error_response);
        `inputs` is how many texts the rows answer (a long text's windows are one input)."""
        return await self.submit(runner.name, encoded, inputs)

    async def submit(self, name: str, encoded: list[Encoded], inputs: int) -> list[Any]:
        """Rows from the batcher of the model or generator called `name` (see run)."""
        arrived()
        rows = await self.batchers[name].submit(encoded)
        self.metrics[name].inputs.inc(inputs)
        statistics.answered()
        return rows

    # --- request checks ------------------------------------------------------------------------------

    def authorize(self, header: str | None) -> bool:
        if not self._keys:
            return True
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        given = token.strip().encode()
        # Compare against every key, so the time taken says nothing about which key (or prefix) matched.
        return any([hmac.compare_digest(given, key) for key in self._keys])

    def pick(self, name: str | None, kind: str) -> ModelRunner:
        candidates = self.by_kind[kind]
        route = KIND_ROUTE[kind]
        if name is not None:
            runner = self.runners.get(name)
            if runner is None:
                raise HTTPException(
                    status_code=404,
                    detail=f"model {name!r} is not loaded; loaded for {route}: {_names(candidates)}",
                )
            if runner.kind != kind:
                raise HTTPException(
                    status_code=400,
                    detail=f"model {name!r} is a {runner.kind}; send it to {KIND_ROUTE[runner.kind]}",
                )
            return runner
        if not candidates:
            raise HTTPException(
                status_code=404, detail=f"no {kind} model is loaded, so {route} has nothing to run"
            )
        if len(candidates) > 1:
            raise HTTPException(
                status_code=400,
                detail=f"several models serve {route}; name one in 'model': {_names(candidates)}",
            )
        return next(iter(candidates.values()))

    def check_ready(self) -> None:
        if not self.ready:
            detail = self.failure or "models are still loading; retry shortly (see /health/ready)"
            raise HTTPException(status_code=503, detail=detail, headers={"Retry-After": "1"})

    def check_sizes(self, texts: Sequence[str], field: str) -> None:
        if not texts:
            raise HTTPException(status_code=400, detail=f"'{field}' is empty; send at least one input")
        if len(texts) > self.settings.max_texts:
            raise HTTPException(
                status_code=413,
                detail=f"{len(texts)} inputs in one request; the limit is {self.settings.max_texts}",
            )
        self.check_chars(texts)

    def check_chars(self, texts: Sequence[str]) -> None:
        s = self.settings
        for i, text in enumerate(texts):
            if len(text) > s.max_chars:
                raise HTTPException(
                    status_code=413,
                    detail=f"input {i} has {len(text):,} characters; the limit is {s.max_chars:,} per text",
                )

    def check_stride(self, runner: ModelRunner, stride: int | None, truncate: bool) -> int | None:
        """The overlap of `runner`'s windows for this request; None when truncate asks for one window."""
        if truncate:
            if stride is not None:
                raise HTTPException(
                    status_code=400,
                    detail="'stride' is the overlap of windows over a long text; truncate=true scores only "
                    "the first window, so send one or the other",
                )
            return None
        if stride is None:
            return default_stride(runner.max_seq_len)
        limit = max_stride(runner.max_seq_len)
        if stride > limit:
            raise HTTPException(
                status_code=400,
                detail=f"'stride' is {stride}; model {runner.name!r} takes windows of {runner.max_seq_len} "
                f"tokens, so the overlap can be at most {limit}",
            )
        return stride

    def check_suggest(self, runner: ModelRunner, top_k: int | None, name: str = "suggest") -> None:
        """A request's number of suggestions per token, against the model and --max-suggest."""
        if top_k is None:
            return
        self._generator(runner)
        limit = self.settings.max_suggest
        if top_k > limit:
            raise HTTPException(
                status_code=413,
                detail=f"'{name}' is {top_k}; the server answers at most {limit} suggestions per token "
                "(--max-suggest)",
            )

    def check_fits(self, inputs: int, what: str, send: str = "fewer or shorter texts") -> None:
        # The queue takes a request's inputs all at once or not at all: more than it holds could never
        # run, and a 503 would send the client into retrying forever.
        limit = self.settings.max_queue
        if inputs > limit:
            raise HTTPException(
                status_code=413,
                detail=f"the request needs {inputs:,} {what}; at most {limit:,} fit in the model's queue "
                f"(--max-queue): send {send} per request",
            )


def _names(runners: dict[str, ModelRunner]) -> str:
    return ", ".join(sorted(runners)) or "none"
