"""Fine-tuning a cross-encoder: `electra finetune --task rerank` against sentence-transformers' own
`CrossEncoder.fit`, from the same encoder, on the same data, with the same learning rate, batch, epochs,
warmup, weight decay, gradient clipping and loss, in alternating rounds.

Data: QNLI's dev set (the shared GLUE data; its training set is not among it) as relevance: the questions
split in two by a fixed shuffle; a question's sentences are its passages, relevant when QNLI says the
sentence answers it (entailment). Training: the (question, sentence, 0/1) pairs of the first part. Dev: each
question of the second part that has an answering sentence, with its own sentences and --negatives sentences
of other questions drawn at random, ranked by the model (NDCG@10, MRR@10, MAP: electra's ranking_metrics).

Both configurations are scored by one scorer: the saved directory loaded with `CrossEncoder(DIR)` and its
predictions ranked, so only the training differs. Times are the training loop's (ours: the epochs; theirs:
`fit`, which builds its Trainer and dataset inside), each round one seed, the order rotated per round; the
report gives each configuration's median NDCG@10 and the median of the per-round time ratios.
`CrossEncoder.fit` needs the `datasets` package (`pip install datasets`).

    python -m bench.reranker_vs_st --model runs/eq/arms/mlm/seed-1/point-100/mlm --seeds 1,2,3
    python -m bench.reranker_vs_st --model DIR --seeds 1 --max-train-pairs 300 --name smoke   # a smoke run

Writes bench/results/reranker_vs_st_<--name>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.benchlib import SHARED_DATA, int_list, portable_path, result_header, round_order, write_result

QNLI_DEV = SHARED_DATA / "glue" / "QNLI" / "dev.tsv"
CONFIGS = ("ours", "sentence_transformers")


def qnli_relevance(
    path: Path, dev_share: float, negatives: int, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training pairs, dev queries) from QNLI dev: questions split by a fixed shuffle (see the module)."""
    by_question: dict[str, list[tuple[str, int]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        _, question, sentence, label = line.split("\t")
        by_question.setdefault(question, []).append((sentence, int(label == "entailment")))
    questions = sorted(by_question)
    rng = random.Random(seed)
    rng.shuffle(questions)
    cut = int(len(questions) * (1 - dev_share))
    train = [
        {"query": q, "passage": s, "label": label} for q in questions[:cut] for s, label in by_question[q]
    ]
    sentences = [s for q in questions[cut:] for s, _ in by_question[q]]
    dev = []
    for q in questions[cut:]:
        own = by_question[q]
        if not any(label for _, label in own):
            continue
        others = [s for s in rng.sample(sentences, negatives + len(own)) if s not in {x for x, _ in own}]
        dev.append(
            {
                "query": q,
                "positive": [s for s, label in own if label],
                "negative": [s for s, label in own if not label] + others[:negatives],
            }
        )
    return train, dev


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def train_ours(args: argparse.Namespace, train: Path, dev: Path, out: Path, seed: int) -> float:
    """`electra finetune --task rerank` with the settings CrossEncoder.fit uses; the training loop's seconds
    (the model saved to `out` after, not timed)."""
    from electra.training.finetune.config import FinetuneConfig
    from electra.training.finetune.trainer import FinetuneTrainer

    cfg = FinetuneConfig(
        task="rerank",
        model=args.model,
        out=out,
        train=train,
        dev=dev,
        text_column="query",
        text_pair_column="passage",
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        max_seq_len=args.max_seq_len,
        warmup_fraction=args.warmup_fraction,
        recipe="hf",  # torch AdamW, no layer-wise decay, linear warmup then decay, mean loss
        weight_decay=args.weight_decay,  # the hf recipe's own is 0
        head="hf",
        seeds=[seed],
        device="cpu",
        progress=False,
    )
    trainer = FinetuneTrainer(cfg)
    trainer.setup(seed)
    start = time.perf_counter()
    for epoch in range(trainer.epochs):
        trainer.train_epoch(seed, epoch, None)
    seconds = time.perf_counter() - start
    trainer.save(trainer.model.cpu(), {"seed": seed})
    return seconds


def train_theirs(args: argparse.Namespace, train_rows: list[dict[str, Any]], out: Path, seed: int) -> float:
    """CrossEncoder(model, num_labels=1).fit with the same settings; the seconds of fit()."""
    import torch
    from sentence_transformers import CrossEncoder, InputExample
    from torch.utils.data import DataLoader

    torch.manual_seed(seed)
    model = CrossEncoder(str(args.model), num_labels=1, max_length=args.max_seq_len, device="cpu")
    examples = [InputExample(texts=[r["query"], r["passage"]], label=float(r["label"])) for r in train_rows]
    loader = DataLoader(
        examples, shuffle=True, batch_size=args.batch_size, generator=torch.Generator().manual_seed(seed)
    )
    steps = math.ceil(len(examples) / args.batch_size) * args.epochs
    # fit() makes its Trainer's output directory, checkpoints/model, in the working directory, and has no
    # argument for it (output_path is where it saves the best model): run it where that is thrown away.
    with tempfile.TemporaryDirectory(prefix="cross-encoder-fit-") as scratch, contextlib.chdir(scratch):
        start = time.perf_counter()
        model.fit(
            train_dataloader=loader,
            epochs=args.epochs,
            warmup_steps=round(args.warmup_fraction * steps),
            optimizer_params={"lr": args.lr},
            weight_decay=args.weight_decay,
            max_grad_norm=1.0,
            show_progress_bar=False,
        )
        seconds = time.perf_counter() - start
    model.save(str(out))
    return seconds


def dev_pairs(dev_rows: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[float], list[int]]:
    """Every dev (query, passage) pair with its relevance and its query's number."""
    pairs, relevance, groups = [], [], []
    for g, row in enumerate(dev_rows):
        for passages, rel in ((row["positive"], 1.0), (row["negative"], 0.0)):
            for p in passages:
                pairs.append((row["query"], p))
                relevance.append(rel)
                groups.append(g)
    return pairs, relevance, groups


def ndcg_of(model_dir: Path, dev_rows: list[dict[str, Any]]) -> dict[str, float]:
    """The dev queries ranked by CrossEncoder(model_dir): the one scorer of both configurations."""
    import numpy as np
    from sentence_transformers import CrossEncoder

    from electra.training.finetune.ranking_metrics import ranking_metrics

    model = CrossEncoder(str(model_dir), device="cpu")
    pairs, relevance, groups = dev_pairs(dev_rows)
    scores = model.predict(pairs, batch_size=64, show_progress_bar=False)
    return ranking_metrics(np.asarray(scores), np.asarray(relevance), np.asarray(groups))


def chance_metrics(dev_rows: list[dict[str, Any]], draws: int = 200, seed: int = 0) -> dict[str, float]:
    """The same metrics for passages in a random order (mean over `draws` orders): what a model that learned
    nothing scores, so a pair of equal scores can be told from two models that both failed to learn."""
    import numpy as np

    from electra.training.finetune.ranking_metrics import ranking_metrics

    _, relevance, groups = dev_pairs(dev_rows)
    rng = np.random.default_rng(seed)
    runs = [ranking_metrics(rng.random(len(relevance)), relevance, groups) for _ in range(draws)]
    return {metric: float(np.mean([r[metric] for r in runs])) for metric in runs[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", type=Path, required=True, help="an HF ELECTRA discriminator (or MLM) directory"
    )
    ap.add_argument("--seeds", type=int_list, default=[1, 2, 3], help="one round each")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-seq-len", type=int, default=128)
    ap.add_argument("--warmup-fraction", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.01, help="CrossEncoder.fit's default")
    ap.add_argument("--dev-share", type=float, default=0.3, help="questions held out for the dev ranking")
    ap.add_argument("--negatives", type=int, default=9, help="other questions' sentences per dev query")
    ap.add_argument("--max-train-pairs", type=int, default=None, help="a smaller training set (smoke runs)")
    ap.add_argument("--note", default="", help="where the encoder came from, recorded with the result")
    ap.add_argument("--name", default="cpu")
    args = ap.parse_args(argv)
    if not QNLI_DEV.is_file():
        print(f"skipped: {QNLI_DEV} is absent", file=sys.stderr)
        return 0
    header = result_header(f"reranker_vs_st_{args.name}")
    train_rows, dev_rows = qnli_relevance(QNLI_DEV, args.dev_share, args.negatives)
    if args.max_train_pairs:
        train_rows = train_rows[: args.max_train_pairs]
    rounds = []
    with tempfile.TemporaryDirectory(prefix="reranker-vs-st-") as tmp:
        work = Path(tmp)
        train, dev = write_jsonl(work / "train.jsonl", train_rows), write_jsonl(work / "dev.jsonl", dev_rows)
        for r, seed in enumerate(args.seeds):
            record: dict[str, Any] = {"round": r, "seed": seed, "order": round_order(list(CONFIGS), r)}
            for name in record["order"]:
                out = work / f"{name}-{seed}"
                if name == "ours":
                    seconds = train_ours(args, train, dev, out, seed)
                else:
                    seconds = train_theirs(args, train_rows, out, seed)
                record[name] = {"train_seconds": seconds, **ndcg_of(out, dev_rows)}
                print(f"round {r + 1} {name}: {json.dumps(record[name])}", flush=True)
            record["time_ratio_theirs_over_ours"] = (
                record["sentence_transformers"]["train_seconds"] / record["ours"]["train_seconds"]
            )
            record["load_average_end"] = result_header("")["load_average"]
            rounds.append(record)
    summary = {
        name: {
            metric: statistics.median(r[name][metric] for r in rounds)
            for metric in ("ndcg@10", "mrr@10", "map", "train_seconds")
        }
        for name in CONFIGS
    }
    summary["chance"] = chance_metrics(dev_rows)
    result = {
        **header,
        "model": portable_path(args.model),
        "model_note": args.note,
        "data": {
            "source": "GLUE QNLI dev (shared data): questions split by a fixed shuffle",
            "train_pairs": len(train_rows),
            "dev_queries": len(dev_rows),
            "dev_passages": sum(len(r["positive"]) + len(r["negative"]) for r in dev_rows),
        },
        "settings": {k: (portable_path(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "rounds": rounds,
        "summary": summary,
        "time_ratio_theirs_over_ours_median": statistics.median(
            r["time_ratio_theirs_over_ours"] for r in rounds
        ),
        "targets": {"ndcg_at_least_level": "ours >= theirs - their seed spread", "faster": "time ratio > 1"},
    }
    path = write_result(result, None, header["benchmark"])
    print(json.dumps(summary, indent=2))
    ratio = result["time_ratio_theirs_over_ours_median"]
    print(f"time, theirs / ours (median of rounds): {ratio:.2f}; wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
