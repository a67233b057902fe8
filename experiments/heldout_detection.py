"""Replaced-token detection on held-out English (WikiText-2) for one pre-trained run: the swap measure and,
with the run's generator, the generator measure (experiments.lib.heldout says what each is).

    python -m experiments.heldout_detection --model runs/small   # a run dir (discriminator/, generator/)
    python -m experiments.heldout_detection --model electra-demo/run --swaps-only

Prints the figures and writes experiments/results/heldout_detection_<--name>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.benchlib import portable_path, result_header, write_result
from experiments.lib import heldout
from experiments.lib.shared_data import CONLL_TRAIN, WIKITEXT, missing
from experiments.lib.store import RESULTS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a run directory, or a discriminator directory")
    ap.add_argument("--swaps", type=int, default=2000, help="swapped sentences (default: %(default)s)")
    ap.add_argument("--swaps-only", action="store_true", help="skip the generator measure")
    ap.add_argument(
        "--work", type=Path, default=Path("runs/heldout"), help="prepared held-out data lives here"
    )
    ap.add_argument("--name", default=None, help="results file suffix (default: the model directory's name)")
    args = ap.parse_args(argv)
    if absent := missing(WIKITEXT, CONLL_TRAIN):
        print(f"skipped: {', '.join(map(str, absent))} absent", file=sys.stderr)
        return 0
    disc_dir = args.model / "discriminator" if (args.model / "discriminator").is_dir() else args.model
    sents = heldout.sentences(heldout.heldout_paragraphs())
    result = heldout.swap_detection(disc_dir, heldout.make_swaps(sents, heldout.pos_lexicon(), args.swaps))
    if not args.swaps_only:
        result.update(heldout.generator_detection(args.model, heldout.prepare_heldout(args.work, disc_dir)))
    print(json.dumps(result, indent=2))
    name = f"heldout_detection_{args.name or args.model.resolve().name}"
    record = {**result_header(name), "model": portable_path(args.model), "swaps": args.swaps, **result}
    print(f"wrote {write_result(record, RESULTS / f'{name}.json', name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
