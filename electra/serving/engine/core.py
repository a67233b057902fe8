"""The inference core: a typed request in (electra.serving.engine.requests), checked once, run through the
model's queue, a result out. Every route only translates its protocol to one of these requests and the result
back (text-embeddings-inference's `Infer`, under its routers), so /detect, a v2 infer and /hf of the same
texts pass the same checks in the same order and give the same scores.

What runs the model is a `Backend`: the server's (electra.serving.engine.backend: batchers, metrics,
readiness), or the local one (electra.serving.engine.local), which calls the runners directly, for a program
that scores texts without a server (the demo, the benchmarks, the experiments).

Refusals are the typed errors of electra.serving.engine.errors, which know no HTTP: the HTTP layer maps them
to statuses (electra.serving.http.error_responses), and a local caller reads the same message. What the
engine measured of a request goes into its RequestMetadata (electra.serving.engine.metadata).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from electra.serving.engine.embedding import embed_input, normalized, not_embeddable
from electra.serving.engine.encoded import Encoded
from electra.serving.engine.errors import EmptyInput, InvalidRequest, ModelNotFound, TooLarge
from electra.serving.engine.generator import GeneratorRunner
from electra.serving.engine.kinds import CLASSIFIER, DETECTOR, EMBEDDER, KINDS, TAGGER
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.postprocess import classify_result, detect_result, sigmoid
from electra.serving.engine.requests import (
    Classified,
    Classify,
    Detect,
    Embed,
    Embedded,
    Filled,
    FillMask,
    Rerank,
    Tag,
)
from electra.serving.engine.results import DEFAULT_THRESHOLD, DetectResult
from electra.serving.engine.runtime import ModelRunner
from electra.serving.engine.suggest import Target, attach, flagged, mask_targets, plan
from electra.serving.engine.truncation import Measured
from electra.serving.engine.windows import (
    Document,
    TokenLogits,
    default_stride,
    first_window,
    max_stride,
    merge,
    split,
)
from electra.serving.settings import ServeSettings

# fill-mask's answer carries the whole text as each proposal's `sequence`, so it grows as masks x top_k x text
# length: a 20 kB text of [MASK]s at top_k 20 would answer gigabytes. The pipeline's shape cannot be changed,
# so the product is bounded (16M characters: a 50,000-character text, the default --max-chars, with 16 masks
# at top_k 20) and a request over it gets a 413 before the generator runs.
MAX_SEQUENCE_CHARS = 16_000_000
# /detect's `suggest`: every flagged token (or word) of every text gets that many suggestions, so the answer,
# and the generator's work before it, grow as flagged tokens x suggest; at a threshold of 0 every token is
# flagged (350 kB of commas at suggest 20: about 7 million). Over this many suggestions in one answer a
# request gets a 413 before the generator runs.
MAX_SUGGESTIONS = 200_000
# fill-mask's `targets`: each word is tokenized on the event loop (a few microseconds each), so their number
# is bounded, far above what a request that narrows the ranking needs.
MAX_TARGETS = 10_000
# Requests with more characters than this are tokenized in a worker thread rather than on the event loop.
INLINE_TOKENIZE_CHARS = 4096


class Backend(Protocol):
    """What runs the model calls of the core's requests."""

    def check_ready(self) -> None: ...

    def tokenized(self, name: str, seconds: float) -> None: ...

    async def submit(
        self, name: str, encoded: list[Encoded], inputs: int, meta: RequestMetadata
    ) -> list[Any]: ...


# --- the core ----------------------------------------------------------------------------------------------


class Inference:
    """The loaded models, the limits of the settings and a backend: every request's checks and model calls."""

    def __init__(self, runners: dict[str, ModelRunner], settings: ServeSettings, backend: Backend) -> None:
        self.runners = runners
        self.settings = settings
        self.backend = backend
        # Per registered kind (electra.serving.engine.kinds), the loaded models that serve it.
        self.by_kind = {
            kind.name: {n: r for n, r in runners.items() if r.kind in kind.bundles} for kind in KINDS.values()
        }

    # --- which model ----------------------------------------------------------------------------------

    def pick(self, name: str | None, kind: str) -> ModelRunner:
        """The model of `kind` a request names, or the only one loaded (the JSON routes)."""
        candidates = self.by_kind[kind]
        route = KINDS[kind].route
        if name is not None:
            runner = self.runners.get(name)
            if runner is None:
                raise ModelNotFound(
                    f"model {name!r} is not loaded; loaded for {route}: {_names(candidates)}",
                )
            if runner.kind not in KINDS[kind].bundles:
                raise InvalidRequest(
                    f"model {name!r} is a {runner.kind}; send it to {KINDS[runner.kind].route}",
                )
            return runner
        if not candidates:
            raise ModelNotFound(f"no {kind} model is loaded, so {route} has nothing to run")
        if len(candidates) > 1:
            raise InvalidRequest(
                f"several models serve {route}; name one in 'model': {_names(candidates)}",
            )
        return next(iter(candidates.values()))

    def named(self, name: str, version: str | None = None, only: str | None = None) -> ModelRunner:
        """The model a path names, of any kind (the v2 and /hf routes); `only`: the one version it has."""
        runner = self.runners.get(name)
        if runner is None:
            raise ModelNotFound(
                f"model {name!r} is not loaded; loaded: {', '.join(sorted(self.runners))}",
            )
        if version not in (None, only):
            raise ModelNotFound(f"model {name!r} has version {only} only, not {version!r}")
        return runner

    # --- the requests ------------------------------------------------------------------------------

    async def detect(
        self,
        request: Detect,
        runner: ModelRunner | None = None,
        model: str | None = None,
        meta: RequestMetadata | None = None,
    ) -> tuple[ModelRunner, list[DetectResult]]:
        """Checked in one order for every protocol: the texts, the model (`runner`, or picked by `model`),
        the windows, the suggestions, readiness; then scored. `meta` (every request method takes one)
        learns what the request's work took."""
        meta = meta or RequestMetadata()
        self.check_sizes(request.texts, request.field)
        runner = runner or self.pick(model, DETECTOR)
        stride = self.check_stride(runner, request.stride, request.truncate)
        self.check_suggest(runner, request.suggest)
        self.backend.check_ready()
        results = await self._score_tokens(
            runner, request.texts, request.threshold, request.level, stride, request.suggest, meta
        )
        return runner, results

    async def tag(
        self,
        request: Tag,
        runner: ModelRunner | None = None,
        model: str | None = None,
        meta: RequestMetadata | None = None,
    ) -> tuple[ModelRunner, list[TokenLogits]]:
        """Each text's per-token logits through windows, checked as detect's."""
        meta = meta or RequestMetadata()
        self.check_sizes(request.texts, request.field)
        runner = runner or self.pick(model, TAGGER)
        stride = self.check_stride(runner, request.stride, request.truncate)
        self.backend.check_ready()
        return runner, await self.token_logits(runner, request.texts, stride, meta)

    async def classify(
        self,
        request: Classify,
        runner: ModelRunner | None = None,
        model: str | None = None,
        meta: RequestMetadata | None = None,
    ) -> tuple[ModelRunner, Classified]:
        """Checked (the inputs, the model, readiness), tokenized (TooLong over the model with truncate off)
        and run: each input's logits and result."""
        meta = meta or RequestMetadata()
        runner = runner or self.pick(model, CLASSIFIER)
        pairs = request.pairs
        self.check_sizes([a for a, _ in pairs], request.field)
        self.check_chars([b for _, b in pairs if b is not None])
        if not request.allow_empty:
            self.check_not_empty(request)
        self.check_fits(len(pairs), "model inputs")
        self.backend.check_ready()
        encode = functools.partial(self._encode, runner, request)
        encoded = await self.tokenize(runner, encode, pairs, meta)
        rows = await self.backend.submit(runner.name, encoded, len(encoded), meta)
        results = [
            classify_result(
                row,
                runner.labels,
                runner.regression,
                runner.multi_label,
                enc.truncated,
                request.raw_scores,
                runner.thresholds,
            )
            for enc, row in zip(encoded, rows, strict=True)
        ]
        return runner, Classified(encoded, rows, results)

    async def rerank(
        self,
        request: Rerank,
        runner: ModelRunner | None = None,
        model: str | None = None,
        meta: RequestMetadata | None = None,
    ) -> tuple[ModelRunner, list[tuple[int, float]]]:
        """Checked (the texts and the query, the model: one output, readiness), run as (query, text) pairs:
        (index, score) per text, unrounded, the highest score first, in `ranked`'s order."""
        self.check_sizes(request.texts, request.field)
        self.check_chars([request.query])
        runner = runner or self.pick(model, CLASSIFIER)
        if len(runner.labels) != 1:
            raise InvalidRequest(
                f"model {runner.name!r} scores {len(runner.labels)} labels; reranking needs a "
                "cross-encoder, one relevance score per pair (a classifier fine-tuned with --task rerank)",
            )
        pairs: list[tuple[str, str | None]] = [(request.query, text) for text in request.texts]
        classify = Classify(
            pairs,
            request.truncate,
            request.field,
            request.direction,
            raw_scores=True,
            query=True,
            allow_empty=request.allow_empty,
        )
        _, classified = await self.classify(classify, runner, meta=meta)
        logits = np.array([float(row[0]) for row in classified.logits])
        scores = (logits if request.raw_scores else sigmoid(logits)).tolist()
        return runner, [(i, scores[i]) for i in ranked(scores)]

    async def embed(
        self,
        request: Embed,
        runner: ModelRunner | None = None,
        model: str | None = None,
        meta: RequestMetadata | None = None,
    ) -> tuple[ModelRunner, Embedded]:
        """Checked (the texts, the model: one that answers its hidden state, readiness), tokenized (TooLong
        over the model with truncate off) and run through the model's own queue: each text's pooled vector
        (electra.serving.engine.embedding), of unit length with `normalize`."""
        meta = meta or RequestMetadata()
        self.check_sizes(request.texts, request.field)
        runner = runner or self.pick(model, EMBEDDER)
        embedding = runner.bundle.embedding
        if embedding is None:
            raise InvalidRequest(not_embeddable(runner.name))
        if request.dimensions not in (None, embedding.dimensions):
            raise InvalidRequest(
                f"'dimensions' is {request.dimensions}; model {runner.name!r} answers vectors of "
                f"{embedding.dimensions} only (it is not a Matryoshka model): send null or "
                f"{embedding.dimensions}"
            )
        if not request.allow_empty:
            for i, text in enumerate(request.texts):
                if not text:
                    raise EmptyInput(f"{request.field}[{i}] is empty: it has no text to embed")
        self.check_fits(len(request.texts), "model inputs")
        self.backend.check_ready()
        pooling = embedding.pooling
        texts = [(t, None) for t in request.texts]
        classify = Classify(texts, request.truncate, request.field, request.direction)
        encode = functools.partial(self._encode, runner, classify)
        encoded = await self.tokenize(runner, encode, request.texts, meta)
        inputs = [embed_input(enc, pooling) for enc in encoded]
        vectors = await self.backend.submit(runner.name, inputs, len(inputs), meta)
        if request.normalize:
            vectors = normalized(vectors)
        return runner, Embedded(vectors, [enc.truncated for enc in encoded])

    async def fill_mask(
        self, request: FillMask, runner: ModelRunner, meta: RequestMetadata | None = None
    ) -> Filled:
        """Checked (the texts, the suggestions, the targets, readiness, the answer's size); masks found or
        the detector's flags scored; the generator's proposals for each."""
        meta = meta or RequestMetadata()
        texts = request.texts
        self.check_sizes(texts, request.field)
        self.check_suggest(runner, request.top_k, "top_k")
        candidates = _target_ids(runner, request.targets)
        self.backend.check_ready()
        mask_token = self.generator(runner).token(runner.mask_id)
        masked = [mask_token in t for t in texts]
        stride = default_stride(runner.max_seq_len)
        docs: dict[int, Document] = {}
        targets: dict[int, list[Target]] = {}
        with_masks = [i for i, m in enumerate(masked) if m]
        plain = [i for i, m in enumerate(masked) if not m]
        if with_masks:
            whole = await self.tokenize(runner, runner.encode_whole, [texts[i] for i in with_masks], meta)
            for i, enc in zip(with_masks, whole, strict=True):
                docs[i] = split(enc, runner.max_seq_len, stride)
                targets[i] = mask_targets(enc, runner.mask_id)
        if plain:
            scored = await self.token_logits(runner, [texts[i] for i in plain], stride, meta)
            for i, s in zip(plain, scored, strict=True):
                docs[i] = s.doc
                result = detect_result(texts[i], s.encoded, s.logits, DEFAULT_THRESHOLD, "token")
                targets[i] = flagged(result, s.encoded, "token")
        order = range(len(texts))
        top_k = request.top_k if candidates is None else min(request.top_k, len(candidates))
        answer = sum(len(targets[i]) * len(texts[i]) for i in order) * top_k
        if answer > MAX_SEQUENCE_CHARS:
            raise TooLarge(
                f"the answer would repeat the text in {answer:,} characters of 'sequence' (masks x "
                f"top_k x text length); at most {MAX_SEQUENCE_CHARS:,}: send fewer [MASK]s, a lower top_k or "
                "shorter texts",
            )
        all_docs, all_targets = [docs[i] for i in order], [targets[i] for i in order]
        rows = await self.suggestions(runner, all_docs, all_targets, top_k, False, meta, candidates)
        return Filled(all_docs, all_targets, masked, rows)

    # --- the model calls the requests are made of --------------------------------------------------

    async def _score_tokens(
        self,
        runner: ModelRunner,
        texts: list[str],
        threshold: float,
        level: str,
        stride: int | None,
        suggest: int | None,
        meta: RequestMetadata,
    ) -> list[DetectResult]:
        out = []
        scored = await self.token_logits(runner, texts, stride, meta)
        for text, s in zip(texts, scored, strict=True):
            result = detect_result(text, s.encoded, s.logits, threshold, level)
            result.windows = s.windows
            out.append(result)
        if suggest is not None:
            targets = [flagged(r, s.encoded, level) for r, s in zip(out, scored, strict=True)]
            wanted = sum(len(found) for found in targets) * suggest
            if wanted > MAX_SUGGESTIONS:
                raise TooLarge(
                    f"the answer would hold {wanted:,} suggestions (flagged tokens x 'suggest'); at most "
                    f"{MAX_SUGGESTIONS:,}: send a higher threshold, a lower 'suggest' or shorter texts"
                )
            docs = [s.doc for s in scored]
            rows = await self.suggestions(runner, docs, targets, suggest, level == "word", meta)
            generator = self.generator(runner)
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
        meta: RequestMetadata,
        candidates: tuple[int, ...] | None = None,
    ) -> list[list[np.ndarray]]:
        """Per document, each target's `top_k` tokens from the generator (TOP_TOKENS rows), through its
        queue."""
        generator = self.generator(runner)
        plans = [
            plan(doc, found, runner.mask_id, top_k, whole_words, candidates=candidates)
            for doc, found in zip(docs, targets, strict=True)
        ]
        inputs = [x for p in plans for x in p.inputs]
        if not inputs:
            return [[] for _ in docs]
        self.check_fits(len(inputs), "generator inputs", "fewer texts or a higher threshold (fewer flagged)")
        rows = iter(await self.backend.submit(generator.name, inputs, sum(1 for t in targets if t), meta))
        out = []
        for p, found in zip(plans, targets, strict=True):
            answer: list[np.ndarray] = [np.empty(0)] * len(found)
            for answered, row in zip(p.answers, [next(rows) for _ in p.inputs], strict=True):
                for target, top in zip(answered, row, strict=True):
                    answer[target] = top
            out.append(answer)
        return out

    def generator(self, runner: ModelRunner) -> GeneratorRunner:
        if runner.generator is None:
            raise InvalidRequest(
                f"model {runner.name!r} has no generator, so it cannot suggest replacements; export "
                "it with `electra export --generator` (the generator it was pre-trained with)",
            )
        return runner.generator

    async def token_logits(
        self, runner: ModelRunner, texts: list[str], stride: int | None, meta: RequestMetadata
    ) -> list[TokenLogits]:
        """Each text's per-token logits, from windows that overlap by `stride` tokens merged into one
        document (see electra.serving.engine.windows), or with `stride` None from its first window only."""
        whole = await self.tokenize(runner, runner.encode_whole, texts, meta)
        if stride is None:
            encoded = [first_window(enc, runner.max_seq_len) for enc in whole]
            self.check_fits(len(encoded), "model windows")
            rows = await self.backend.submit(runner.name, encoded, len(texts), meta)
            return [TokenLogits(enc, row, 1) for enc, row in zip(encoded, rows, strict=True)]
        docs = [split(enc, runner.max_seq_len, stride) for enc in whole]
        self.check_fits(sum(len(doc.windows) for doc in docs), "model windows")
        windows = [w for doc in docs for w in doc.windows]
        rows = iter(await self.backend.submit(runner.name, windows, len(texts), meta))
        return [
            TokenLogits(doc.full, merge(doc, [next(rows) for _ in doc.windows]), len(doc.windows), doc)
            for doc in docs
        ]

    async def tokenize(
        self,
        runner: ModelRunner,
        encode: Callable[[list[Any]], list[Encoded]],
        items: list[Any],
        meta: RequestMetadata,
    ) -> list[Encoded]:
        """`encode(items)`, off the event loop when the texts are long (TooLong: see error_response)."""
        # From here on the request is the model's: it counts in its statistics as a success or a failure.
        meta.entered(runner.name)
        start = time.perf_counter()
        chars = sum(len(x) if isinstance(x, str) else len(x[0]) + len(x[1] or "") for x in items)
        if chars <= INLINE_TOKENIZE_CHARS:
            encoded = encode(items)
        else:
            encoded = await asyncio.to_thread(encode, items)
        elapsed = time.perf_counter() - start
        self.backend.tokenized(runner.name, elapsed)
        meta.add("tokenize", elapsed)
        return encoded

    def _encode(
        self, runner: ModelRunner, request: Classify, pairs: list[tuple[str, str | None]]
    ) -> list[Encoded]:
        """The pairs measured whole, refused (TooLong) when one is over the model with truncate off, cut."""
        measured = runner.measure(pairs, request.direction)
        if not request.truncate:
            self.check_lengths(runner, measured, request.query)
        return measured.encoded()

    # --- the checks ------------------------------------------------------------------------------------

    def check_ready(self) -> None:
        self.backend.check_ready()

    def check_sizes(self, texts: Sequence[str], field: str) -> None:
        if not texts:
            raise EmptyInput(f"'{field}' is empty; send at least one input")
        if len(texts) > self.settings.max_texts:
            raise TooLarge(
                f"{len(texts)} inputs in one request; the limit is {self.settings.max_texts}",
            )
        self.check_chars(texts)

    def check_chars(self, texts: Sequence[str]) -> None:
        s = self.settings
        for i, text in enumerate(texts):
            if len(text) > s.max_chars:
                raise TooLarge(
                    f"input {i} has {len(text):,} characters; the limit is {s.max_chars:,} per text",
                )

    def check_not_empty(self, request: Classify) -> None:
        for i, (text, pair) in enumerate(request.pairs):
            if not text and not pair:
                what = f"{request.field}[{i}]" + (" with the query" if request.query else "")
                raise EmptyInput(f"{what} is empty: it has no text to score")

    def check_lengths(self, runner: ModelRunner, measured: Measured, query: bool) -> None:
        """TooLong for the first input over the model's length, naming the query of a rerank when it leaves
        no room for any of the text."""
        limit = runner.max_seq_len
        for i in range(len(measured.inputs)):
            tokens = measured.length(i)
            if tokens <= limit:
                continue
            if not query:
                raise runner.too_long(f"input {i}", tokens)
            first, second = measured.side_lengths(i)
            together = " for the query and a text together"
            if second is not None and first + runner.template.specials(True) >= limit:
                raise runner.too_long("the query", first, together)
            raise runner.too_long(f"texts[{i}] with the query", tokens, together)

    def check_stride(self, runner: ModelRunner, stride: int | None, truncate: bool) -> int | None:
        """The overlap of `runner`'s windows for this request; None when truncate asks for one window."""
        if truncate:
            if stride is not None:
                raise InvalidRequest(
                    "'stride' is the overlap of windows over a long text; truncate=true scores only "
                    "the first window, so send one or the other",
                )
            return None
        if stride is None:
            return default_stride(runner.max_seq_len)
        limit = max_stride(runner.max_seq_len)
        if stride > limit:
            raise InvalidRequest(
                f"'stride' is {stride}; model {runner.name!r} takes windows of {runner.max_seq_len} "
                f"tokens, so the overlap can be at most {limit}",
            )
        return stride

    def check_suggest(self, runner: ModelRunner, top_k: int | None, name: str = "suggest") -> None:
        """A request's number of suggestions per token, against the model and --max-suggest."""
        if top_k is None:
            return
        self.generator(runner)
        limit = self.settings.max_suggest
        if top_k > limit:
            raise TooLarge(
                f"'{name}' is {top_k}; the server answers at most {limit} suggestions per token "
                "(--max-suggest)",
            )

    def check_fits(self, inputs: int, what: str, send: str = "fewer or shorter texts") -> None:
        # The queue takes a request's inputs all at once or not at all: more than it holds could never
        # run, and a 503 would send the client into retrying forever.
        limit = self.settings.max_queue
        if inputs > limit:
            raise TooLarge(
                f"the request needs {inputs:,} {what}; at most {limit:,} fit in the model's queue "
                f"(--max-queue): send {send} per request",
            )


def ranked(scores: Sequence[float]) -> list[int]:
    """Indices from the highest score to the lowest, as text-embeddings-inference orders its answers (a
    stable sort, lowest first, then reversed): of equal scores the later one comes first."""
    order = sorted(range(len(scores)), key=scores.__getitem__)
    order.reverse()
    return order


def _names(runners: dict[str, ModelRunner]) -> str:
    return ", ".join(sorted(runners)) or "none"


def _target_ids(runner: ModelRunner, targets: str | list[str] | None) -> tuple[int, ...] | None:
    """fill-mask's `targets` as token ids, as the pipeline reads them: a vocabulary token is its id, another
    word its first token's (None: every token may be proposed)."""
    if targets is None:
        return None
    words = [targets] if isinstance(targets, str) else targets
    if len(words) > MAX_TARGETS:
        raise TooLarge(f"parameters: 'targets' holds {len(words):,} words; at most {MAX_TARGETS:,}")
    ids: list[int] = []
    for word in words:
        token_id = runner.tokenizer.token_to_id(word)
        if token_id is None:
            pieces = runner.tokenizer.encode(word, add_special_tokens=False).ids
            if not pieces:
                continue
            token_id = pieces[0]
        ids.append(token_id)
    if not ids:
        raise InvalidRequest("parameters: 'targets' holds no word the model's vocabulary can read")
    return tuple(sorted(set(ids)))
