"""fill-mask on `/hf/NAME` for a detector exported with its generator: what `InferenceClient.fill_mask` sends
and reads, in transformers' FillMaskPipeline's shape (electra.serving.hf_tasks), with the suggestions of
/detect (electra.serving.suggest): the text's own [MASK]s filled, or where it holds none, the tokens the
detector flags."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from litestar.exceptions import HTTPException

from electra.serving.hf_tasks import FillMaskElement, FillMaskParameters, TextPairInput
from electra.serving.open_inference import ProtocolError
from electra.serving.postprocess import detect_result, with_marks
from electra.serving.suggest import Target, edit, flagged, mask_targets
from electra.serving.windows import Document, default_stride, split

if TYPE_CHECKING:
    from electra.serving.runtime import ModelRunner
    from electra.serving.state import ServerState

# Every proposal carries the whole text as its `sequence`, so an answer grows as masks x top_k x text length:
# a 20 kB text of [MASK]s at top_k 20 would answer gigabytes. The pipeline's shape cannot be changed, so the
# product is bounded (16M characters: a 50,000-character text, the default --max-chars, with 16 masks at
# top_k 20) and a request over it gets a 413 before the generator runs.
MAX_SEQUENCE_CHARS = 16_000_000


async def fill_mask(
    state: ServerState, runner: ModelRunner, items: list[str | TextPairInput], parameters: dict[str, Any]
) -> list[Any]:
    """fill-mask for each text: its [MASK]s filled by the generator, or where it holds none, the tokens the
    detector flags (threshold 0.5, as token-classification's labels). Per text the pipeline's shape: one
    mask's proposals as a list, several masks' as a list of lists (none: an empty list)."""
    try:
        p = msgspec.convert(parameters, FillMaskParameters)
    except msgspec.ValidationError as e:
        raise ProtocolError(f"parameters: {e}") from None
    if not all(isinstance(x, str) for x in items):
        raise ProtocolError(f"model {runner.name!r} fills masks in texts: 'inputs' are texts, not pairs")
    texts: list[str] = items  # type: ignore[assignment]
    state.check_sizes(texts, "inputs")
    state.check_suggest(runner, p.top_k, "top_k")
    candidates = _target_ids(runner, p.targets)
    state.check_ready()
    generator = runner.generator
    assert generator is not None  # the route only comes here with one
    mask_token = generator.token(runner.mask_id)
    masked = [i for i, t in enumerate(texts) if mask_token in t]
    plain = [i for i, t in enumerate(texts) if mask_token not in t]
    stride = default_stride(runner.max_seq_len)
    docs: dict[int, Document] = {}
    targets: dict[int, list[Target]] = {}
    if masked:
        whole = await state.tokenize(runner, runner.encode_whole, [texts[i] for i in masked])
        for i, enc in zip(masked, whole, strict=True):
            docs[i] = split(enc, runner.max_seq_len, stride)
            targets[i] = mask_targets(enc, runner.mask_id)
    if plain:
        scored = await state.token_logits(runner, [texts[i] for i in plain], stride)
        for i, s in zip(plain, scored, strict=True):
            docs[i] = s.doc
            targets[i] = flagged(
                detect_result(texts[i], s.encoded, s.logits, 0.5, "token"), s.encoded, "token"
            )
    order = range(len(texts))
    top_k = p.top_k if candidates is None else min(p.top_k, len(candidates))
    _check_answer_size(sum(len(targets[i]) * len(texts[i]) for i in order) * top_k)
    rows = await state.suggestions(
        runner, [docs[i] for i in order], [targets[i] for i in order], top_k, False, candidates
    )
    out: list[Any] = []
    for i in order:
        enc, offsets = docs[i].full, with_marks(texts[i], docs[i].full.offsets)
        lowercase = generator.lowercase and i in plain  # a [MASK] has no case to keep
        per_mask = []
        for target, row in zip(targets[i], rows[i], strict=True):
            elements = []
            for t in row:
                token = generator.token(int(t["id"]))
                replacement, start, end = edit(
                    texts[i], offsets, enc, target, token, generator.prefix, lowercase
                )
                sequence = texts[i][:start] + replacement + texts[i][end:]
                elements.append(FillMaskElement(float(t["prob"]), int(t["id"]), token, sequence))
            per_mask.append(elements)
        out.append(per_mask[0] if len(per_mask) == 1 else per_mask)
    return out


def _check_answer_size(chars: int) -> None:
    if chars > MAX_SEQUENCE_CHARS:
        raise HTTPException(
            status_code=413,
            detail=f"the answer would repeat the text in {chars:,} characters of 'sequence' (masks x top_k "
            f"x text length); at most {MAX_SEQUENCE_CHARS:,}: send fewer [MASK]s, a lower top_k or shorter "
            "texts",
        )


def _target_ids(runner: ModelRunner, targets: str | list[str] | None) -> tuple[int, ...] | None:
    """fill-mask's `targets` as token ids, as the pipeline reads them: a vocabulary token is its id, another
    word its first token's (None: every token may be proposed)."""
    if targets is None:
        return None
    words = [targets] if isinstance(targets, str) else targets
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
        raise ProtocolError("parameters: 'targets' holds no word the model's vocabulary can read")
    return tuple(sorted(set(ids)))
