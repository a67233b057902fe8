"""How often `/detect`'s suggestions restore the original word, on held-out English with one word swapped.

The sentences and swaps are experiments.lib.heldout's: WikiText-2 (valid and test) sentences of articles
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
  does, alone unless a window owns more than electra.serving.engine.suggest.ALONE_MAX): `top1` / `top5`, the
  share of all swaps whose swapped word is flagged and gets the original as its first / among its first five
  suggestions; `top1_flagged` / `top5_flagged`, the same among the flagged ones; the generator inputs per
  sentence (the cost);
* `oracle_top1` / `oracle_top5`: only the swapped word masked, detection aside (the generator alone).

    python -m experiments.suggest_quality --model runs/small   # a run directory: discriminator/, generator/
    python -m experiments.suggest_quality --model RUN --swaps 500 --name suggest_quality_x \
        --about "micro, gdes, generator lr scale 0.1, 400 steps on English Wikipedia"
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.benchlib import result_header, write_result
from electra.files import DISCRIMINATOR_DIR, GENERATOR_DIR
from experiments.lib import heldout
from experiments.lib.heldout import Swap
from experiments.lib.store import RESULTS
from experiments.lib.suggestions import LEVELS, MAX_SEQ_LEN, STRATEGIES, measure


def originals(swaps: list[Swap], sents: list[str]) -> list[str | None]:
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
    tokenizer: Any, swaps: list[Swap], words: list[str | None], limit: int
) -> list[tuple[Swap, int, int]]:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a run directory: discriminator/, generator/")
    ap.add_argument("--swaps", type=int, default=2000, help="swapped sentences kept (default: %(default)s)")
    ap.add_argument("--threshold", type=float, default=0.5, help="/detect's threshold (default: %(default)s)")
    ap.add_argument("--name", default="suggest_quality", help="results file name (experiments/results/)")
    ap.add_argument(
        "--about", help="how the pair was trained, recorded as given (its folder name may not say)"
    )
    args = ap.parse_args(argv)
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
        # The run's folder name and shapes only: the result must not carry this machine's paths.
        "model": args.model.name,
        "about": args.about,
        "shapes": _shapes(args.model),
        "threshold": args.threshold,
        "max_seq_len": MAX_SEQ_LEN,
        "swaps": len(kept),
        "swap_source": "WikiText-2 valid+test, same-kind one-word swaps (experiments.lib.heldout), "
        "original and swapped-in word one WordPiece each",
    }
    with tempfile.TemporaryDirectory(prefix="suggest-quality-") as work:
        for name, bundle in build_pairs(args.model, Path(work)).items():
            t = time.perf_counter()
            record[name] = measure(bundle, kept, args.threshold)
            print(f"{name}: measured in {time.perf_counter() - t:.0f} s", flush=True)
    record.update(result_header(args.name), seconds=time.perf_counter() - started)
    path = write_result(record, RESULTS / f"{args.name}.json", args.name)
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
