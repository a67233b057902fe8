"""fill-mask on `/hf/NAME` for a detector exported with its generator: what `InferenceClient.fill_mask` sends
and reads, in transformers' FillMaskPipeline's shape (electra.serving.http.hf_tasks), translated to and from
the core's FillMask request (electra.serving.engine.requests: the text's own [MASK]s filled, or where it holds
none, the tokens the detector flags) and built as /detect's suggestions are
(electra.serving.engine.suggest)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from electra.serving.engine.core import Inference
from electra.serving.engine.metadata import RequestMetadata
from electra.serving.engine.postprocess import with_marks
from electra.serving.engine.requests import FillMask
from electra.serving.engine.rounding import rounded_one
from electra.serving.engine.suggest import edit
from electra.serving.http.hf_tasks import FillMaskElement, FillMaskParameters, TextPairInput
from electra.serving.http.open_inference import ProtocolError

if TYPE_CHECKING:
    from electra.serving.engine.runtime import ModelRunner


async def fill_mask(
    core: Inference,
    runner: ModelRunner,
    items: list[str | TextPairInput],
    parameters: dict[str, Any],
    meta: RequestMetadata,
) -> list[Any]:
    """Per text the pipeline's shape: one mask's proposals as a list, several masks' as a list of lists
    (none: an empty list)."""
    try:
        p = msgspec.convert(parameters, FillMaskParameters)
    except msgspec.ValidationError as e:
        raise ProtocolError(f"parameters: {e}") from None
    if not all(isinstance(x, str) for x in items):
        raise ProtocolError(f"model {runner.name!r} fills masks in texts: 'inputs' are texts, not pairs")
    texts: list[str] = items  # type: ignore[assignment]
    filled = await core.fill_mask(FillMask(texts, p.top_k, p.targets), runner, meta)
    generator = core.generator(runner)
    out: list[Any] = []
    for text, doc, targets, masked, rows in zip(
        texts, filled.docs, filled.targets, filled.masked, filled.rows, strict=True
    ):
        enc, offsets = doc.full, with_marks(text, doc.full.offsets)
        lowercase = generator.lowercase and not masked  # a [MASK] has no case to keep
        per_mask = []
        for target, row in zip(targets, rows, strict=True):
            elements = []
            for t in row:
                token = generator.token(int(t["id"]))
                replacement, start, end = edit(text, offsets, enc, target, token, generator.prefix, lowercase)
                sequence = text[:start] + replacement + text[end:]
                elements.append(FillMaskElement(rounded_one(t["prob"]), int(t["id"]), token, sequence))
            per_mask.append(elements)
        out.append(per_mask[0] if len(per_mask) == 1 else per_mask)
    return out
