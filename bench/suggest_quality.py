"""How often `/detect`'s suggestions restore the original word, on held-out English with one word swapped.

The sentences and swaps are bench/heldout_detection.py's: WikiText-2 (valid and test) sentences of articles
the pre-training corpus does not have, one word per sentence swapped for another word of the same kind (a
noun for a noun, ...). Kept: the swaps where the original and the swapped-in word are each one WordPiece of
the model's vocabulary, so that a suggestion restores the original exactly when its token is the original's.

The pair (RUN/discriminator and RUN/generator) is exported to one fused fp32 bundle and run through the
server's own code in process (electra.serving: detection, the flagged units, the generator's inputs, its top
tokens), with a random-initialised pair of the same shapes and tokenizer as the control. Per pair:

* `detected`: the swapped word is flagged (score >= --threshold at its level);
* per level (`word`, `token`) and masking (`together`: every flagged unit of a window masked at once, one
  generator input per window; `alone`: each flagged unit in an input of its own, everything else visible;
  `runs_from_2`: together, but runs of 2+ adjacent flagged units one at a time; `served`: what the server
  does, alone unless a window owns more than electra.serving.suggest.ALONE_MAX): `top1` / `top5`, the share
  of all swaps whose swapped word is flagged and gets the original as its first / among its first five
  suggestions; `top1_flagged` / `top5_flagged`, the same among the flagged ones; the generator inputs per
  sentence (the cost);
* `oracle_top1` / `oracle_top5`: only the swapped word masked, detection aside (the generator alone).

    python bench/suggest_quality.py --model runs/small     # a run directory: discriminator/ and generator/
    python bench/suggest_quality.py --model RUN --swaps 500 --out bench/results/suggest_quality_x.json \
        --about "micro, gdes, generator lr scale 0.1, 400 steps on English Wikipedia"
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import heldout_detection as heldout
import numpy as np
from benchlib import run_facts, write_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from electra.files import DISCRIMINATOR_DIR, GENERATOR_DIR  # noqa: E402
from electra.serving.suggest import ALONE_FROM, ALONE_MAX  # noqa: E402

MAX_SEQ_LEN = 128
BATCH = 32
# The masking strategies compared, as electra.serving.suggest.plan's (alone_from, alone_max): runs of at
# least alone_from adjacent flagged units predicted one at a time (None: none, every flagged unit of a window
# masked at once), but not in a window that owns more than alone_max of them. "served": the server's choice.
STRATEGIES: dict[str, tuple[int | None, int | None]] = {
    "together": (None, None),
    "runs_from_2": (2, None),
    "alone": (1, None),
    "served": (ALONE_FROM, ALONE_MAX),
}
LEVELS = ("word", "token")


def originals(swaps: list[heldout.Swap], sents: list[str]) -> list[str | None]:
    """The word each swap replaced: from the one held-out sentence that differs from the swapped text only
    there (None when none or several do)."""
    by_start: dict[str, list[str]] = defaultdict(list)
    for s in sents:
        by_start[s[:8]].append(s)
    out: list[str | None] = []
    for swap in swaps:
        head, tail = swap.text[: swap.start], swap.text[swap.end :]
        pool = by_start[swap.text[:8]] if swap.start >= 8 else sents
        found = {s[swap.start : len(s) - len(tail)] for s in pool if s.startswith(head) and s.endswith(tail)}
        found.discard("")
        out.append(found.pop() if len(found) == 1 else None)
    return out


def single_piece_swaps(
    tokenizer: Any, swaps: list[heldout.Swap], words: list[str | None], limit: int
) -> list[tuple[heldout.Swap, int, int]]:
    """(swap, original token id, swapped-in token id) where both words are one WordPiece and differ."""
    out = []
    for swap, word in zip(swaps, words, strict=True):
        if word is None:
            continue
        old = tokenizer.encode(word, add_special_tokens=False).ids
        new = tokenizer.encode(swap.text[swap.start : swap.end], add_special_tokens=False).ids
        if len(old) == 1 and len(new) == 1 and old != new:
            out.append((swap, old[0], new[0]))
        if len(out) == limit:
            break
    return out


def build_pairs(run: Path, work: Path) -> dict[str, Path]:
    """{"trained": bundle of the run's pair, "random": bundle of a random-initialised pair of its shapes}."""
    import torch

    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import build_model
    from electra.onnx.export import export_bundle
    from electra.tokenizer import load_tokenizer, save_tokenizer

    disc, gen = run / DISCRIMINATOR_DIR, run / GENERATOR_DIR
    tokenizer = load_tokenizer(disc)
    torch.manual_seed(0)
    control = work / "random"
    for kind, source in (("discriminator", disc), ("generator", gen)):
        cfg = ElectraConfig.from_json_file(source / "config.json")
        save_tokenizer(tokenizer, save_hf_dir(build_model(kind, cfg), control / kind))
    bundles = {}
    for name, pair in (("trained", run), ("random", control)):
        t = time.perf_counter()
        bundles[name] = work / f"{name}-bundle"
        export_bundle(
            pair / DISCRIMINATOR_DIR,
            bundles[name],
            max_seq_len=MAX_SEQ_LEN,
            generator_dir=pair / GENERATOR_DIR,
        )
        print(f"exported the {name} pair in {time.perf_counter() - t:.0f} s", flush=True)
    return bundles


def measure(bundle: Path, swaps: list[tuple[heldout.Swap, int, int]], threshold: float) -> dict[str, Any]:
    """Detection, then the suggestions of every level and masking strategy, through the server's code."""
    from electra.serving.postprocess import detect_result, units
    from electra.serving.runtime import ModelRunner
    from electra.serving.suggest import Target, flagged, plan
    from electra.serving.windows import Document

    runner = ModelRunner("bench", bundle, threads=int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
    generator = runner.generator
    assert generator is not None
    texts = [s.text for s, _, _ in swaps]
    encoded = runner.encode(texts)
    logits: list[np.ndarray] = []
    for lo in range(0, len(encoded), BATCH):
        logits += runner.infer(encoded[lo : lo + BATCH])

    def top(inputs: list[Any]) -> list[np.ndarray]:
        rows: list[np.ndarray] = []
        for lo in range(0, len(inputs), BATCH):
            rows += generator.infer(inputs[lo : lo + BATCH])
        return rows

    out: dict[str, Any] = {"swaps": len(swaps)}
    for level in LEVELS:
        results = [
            detect_result(t, e, x, threshold, level) for t, e, x in zip(texts, encoded, logits, strict=True)
        ]
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
    out["examples"] = _examples(runner, texts[:200], swaps[:200], threshold)
    return out


def _shapes(run: Path) -> dict[str, Any]:
    from electra.config import ElectraConfig

    out = {}
    for sub in (DISCRIMINATOR_DIR, GENERATOR_DIR):
        cfg = ElectraConfig.from_json_file(run / sub / "config.json")
        out[sub] = {
            "layers": cfg.num_hidden_layers,
            "hidden": cfg.hidden_size,
            "embedding": cfg.embedding_size,
            "vocab": cfg.vocab_size,
        }
    return out


def _swapped_unit(pieces: list[list[int]], enc: Any, swap: heldout.Swap) -> int | None:
    for u, unit in enumerate(pieces):
        start, end = enc.offsets[unit[0]][0], enc.offsets[unit[-1]][1]
        if start < swap.end and swap.start < end:
            return u
    return None


def _restored(
    found: dict[int, list[int]], swaps: list[tuple[heldout.Swap, int, int]], hit: list[bool], inputs: int
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


def _examples(runner: Any, texts: list[str], swaps: list[Any], threshold: float) -> list[dict[str, Any]]:
    """A few swapped sentences whose original the top suggestion restored, as /detect answers them."""
    from electra.serving.postprocess import detect_result
    from electra.serving.suggest import attach, flagged, plan
    from electra.serving.windows import Document

    generator = runner.generator
    out = []
    for text, (swap, old, _) in zip(texts, swaps, strict=True):
        (enc,) = runner.encode([text])
        result = detect_result(text, enc, runner.infer([enc])[0], threshold, "word")
        targets = flagged(result, enc, "word")
        if not targets:
            continue
        p = plan(Document(enc, [enc], [0]), targets, runner.mask_id, 3, True)
        rows = generator.infer(p.inputs)
        by_target = {t: rows[n][j] for n, answered in enumerate(p.answers) for j, t in enumerate(answered)}
        attach(
            text,
            enc,
            result,
            targets,
            [by_target[t] for t in range(len(targets))],
            generator.tokens,
            generator.prefix,
            generator.lowercase,
        )
        word = next((t for t in result.tokens if t.start < swap.end and swap.start < t.end), None)
        if word is not None and word.suggestions and word.suggestions[0].token == generator.token(old):
            out.append(
                {
                    "text": text,
                    "swapped": text[swap.start : swap.end],
                    "suggestions": [(s.token, round(s.score, 3)) for s in word.suggestions],
                    "suggested_text": result.suggested_text,
                }
            )
        if len(out) == 5:
            break
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a run directory: discriminator/, generator/")
    ap.add_argument("--swaps", type=int, default=2000, help="swapped sentences kept (default: %(default)s)")
    ap.add_argument("--threshold", type=float, default=0.5, help="/detect's threshold (default: %(default)s)")
    ap.add_argument("--out", type=Path, help="result JSON (default: bench/results/suggest_quality.json)")
    ap.add_argument(
        "--about", help="how the pair was trained, recorded as given (its folder name may not say)"
    )
    args = ap.parse_args()
    if not (heldout.WIKITEXT.is_dir() and heldout.CONLL_TRAIN.is_file()):
        print(f"skipped: {heldout.WIKITEXT} or {heldout.CONLL_TRAIN} is absent", file=sys.stderr)
        return 0
    for sub in (DISCRIMINATOR_DIR, GENERATOR_DIR):
        if not (args.model / sub / "config.json").is_file():
            print(
                f"error: {args.model / sub} is not a model directory; pass a run directory", file=sys.stderr
            )
            return 2
    from electra.tokenizer import load_tokenizer

    started = time.perf_counter()
    sents = heldout.sentences(heldout.heldout_paragraphs())
    # Three times as many as kept: about half the swaps have a word of several pieces.
    swaps = heldout.make_swaps(sents, heldout.pos_lexicon(), 3 * args.swaps)
    tokenizer = load_tokenizer(args.model / DISCRIMINATOR_DIR)
    kept = single_piece_swaps(tokenizer, swaps, originals(swaps, sents), args.swaps)
    print(f"{len(kept)} single-piece swaps of {len(swaps)}", flush=True)
    record: dict[str, Any] = {
        "benchmark": "suggest_quality",
        # The run's folder name and shapes only: the result must not carry this machine's paths.
        "model": args.model.name,
        "about": args.about,
        "shapes": _shapes(args.model),
        "threshold": args.threshold,
        "max_seq_len": MAX_SEQ_LEN,
        "swaps": len(kept),
        "swap_source": "WikiText-2 valid+test, same-kind one-word swaps (bench/heldout_detection.py), "
        "original and swapped-in word one WordPiece each",
    }
    with tempfile.TemporaryDirectory(prefix="suggest-quality-") as work:
        for name, bundle in build_pairs(args.model, Path(work)).items():
            t = time.perf_counter()
            record[name] = measure(bundle, kept, args.threshold)
            print(f"{name}: measured in {time.perf_counter() - t:.0f} s", flush=True)
    record.update(run_facts(started))
    path = write_result(record, args.out, "suggest_quality")
    for name in ("trained", "random"):
        r = record[name]
        for level in LEVELS:
            x = r[level]
            parts = [f"{s} top1 {x[s]['top1']:.3f} top5 {x[s]['top5']:.3f}" for s in STRATEGIES]
            print(f"{name} {level}: detected {x['detected']:.3f}; " + "; ".join(parts))
            print(f"  oracle top1 {x['oracle_top1']:.3f} top5 {x['oracle_top5']:.3f}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
