"""`/detect`'s suggestions measured through the server's own code, in process: detection, the flagged units,
the generator's inputs under each masking strategy, and how often its top tokens restore the original word
(experiments/suggest_quality.py on held-out English, experiments/suggest_masking.py on a synthetic language).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from electra.serving.engine.suggest import ALONE_FROM, ALONE_MAX
from experiments.lib.heldout import Swap

MAX_SEQ_LEN = 128
BATCH = 32
# The masking strategies compared, as electra.serving.engine.suggest.plan's (alone_from, alone_max): runs of
# at least alone_from adjacent flagged units predicted one at a time (None: none, every flagged unit of a
# window masked at once), but not in a window that owns more than alone_max of them. "served": the server's
# choice.
STRATEGIES: dict[str, tuple[int | None, int | None]] = {
    "together": (None, None),
    "runs_from_2": (2, None),
    "alone": (1, None),
    "served": (ALONE_FROM, ALONE_MAX),
}
LEVELS = ("word", "token")


def measure(bundle: Path, swaps: list[tuple[Swap, int, int]], threshold: float) -> dict[str, Any]:
    """Detection through the server's inference core (as /detect with truncate=true), then the suggestions
    of every level and masking strategy through the server's planning code (the strategies the server does
    not offer included)."""
    from electra.serving.engine.local import local_inference, run
    from electra.serving.engine.postprocess import units
    from electra.serving.engine.requests import Detect
    from electra.serving.engine.runtime import ModelRunner
    from electra.serving.engine.suggest import Target, flagged, plan
    from electra.serving.engine.windows import Document

    runner = ModelRunner("bench", bundle, threads=int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
    core = local_inference({runner.name: runner})
    generator = core.generator(runner)
    texts = [s.text for s, _, _ in swaps]
    # The first windows the core scores with truncate=true, for the strategies' plans below.
    encoded = runner.encode(texts)

    def top(inputs: list[Any]) -> list[np.ndarray]:
        rows: list[np.ndarray] = []
        for lo in range(0, len(inputs), BATCH):
            rows += generator.infer(inputs[lo : lo + BATCH])
        return rows

    out: dict[str, Any] = {"swaps": len(swaps)}
    for level in LEVELS:
        _, results = run(core.detect(Detect(texts, threshold, level, truncate=True), runner))
        swapped = [_swapped_unit(units(e, level), e, s) for e, (s, _, _) in zip(encoded, swaps, strict=True)]
        hit = [u is not None and r.tokens[u].replaced for u, r in zip(swapped, results, strict=True)]
        flagged_units = [sum(t.replaced for t in r.tokens) for r in results]
        record: dict[str, Any] = {
            "detected": float(np.mean(hit)),
            "flagged_units_per_sentence": float(np.mean(flagged_units)),
            "units_per_sentence": float(np.mean([len(r.tokens) for r in results])),
        }
        docs = [Document(e, [e], [0]) for e in encoded]
        for name, (alone_from, alone_max) in STRATEGIES.items():
            inputs, where = [], []
            for i, (r, e) in enumerate(zip(results, encoded, strict=True)):
                if not hit[i]:
                    continue
                targets = flagged(r, e, level)
                p = plan(docs[i], targets, runner.mask_id, 5, level == "word", alone_from, alone_max)
                for n, answered in enumerate(p.answers):
                    for j, t in enumerate(answered):
                        if targets[t].unit == swapped[i]:
                            where.append((i, len(inputs) + n, j))
                inputs += p.inputs
            rows = top(inputs)
            found = {i: rows[n][j]["id"].tolist() for i, n, j in where}
            record[name] = _restored(found, swaps, hit, len(inputs))
        located = [i for i, u in enumerate(swapped) if u is not None]
        oracle_inputs = []
        for i in located:
            pieces = units(encoded[i], level)[swapped[i]]  # type: ignore[index]
            target = [Target(0, pieces[0], pieces[-1])]
            oracle_inputs += plan(docs[i], target, runner.mask_id, 5, level == "word").inputs
        rows = top(oracle_inputs)
        oracle = {i: row[0]["id"].tolist() for i, row in zip(located, rows, strict=True)}
        restored = _restored(oracle, swaps, [True] * len(swaps), len(oracle_inputs))
        record["oracle_top1"], record["oracle_top5"] = restored["top1"], restored["top5"]
        out[level] = record
    out["examples"] = _examples(core, runner, swaps[:200], threshold)
    return out


def _swapped_unit(pieces: list[list[int]], enc: Any, swap: Swap) -> int | None:
    for u, unit in enumerate(pieces):
        start, end = enc.offsets[unit[0]][0], enc.offsets[unit[-1]][1]
        if start < swap.end and swap.start < end:
            return u
    return None


def _restored(
    found: dict[int, list[int]], swaps: list[tuple[Swap, int, int]], hit: list[bool], inputs: int
) -> dict[str, float]:
    top1 = sum(ids[:1] == [swaps[i][1]] for i, ids in found.items())
    top5 = sum(swaps[i][1] in ids[:5] for i, ids in found.items())
    flagged = max(1, sum(hit))
    return {
        "top1": top1 / len(swaps),
        "top5": top5 / len(swaps),
        "top1_flagged": top1 / flagged,
        "top5_flagged": top5 / flagged,
        "generator_inputs_per_flagged_sentence": inputs / flagged,
    }


def _examples(core: Any, runner: Any, swaps: list[Any], threshold: float) -> list[dict[str, Any]]:
    """A few swapped sentences whose original the top suggestion restored, as /detect answers them."""
    from electra.serving.engine.local import run
    from electra.serving.engine.requests import Detect

    generator = core.generator(runner)
    out = []
    for swap, old, _ in swaps:
        request = Detect([swap.text], threshold, "word", truncate=True, suggest=3)
        _, (result,) = run(core.detect(request, runner))
        word = next((t for t in result.tokens if t.start < swap.end and swap.start < t.end), None)
        if word is not None and word.suggestions and word.suggestions[0].token == generator.token(old):
            out.append(
                {
                    "text": swap.text,
                    "swapped": swap.text[swap.start : swap.end],
                    "suggestions": [(s.token, round(s.score, 3)) for s in word.suggestions],
                    "suggested_text": result.suggested_text,
                }
            )
        if len(out) == 5:
            break
    return out
