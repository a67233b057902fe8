"""All at once or one at a time? How /detect's suggestions should mask the flagged units, measured where a
generator can restore a word at all: a small synthetic language a tiny pair learns on a CPU in minutes.

Why synthetic: the pairs a CPU budget pre-trains on English (experiments/suggest_quality.py) have generators
near the unigram level, so they restore next to nothing and cannot tell the strategies apart. Here every
clause is one of FRAMES frames, "the ADJ_i NOUN_i VERB_i ADV_i", so each content word is given by any other
word of its clause; a swap puts another frame's word of the same kind in one place, which the discriminator
can detect and the generator can undo, from the clause's other words. What differs between the strategies is
what the generator sees: all at once, every flagged word of the sentence is masked (a flagged clause-mate of
the swapped word hides evidence); one at a time, only the word it predicts.

Steps (in a temporary directory): the corpus and a word-level vocabulary, `electra data prepare`,
`electra pretrain --size tiny` (a generator as wide as the discriminator: the language, not the
generator, is what this measures), the pair exported with its
generator, then experiments.lib.suggestions' measurement (the server's code in process) on held-out sentences
with one word swapped, at two thresholds (the lower one flags more words, clause-mates among them).

    python -m experiments.suggest_masking           # about 5 minutes on one core
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.benchlib import result_header, write_result
from experiments.lib import heldout
from experiments.lib.shared_data import ROOT
from experiments.lib.store import RESULTS
from experiments.lib.suggestions import LEVELS, STRATEGIES, measure

FRAMES = 12
KINDS = ("bright", "thing", "does", "fully")  # the word stems of adjectives, nouns, verbs, adverbs
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def word(kind: int, frame: int) -> str:
    return f"{KINDS[kind]}{'abcdefghijklmnopqrstuvwxyz'[frame]}"


def clause(frame: int) -> str:
    return "the " + " ".join(word(k, frame) for k in range(len(KINDS)))


def sentence(rng: random.Random) -> str:
    clauses = [clause(rng.randrange(FRAMES)) for _ in range(rng.randint(1, 2))]
    return " and ".join(clauses) + "."


def write_corpus(path: Path, documents: int, seed: int) -> None:
    rng = random.Random(seed)
    docs = [" ".join(sentence(rng) for _ in range(rng.randint(3, 6))) for _ in range(documents)]
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")


def write_vocab(path: Path) -> Path:
    words = [word(k, f) for k in range(len(KINDS)) for f in range(FRAMES)]
    path.write_text("\n".join([*SPECIALS, ".", "the", "and", *words]) + "\n", encoding="utf-8")
    return path


def swaps(tokenizer: Any, n: int, seed: int) -> list[tuple[heldout.Swap, int, int]]:
    """`n` new sentences, each with one content word swapped for another frame's word of its kind."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        text = sentence(rng)
        words = [w for w in text.rstrip(".").split() if w not in ("the", "and")]
        old = rng.choice(words)
        kind = next(k for k in range(len(KINDS)) if old.startswith(KINDS[k]))
        frame = "abcdefghijklmnopqrstuvwxyz".index(old[-1])
        new = word(kind, rng.choice([f for f in range(FRAMES) if f != frame]))
        start = text.index(old)
        swapped = text[:start] + new + text[start + len(old) :]
        ids = tokenizer.token_to_id
        out.append((heldout.Swap(swapped, start, start + len(new)), ids(old), ids(new)))
    return out


def electra(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "electra", *args, "--quiet"], check=True, cwd=ROOT)


def pretrain(work: Path, steps: int, generator_size: str) -> float:
    """The toy language's corpus, vocabulary and data written under `work`, and a tiny ELECTRA pre-trained on
    them into `work`/run; the pre-training's seconds."""
    write_corpus(work / "corpus.txt", 4000, seed=1)
    vocab = write_vocab(work / "vocab.txt")
    electra(
        "data",
        "prepare",
        "--corpus",
        str(work / "corpus.txt"),
        "--tokenizer",
        str(vocab),
        "--max-seq-len",
        "32",
        "--out",
        str(work / "data"),
        "--workers",
        "1",
    )
    t = time.perf_counter()
    electra(
        "pretrain",
        "--data",
        str(work / "data"),
        "--out",
        str(work / "run"),
        "--size",
        "tiny",
        "--generator-size",
        generator_size,
        "--steps",
        str(steps),
        "--batch-size",
        "32",
        "--warmup-steps",
        str(steps // 10),
        "--log-every",
        "100",
        "--eval-every",
        str(steps),
    )
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5000, help="pre-training steps (default: %(default)s)")
    ap.add_argument(
        "--generator-size", default="1.0", help="the generator's width / the discriminator's (default: 1.0)"
    )
    ap.add_argument("--swaps", type=int, default=1000, help="swapped sentences (default: %(default)s)")
    ap.add_argument("--thresholds", default="0.5,0.2", help="comma-separated (default: %(default)s)")
    ap.add_argument("--name", default="suggest_masking", help="results file name (experiments/results/)")
    args = ap.parse_args(argv)
    from electra.onnx.export import export_bundle
    from electra.tokenizer import load_tokenizer

    started = time.perf_counter()
    record: dict[str, Any] = {
        "language": f"{FRAMES} frames 'the ADJ NOUN VERB ADV', one or two clauses per sentence",
        "strategies": {name: {"alone_from": a, "alone_max": m} for name, (a, m) in STRATEGIES.items()},
    }
    with tempfile.TemporaryDirectory(prefix="suggest-masking-") as tmp:
        work = Path(tmp)
        record["pretrain_s"] = pretrain(work, args.steps, args.generator_size)
        run = work / "run"
        record["pretrain_final"] = (run / "metrics.jsonl").read_text().splitlines()[-1]
        bundle = work / "bundle"
        export_bundle(run / "discriminator", bundle, max_seq_len=32, generator_dir=run / "generator")
        kept = swaps(load_tokenizer(bundle), args.swaps, seed=2)
        record["swaps"] = len(kept)
        for threshold in [float(x) for x in args.thresholds.split(",")]:
            result = measure(bundle, kept, threshold)
            record[f"threshold_{threshold}"] = result
            for level in LEVELS:
                x = result[level]
                parts = [f"{s} top1 {x[s]['top1_flagged']:.3f}" for s in STRATEGIES]
                print(
                    f"threshold {threshold} {level}: detected {x['detected']:.3f}, flagged "
                    f"{x['flagged_units_per_sentence']:.2f}/{x['units_per_sentence']:.1f}; among flagged: "
                    + "; ".join(parts)
                    + f"; oracle top1 {x['oracle_top1']:.3f}",
                    flush=True,
                )
    record.update(result_header(args.name), seconds=time.perf_counter() - started)
    print(f"wrote {write_result(record, RESULTS / f'{args.name}.json', args.name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
