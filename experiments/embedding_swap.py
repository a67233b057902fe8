"""Which part of a pre-trained encoder makes it fine-tune worse than a random one: embeddings or layers?

Runs on the work directory of experiments/equal_compute.py (its arms, budget points, fine-tuning budgets and
evaluation cache). For each pre-trained point asked for (--models, default every arm's last point), two
hybrids with the random arm's encoder (same shape, same seed, same tokenizer):

* `layers`: the pre-trained Transformer layers under the random encoder's embedding block (word,
  position and token-type tables, their LayerNorm, the projection when there is one);
* `embeddings`: the pre-trained embedding block under the random encoder's layers;

fine-tuned exactly as the arms themselves (same tasks, seeds, example cap and epochs; the whole pre-trained
encoder's and the random one's scores are read from equal_compute's cache, so they are the same runs).

It also measures each encoder's geometry. Its word table: the mean cosine between random pairs of rows, for
tokens the pre-training data has often (the 2,000 most frequent), rarely (1 to 10 times in the training
split) and never; a random table has every mean near 0. Rows that no loss tells apart drift together: under
a softmax output layer tied to the input table, every word that is not the target is pushed the same way
(representation degeneration, Gao et al., ICLR 2019); in an ELECTRA discriminator, a word the data never
has reaches it only as a generator's sample, always labelled replaced. Its token states: the mean cosine
between the last layer's states of two different tokens of one SST-2 dev sentence (256 sentences).

    python -m experiments.equal_compute --work runs/eq ...   # first: the arms and their scores
    python -m experiments.embedding_swap --work runs/eq      # then: the swap table

Writes experiments/results/<--name>.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.benchlib import result_header, write_result
from electra.atomic import make_temp_dir
from experiments.lib.arms import PRETRAINED, Setup, finetune_keys, load_setup, point_dir
from experiments.lib.evaluation import finetune_each, prefixed, task_scores
from experiments.lib.pretraining import POINT_RECORD, encoder_dir
from experiments.lib.shared_data import GLUE
from experiments.lib.store import RESULTS, Cache

PARTS = ("layers", "embeddings")
EMBEDDING_PREFIX = "electra.embeddings"  # also matches electra.embeddings_project
WORD_TABLE = "electra.embeddings.word_embeddings.weight"


def is_embedding(key: str) -> bool:
    return key.startswith(EMBEDDING_PREFIX)


def hybrid_state(pretrained: dict[str, Any], random: dict[str, Any], keep_pretrained: str) -> dict[str, Any]:
    """The pre-trained state with one part replaced by the random encoder's.

    `keep_pretrained` names the part that stays pre-trained ("layers" or "embeddings"); tensors outside the
    encoder (the pre-training heads) are kept as they are, and fine-tuning discards them.
    """
    if keep_pretrained not in PARTS:
        raise ValueError(f"keep_pretrained must be one of {PARTS}, not {keep_pretrained!r}")
    out = {}
    for key, tensor in pretrained.items():
        take_random = key.startswith("electra.") and (is_embedding(key) == (keep_pretrained == "layers"))
        if take_random:
            if key not in random or random[key].shape != tensor.shape:
                raise ValueError(f"{key}: the random encoder has no tensor of shape {tuple(tensor.shape)}")
            out[key] = random[key]
        else:
            out[key] = tensor
    return out


def write_hybrid(pretrained: Path, random: Path, keep_pretrained: str, out: Path) -> Path:
    """A Hugging Face directory: `pretrained`'s files with the hybrid weights; built aside, then renamed."""
    from safetensors.torch import load_file, save_file

    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(f".{out.name}.", out.parent)
    try:
        staged = tmp / "model"
        shutil.copytree(pretrained, staged)
        state = hybrid_state(
            load_file(pretrained / "model.safetensors"),
            load_file(random / "model.safetensors"),
            keep_pretrained,
        )
        save_file(
            {k: v.contiguous() for k, v in state.items()},
            staged / "model.safetensors",
            metadata={"format": "pt"},
        )
        staged.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def token_counts(data_dir: Path, vocab_size: int) -> np.ndarray:
    """How often each token id occurs in the training split (real tokens only)."""
    from electra.training.data.dataset import PretrainingData

    data = PretrainingData.open(data_dir)
    ids = np.asarray(data.train.input_ids)
    lengths = np.asarray(data.train.lengths, dtype=np.int64)
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    return np.bincount(ids[valid].ravel(), minlength=vocab_size)[:vocab_size]


def frequency_buckets(counts: np.ndarray, frequent: int = 2000) -> dict[str, np.ndarray]:
    """Token ids by how often the pre-training data has them: the most frequent, the rare (1-10), never."""
    order = np.argsort(-counts, kind="stable")
    return {
        "frequent": order[:frequent],
        "rare": np.flatnonzero((counts >= 1) & (counts <= 10)),
        "never": np.flatnonzero(counts == 0),
    }


def mean_pair_cosine(table: np.ndarray, ids: np.ndarray, pairs: int = 20000, seed: int = 0) -> float | None:
    """Mean cosine between random pairs of distinct rows among `ids` (None when there are under two)."""
    if len(ids) < 2:
        return None
    rng = np.random.default_rng(seed)
    a = rng.choice(ids, pairs)
    b = rng.choice(ids, pairs)
    keep = a != b
    rows = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    return float((rows[a[keep]] * rows[b[keep]]).sum(axis=1).mean())


def geometry(model: Path, buckets: dict[str, np.ndarray]) -> dict[str, float | None]:
    from safetensors import safe_open

    with safe_open(str(model / "model.safetensors"), "np") as f:
        table = f.get_tensor(WORD_TABLE).astype(np.float64)
    return {name: mean_pair_cosine(table, ids) for name, ids in buckets.items()}


def sst2_sentences(limit: int = 256) -> list[str]:
    lines = (GLUE / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0] for line in lines[:limit]]


def state_cosine(model: Path, sentences: list[str]) -> float:
    """Mean cosine between the last layer's states of two different tokens of one sentence, over sentences.

    A random encoder's token states differ (about 0.2); an encoder whose states all point one way (a
    collapsed discriminator's reach 0.86) leaves a fine-tuning run little to tell tokens apart by.
    """
    import torch

    from electra.hf_format import load_hf_dir
    from electra.tokenizer import load_tokenizer

    encoder = load_hf_dir(model).electra
    tok = load_tokenizer(model)
    means = []
    with torch.no_grad():
        for text in sentences:
            ids = torch.tensor([tok.encode(text).ids])
            states = torch.nn.functional.normalize(encoder(ids)[0], dim=-1)
            n = states.shape[0]
            if n < 2:
                continue
            sims = states @ states.T
            means.append(float((sims.sum() - sims.diagonal().sum()) / (n * (n - 1))))
    return float(np.mean(means))


def parse_models(spec: str | None, setup: Setup, seed: int) -> list[tuple[str, float]]:
    """'gdes@1,mlm@0.5' -> [("gdes", 1.0), ("mlm", 0.5)]; by default every pre-trained arm's last point."""
    if spec:
        models = []
        for item in spec.split(","):
            arm, _, point = item.partition("@")
            if arm not in PRETRAINED or not point:
                raise SystemExit(
                    f"--models: {item!r} is not ARM@FRACTION with ARM one of {', '.join(PRETRAINED)}"
                )
            try:
                models.append((arm, float(point)))
            except ValueError:
                raise SystemExit(f"--models: {point!r} in {item!r} is not a fraction") from None
        return models
    found = []
    for arm in PRETRAINED:
        records = point_dir(setup, arm, seed, 0).parent.glob(f"point-*/{POINT_RECORD}")
        points = sorted(json.loads(p.read_text())["point"] for p in records)
        if points:
            found.append((arm, points[-1]))
    return found


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--work", type=Path, required=True, help="the work directory of experiments.equal_compute"
    )
    ap.add_argument("--models", default=None, help="ARM@FRACTION,... (default: every arm's last point)")
    ap.add_argument("--seed", type=int, default=None, help="the pre-training seed (default: the first)")
    ap.add_argument("--tasks", default="sst2", help="a subset of the equal-compute run's tasks")
    ap.add_argument("--name", default="embedding_swap", help="results file name")
    return ap.parse_args(argv)


def _checked(a: argparse.Namespace) -> tuple[Setup, int, tuple[str, ...], Path, list[tuple[str, float]]]:
    """The experiment's setup, the pre-training seed, the tasks, the random arm's directory and the
    pre-trained points to swap, each checked (SystemExit with what is missing)."""
    try:
        setup = load_setup(a.work)
    except FileNotFoundError as e:
        raise SystemExit(str(e)) from None
    seed = a.seed if a.seed is not None else setup.pretrain_seeds[0]
    tasks = tuple(a.tasks.split(","))
    if unknown := set(tasks) - set(setup.tasks):
        raise SystemExit(f"--tasks: {sorted(unknown)} not among the experiment's {', '.join(setup.tasks)}")
    rand = point_dir(setup, "random", seed, 0.0)
    if not (rand / "config.json").is_file():
        raise SystemExit(f"{a.work}: no random arm of seed {seed}; run experiments.equal_compute there first")
    models = parse_models(a.models, setup, seed)
    if not models:
        raise SystemExit(f"{a.work}: no pre-trained point of seed {seed} yet")
    return setup, seed, tasks, rand, models


def main(argv: list[str] | None = None) -> int:
    a = _arguments(argv)
    started = time.perf_counter()
    setup, seed, tasks, rand, models = _checked(a)
    # The whole-encoder rows come from equal_compute's own cache: one evaluation of each, never two.
    arms_cache = Cache(a.work / "evaluations.jsonl")
    cache = Cache(a.work / "embedding_swap.jsonl")
    from electra.config import ElectraConfig

    vocab_size = ElectraConfig.from_json_file(rand / "config.json").vocab_size
    sentences = sst2_sentences()
    buckets = frequency_buckets(token_counts(setup.data, vocab_size))
    ft_seeds = setup.finetune_seeds
    rows = [
        {
            "model": "random",
            "part": "all",
            "scores": task_scores(arms_cache, finetune_keys(setup, "random", seed, 0.0), tasks, ft_seeds),
            "word_table_cosine": geometry(rand, buckets),
            "state_cosine": state_cosine(rand, sentences),
        }
    ]
    for arm, point in models:
        encoder = encoder_dir(point_dir(setup, arm, seed, point))
        if not (encoder / "config.json").is_file():
            raise SystemExit(f"{encoder}: no such pre-trained point")
        label = f"{arm}@{point:g}"
        rows.append(
            {
                "model": label,
                "part": "all",
                "scores": task_scores(arms_cache, finetune_keys(setup, arm, seed, point), tasks, ft_seeds),
                "word_table_cosine": geometry(encoder, buckets),
                "state_cosine": state_cosine(encoder, sentences),
            }
        )
        for part in PARTS:
            hybrid = write_hybrid(
                encoder, rand, part, a.work / "swaps" / f"seed-{seed}" / label / f"pretrained-{part}"
            )
            keys = prefixed(f"swap/{arm}/{seed}/{point}/{part}")
            finetune_each(
                cache,
                keys,
                hybrid,
                tasks,
                ft_seeds,
                setup.budgets,
                {"arm": arm, "pretrain_seed": seed, "point": point, "part": part},
                f"{label} pre-trained {part} only,",
            )
            rows.append({"model": label, "part": part, "scores": task_scores(cache, keys, tasks, ft_seeds)})
    result = {
        "setup": {
            "tasks": tasks,
            "seeds": ft_seeds,
            "pretrain_seed": seed,
            "budgets": {t: setup.budgets[t].describe() for t in tasks},
            "buckets": {k: len(v) for k, v in buckets.items()},
        },
        "rows": rows,
        **result_header(a.name),
        "seconds": time.perf_counter() - started,
    }
    path = write_result(result, RESULTS / f"{a.name}.json", a.name)
    print(f"wrote {path}")
    print(markdown_table(result))
    return 0


def markdown_table(result: dict[str, Any]) -> str:
    tasks = result["setup"]["tasks"]
    what = {
        "all": "whole encoder",
        "layers": "its layers, random embeddings",
        "embeddings": "its embeddings, random layers",
    }
    lines = [
        "| encoder | pre-trained part | "
        + " | ".join(tasks)
        + " | word-table cosine: frequent / rare / never | token-state cosine |",
        "|---|---|" + "---|" * len(tasks) + "---|---|",
    ]
    for row in result["rows"]:
        cells = []
        for task in tasks:
            s = row["scores"].get(task)
            cells.append(f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})" if s else "")
        cos = row.get("word_table_cosine")
        geo = (
            " / ".join("-" if cos[b] is None else f"{cos[b]:.2f}" for b in ("frequent", "rare", "never"))
            if cos
            else ""
        )
        part = "none" if row["model"] == "random" else what[row["part"]]
        state = f"{row['state_cosine']:.2f}" if "state_cosine" in row else ""
        lines.append(f"| {row['model']} | {part} | " + " | ".join(cells) + f" | {geo} | {state} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
