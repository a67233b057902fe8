"""What a real fine-tuning run does, step by step, against the official code's formulas.

tests/test_recipes.py checks that the recipe's pieces (optimizer, layer-wise rule, schedule) are the official
ones; these tests check that the trainer uses them: the learning rate every parameter receives at each step of
a `FinetuneTrainer`/`TaggerTrainer` run, the gradient clipping, the loss, the heads' forward, the lr table
and how a too-long pair is cut; and what a run does with them: the optimizer's and schedule's defaults and
edges, devices, data order, regression label scaling, the seed kept, eval_results.json and the saved model.
They are also the test selection of mutation testing ([tool.mutmut] in pyproject.toml); the mutants they
cannot kill because no result can differ are listed, with the reason, at the end of this file.
Each expected value is computed here from the official code
(google-research/electra: `model/optimization.py`, `configure_finetuning.py`, `run_finetuning.py`,
`finetune/classification/classification_tasks.py`, `finetune/tagging/tagging_tasks.py`), not from ours.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import random
import re
import signal
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from electra.config import ElectraConfig
from electra.errors import InputError
from electra.hf_format import save_hf_dir
from electra.model import ElectraDiscriminator
from electra.sizes import SIZES, finetune_recipe
from electra.tokenizer import load_tokenizer, save_tokenizer
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.encoding import EncodedExamples, encode, truncated_pair_lengths
from electra.training.finetune.recipe import RECIPES, resolve_recipe
from electra.training.finetune.tag_encoding import IGNORE
from electra.training.finetune.tag_trainer import TaggerTrainer
from electra.training.finetune.tasks import TASKS, Example, read_glue
from electra.training.finetune.trainer import FinetuneTrainer
from electra.training.optim import (
    AdamWeightDecay,
    _fused_available,
    build_optimizer,
    build_scheduler,
    official_warmup_decay,
    param_groups,
    warmup_linear_decay,
)

from .test_recipes import WORDS, official_lr_at, write_glue
from .test_tagging_finetune import synthetic, to_bioes, write_conll

# ----------------------------------------------------------------------------------------------------------
# The official code's rules, ported literally
# ----------------------------------------------------------------------------------------------------------


def official_truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """classification_tasks.py `_truncate_seq_pair`, line for line."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def official_layer_lrs(learning_rate: float, layer_decay: float, n_layers: int) -> dict[str, float]:
    """optimization.py `_get_layer_lrs`, with our parameter names in place of the TF variable scopes."""
    key_to_depths = {
        r"electra\.embeddings\.": 0,
        r"electra\.embeddings_project\.": 0,
        r"^classifier\.": n_layers + 2,
    }
    for layer in range(n_layers):
        key_to_depths[rf"electra\.encoder\.layer\.{layer}\."] = layer + 1
    return {
        key: learning_rate * layer_decay ** (n_layers + 2 - depth) for key, depth in key_to_depths.items()
    }


def official_lr_of(name: str, table: dict[str, float]) -> float:
    matches = [lr for key, lr in table.items() if re.search(key, name)]
    assert len(matches) == 1, f"{name}: {len(matches)} learning rates"  # the official optimizer raises too
    return matches[0]


# ----------------------------------------------------------------------------------------------------------
# Fixtures: tiny models, generated data
# ----------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the block after `seconds` of wall-clock time, where SIGALRM is available."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _fail_rather_than_hang() -> Iterator[None]:
    """Every test here takes a few seconds at most; a loop that never ends (mutation testing turns
    `len_a -= 1` in truncated_pair_lengths into `len_a += 1`) fails its test after a minute instead of
    running until mutmut's CPU limit, which reports a timeout rather than a kill."""
    with _deadline(60):
        yield


def _model_dir(tmp_path: Path, name: str, words: list[str], **arch: int) -> Path:
    vocab = tmp_path / f"{name}-vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *words]) + "\n")
    tok = load_tokenizer(vocab)
    cfg = ElectraConfig.from_size("tiny", vocab_size=tok.get_vocab_size())
    for key, value in arch.items():
        setattr(cfg, key, value)
    torch.manual_seed(0)
    out = tmp_path / name
    save_hf_dir(ElectraDiscriminator(cfg), out)
    save_tokenizer(tok, out)
    return out


@pytest.fixture
def glue(tmp_path: Path) -> Path:
    return write_glue(tmp_path / "glue", n=40)


def classifier_trainer(model: Path, glue: Path, out: Path, **kw: object) -> FinetuneTrainer:
    cfg = FinetuneConfig(task="rte", model=model, out=out, data_dir=glue, progress=False, **kw)
    return FinetuneTrainer(cfg)


def tagger_trainer(model: Path, tmp_path: Path, **kw: object) -> TaggerTrainer:
    tmp_path.mkdir(parents=True, exist_ok=True)
    train = write_conll(tmp_path / "train.conll", synthetic(40, 1))
    dev = write_conll(tmp_path / "dev.conll", synthetic(10, 2))
    cfg = FinetuneConfig(
        task="tags", model=model, out=tmp_path / "tagger", train=train, dev=dev, progress=False, **kw
    )
    return TaggerTrainer(cfg)


TAG_WORDS = ["john", "mary", "anna", "smith", "jones", "paris", "london", "berlin", "rome", "new", "york"]
TAG_WORDS += ["the", "a", "visited", "met", "in", "and", "said", "today", "with", "went", "to", "from"]


# ----------------------------------------------------------------------------------------------------------
# Learning rates: the table, the layer-wise rule and the schedule, as the optimizer receives them
# ----------------------------------------------------------------------------------------------------------


def test_the_lr_table_is_the_official_codes_and_the_papers_is_one_flag_away() -> None:
    # configure_finetuning.py: learning_rate = 1e-4, 5e-5 when model_size == "large"; Table 7: Small 3e-4.
    for name, code, paper in (("small", 1e-4, 3e-4), ("base", 1e-4, 1e-4), ("large", 5e-5, 5e-5)):
        width = SIZES[name].hidden_size
        assert finetune_recipe(width)[0] == code
        assert finetune_recipe(width, "code")[0] == code
        assert finetune_recipe(width, "paper")[0] == paper
    assert finetune_recipe(999) == (1e-4, 0.8)  # an unknown width: the code's defaults


def test_a_small_width_model_fine_tunes_at_the_codes_lr_unless_told(tmp_path: Path, glue: Path) -> None:
    small_width = _model_dir(tmp_path, "w256", WORDS, hidden_size=256, num_attention_heads=4,
                             intermediate_size=256)  # fmt: skip
    peaks = {}
    for recipe, table in (("official", None), ("hf", None), ("official", "paper")):
        t = classifier_trainer(
            small_width, glue, tmp_path / f"o-{recipe}-{table}", recipe=recipe, lr_table=table
        )
        t.setup(1)
        peaks[recipe, table] = max(g["initial_lr"] for g in t.optimizer.param_groups)
    assert peaks == {("official", None): 1e-4, ("hf", None): 1e-4, ("official", "paper"): 3e-4}
    t = classifier_trainer(small_width, glue, tmp_path / "o-lr", lr=2e-5, lr_table="paper")
    t.setup(1)
    assert max(g["initial_lr"] for g in t.optimizer.param_groups) == 2e-5  # --lr wins over both tables


def _record_step_lrs(t: FinetuneTrainer) -> list[dict[str, float]]:
    """Per optimizer step, the lr each parameter (by name) is updated with, read when the step runs."""
    names = {id(p): n for n, p in t.model.named_parameters()}
    seen: list[dict[str, float]] = []

    def hook(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        seen.append({names[id(p)]: g["lr"] for g in optimizer.param_groups for p in g["params"]})

    t.optimizer.register_step_pre_hook(hook)
    return seen


@pytest.mark.parametrize("kind", ["classifier", "tagger"])
def test_every_parameter_gets_the_official_layer_lr_times_the_schedule_at_every_step(
    tmp_path: Path, glue: Path, kind: str
) -> None:
    if kind == "classifier":
        t: FinetuneTrainer = classifier_trainer(
            _model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", epochs=2
        )
    else:
        t = tagger_trainer(_model_dir(tmp_path, "m", TAG_WORDS), tmp_path, epochs=2)
    t.setup(1)
    seen = _record_step_lrs(t)
    for epoch in range(t.epochs):
        t.train_epoch(1, epoch, None)
    assert len(seen) == t.total_steps
    n = t.model.config.num_hidden_layers
    peak, decay = 1e-4, 0.8  # tiny's lr and decay; the official rule: top layer decay^2
    table = official_layer_lrs(peak, decay, n)
    for step, lrs in enumerate(seen):
        factor = official_lr_at(step, 1.0, t.total_steps, 0.1)
        for name, lr in lrs.items():
            assert lr == pytest.approx(official_lr_of(name, table) * factor, rel=1e-12, abs=1e-18), (
                step,
                name,
            )
    # The update really used them: weight decay 0.01 off biases and LayerNorm (create_optimizer's exclusion).
    decays = {names: g["weight_decay"] for g in t.optimizer.param_groups for names in _names(t, g)}
    for name, wd in decays.items():
        assert wd == (0.0 if ("LayerNorm" in name or name.endswith("bias")) else 0.01), name


def _names(t: FinetuneTrainer, group: dict) -> list[str]:
    ids = {id(p) for p in group["params"]}
    return [n for n, p in t.model.named_parameters() if id(p) in ids]


def test_the_intended_rule_gives_the_top_layer_one_decay_less(tmp_path: Path, glue: Path) -> None:
    t = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", recipe="intended")
    t.setup(1)
    seen = _record_step_lrs(t)
    t.train_epoch(1, 0, None)
    n = t.model.config.num_hidden_layers
    # google-research/electra #51: the head one layer above the top one, i.e. depth n+1 instead of n+2.
    table = {
        k: v / 0.8 if not k.startswith("^classifier") else v
        for k, v in official_layer_lrs(1e-4, 0.8, n).items()
    }
    assert len(seen) == 2
    factor = official_lr_at(1, 1.0, t.total_steps, 0.1)
    for name, lr in seen[1].items():
        assert lr == pytest.approx(official_lr_of(name, table) * factor, rel=1e-12), name


# ----------------------------------------------------------------------------------------------------------
# Clipping and the loss
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", ["official", "hf"])
def test_the_gradient_reaching_the_optimizer_is_clipped_at_norm_one(
    tmp_path: Path, glue: Path, recipe: str
) -> None:
    t = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", recipe=recipe)
    t.setup(1)
    norms: list[float] = []
    t.optimizer.register_step_pre_hook(
        lambda opt, a, k: norms.append(
            float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in t.model.parameters()])))
        )
    )
    raw = []
    for lo in range(0, 40, 8):
        idx = np.arange(lo, lo + 8)
        t.model.train()
        t.optimizer.zero_grad()
        torch.manual_seed(lo)
        t.batch_loss(idx).backward()
        raw.append(
            float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in t.model.parameters()])))
        )
        t.optimizer.zero_grad()
        torch.manual_seed(lo)
        t.train_step(idx)
    for before, after in zip(raw, norms, strict=True):
        # clip_by_global_norm(grads, 1.0): untouched below 1, scaled onto the unit sphere above.
        assert after == pytest.approx(min(before, 1.0), rel=1e-5)
    if recipe == "official":
        assert min(raw) > 1.0  # a summed loss: clipping bites at every step, as in the official runs


def test_the_classifier_loss_is_summed_officially_and_averaged_by_hf(tmp_path: Path, glue: Path) -> None:
    model = _model_dir(tmp_path, "m", WORDS)
    idx = np.arange(7)
    for recipe, reduce in (("official", torch.sum), ("hf", torch.mean)):
        t = classifier_trainer(model, glue, tmp_path / recipe, recipe=recipe)
        t.setup(1)
        t.model.eval()
        batch = t.train_data.batch(idx, t.pad_id, t.device)
        logits = t.model(**batch)
        per_example = F.cross_entropy(logits, torch.from_numpy(t.train_data.labels[idx]), reduction="none")
        assert t.batch_loss(idx).item() == pytest.approx(reduce(per_example).item(), rel=1e-6)


def test_the_tagger_loss_counts_each_words_first_piece_once(tmp_path: Path) -> None:
    model = _model_dir(tmp_path, "m", TAG_WORDS)
    idx = np.arange(5)
    for recipe in ("official", "hf"):
        t = tagger_trainer(model, tmp_path / recipe, recipe=recipe)
        t.setup(1)
        t.model.eval()
        total, count = 0.0, 0
        for i in idx:
            ids = torch.tensor([t.train_data.ids[i]])
            logits = t.model(ids, torch.ones_like(ids))[0]
            labels = torch.tensor(t.train_data.labels[i])
            keep = labels >= 0
            # tagging_tasks.py: softmax cross-entropy at the labelled positions, masked, summed.
            total += F.cross_entropy(logits[keep], labels[keep], reduction="sum").item()
            count += int(keep.sum())
        want = total if recipe == "official" else total / count
        assert t.batch_loss(idx).item() == pytest.approx(want, rel=1e-5)


# ----------------------------------------------------------------------------------------------------------
# Heads
# ----------------------------------------------------------------------------------------------------------


def test_the_official_tagging_head_has_no_dropout_and_hfs_has(tmp_path: Path) -> None:
    from transformers import ElectraForTokenClassification

    model = _model_dir(tmp_path, "m", TAG_WORDS)
    ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
    for recipe, dropped in (("official", False), ("hf", True)):
        t = tagger_trainer(model, tmp_path / recipe, recipe=recipe)
        t.setup(1)
        t.model.train()
        t.model.electra.eval()  # the encoder's own dropout is the same in both: leave it out
        hidden = t.model.electra(ids, torch.ones_like(ids))
        torch.manual_seed(0)
        logits = t.model(ids, torch.ones_like(ids))
        assert torch.equal(logits, t.model.classifier(hidden)) is not dropped, recipe
        save_hf_dir(t.model, tmp_path / f"saved-{recipe}")
        hf = ElectraForTokenClassification.from_pretrained(tmp_path / f"saved-{recipe}")
        assert (hf.dropout.p > 0) is dropped, recipe


# ----------------------------------------------------------------------------------------------------------
# Pair truncation
# ----------------------------------------------------------------------------------------------------------


def test_pair_lengths_match_the_official_truncation_everywhere() -> None:
    for len_a in range(0, 14):
        for len_b in range(0, 14):
            for budget in range(0, 24):
                a, b = list(range(len_a)), list(range(len_b))
                official_truncate_seq_pair(a, b, budget)
                assert truncated_pair_lengths(len_a, len_b, budget) == (len(a), len(b)), (
                    len_a,
                    len_b,
                    budget,
                )


def test_official_encoding_cuts_the_second_text_on_a_tie_and_longest_first_the_first(tmp_path: Path) -> None:
    tok = load_tokenizer(_model_dir(tmp_path, "m", WORDS))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    rng = random.Random(0)

    def text() -> str:
        return " ".join(rng.choices(WORDS, k=rng.randint(1, 9)))

    cases = [Example(str(i), text(), text(), "entailment") for i in range(300)]
    cases.append(Example("tie", "good bad the", "cat dog sat", "entailment"))
    official = encode(tok, cases, TASKS["rte"], 8, "official")
    longest = encode(tok, cases, TASKS["rte"], 8, "longest_first")
    differ = 0
    for i, ex in enumerate(cases):
        a = tok.encode(ex.text, add_special_tokens=False).ids
        b = tok.encode(ex.text_pair, add_special_tokens=False).ids
        official_truncate_seq_pair(a, b, 8 - 3)
        assert official.ids[i] == [cls, *a, sep, *b, sep]
        assert official.type_ids[i] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
        differ += official.ids[i] != longest.ids[i]
    tie = [tok.id_to_token(i) for i in official.ids[-1]]
    assert tie == ["[CLS]", "good", "bad", "the", "[SEP]", "cat", "dog", "[SEP]"]
    assert [tok.id_to_token(i) for i in longest.ids[-1]][1:4] == ["good", "bad", "[SEP]"]
    assert 0 < differ < len(cases)
    # Single texts are cut the same either way.
    single = [Example("s", " ".join(WORDS), None, "1")]
    assert (
        encode(tok, single, TASKS["sst2"], 6, "official").ids
        == encode(tok, single, TASKS["sst2"], 6, "longest_first").ids
    )
    assert tok.truncation is None  # the tokenizer is left as found


def test_the_trainer_cuts_pairs_as_its_recipe_says(tmp_path: Path, glue: Path) -> None:
    model = _model_dir(tmp_path, "m", WORDS)
    official = classifier_trainer(model, glue, tmp_path / "a", max_seq_len=8, double_unordered=False)
    hf = classifier_trainer(model, glue, tmp_path / "b", max_seq_len=8, recipe="hf")
    switched = classifier_trainer(
        model, glue, tmp_path / "c", max_seq_len=8, recipe="hf", pair_truncation="official"
    )
    assert official.train_data.ids == switched.train_data.ids
    assert official.train_data.ids != hf.train_data.ids
    assert official.dev_data["dev"].ids == switched.dev_data["dev"].ids


# ----------------------------------------------------------------------------------------------------------
# The optimizer and schedule builders (electra/training/optim.py): defaults, exclusions, edges
# ----------------------------------------------------------------------------------------------------------


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Linear(3, 2)
        self.LayerNorm = nn.LayerNorm(2)


def test_param_groups_hold_each_trainable_parameter_once() -> None:
    block = _Block()
    frozen = nn.Parameter(torch.ones(2), requires_grad=False)
    # A shared parameter listed twice (as tied weights are, by name) and a frozen one.
    named = [
        *block.named_parameters(),
        ("decoder.weight", block.dense.weight),
        ("frozen.weight", frozen),
        ("decoder.bias", block.dense.bias),
    ]
    decay, no_decay = param_groups(named, 0.3)
    assert [id(p) for p in decay["params"]] == [id(block.dense.weight)]
    want = [id(block.dense.bias), id(block.LayerNorm.weight), id(block.LayerNorm.bias)]
    assert [id(p) for p in no_decay["params"]] == want
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.3, 0.0)


@pytest.mark.parametrize("kind", ["official", "torch", None])
def test_weight_decay_is_decoupled_and_skips_biases_and_layernorm(kind: str | None) -> None:
    """With a zero gradient Adam's own step is 0 (m = v = 0), so one update is the weight decay alone:
    p - lr * wd * p (AdamWeightDecayOptimizer; AdamW: p * (1 - lr * wd)), on dense weights only. The
    default weight decay is the paper's 0.01 and the default Adam torch's AdamW."""
    torch.manual_seed(0)
    block = _Block()
    before = {n: p.detach().clone() for n, p in block.named_parameters()}
    opt = build_optimizer(block, lr=0.5, **({"kind": kind} if kind else {}))
    assert type(opt) is (AdamWeightDecay if kind == "official" else torch.optim.AdamW)
    for p in block.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in block.named_parameters():
        want = before[n] * (1 - 0.5 * 0.01) if n == "dense.weight" else before[n]
        torch.testing.assert_close(p.detach(), want, rtol=0, atol=1e-7, msg=n)


def _numpy_adamw(p: np.ndarray, grads: list[np.ndarray], lr: float, eps: float) -> np.ndarray:
    """torch.optim.AdamW / transformers' AdamW without weight decay: bias-corrected m and v."""
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + eps)
    return p


@pytest.mark.parametrize("fused", [None, False])
def test_torch_adam_is_bias_corrected_adamw_with_the_eps_asked_for(fused: bool | None) -> None:
    p = nn.Parameter(torch.tensor([0.5, -1.0, 2.0]))
    opt = build_optimizer(nn.ParameterList([p]), lr=0.1, weight_decay=0.0, eps=0.3, kind="torch", fused=fused)
    grads = [np.array([0.2, -0.4, 0.1]), np.array([-0.3, 0.1, 0.05])]
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
    want = _numpy_adamw(np.array([0.5, -1.0, 2.0]), grads, lr=0.1, eps=0.3)
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-6)


def test_official_adams_defaults_are_the_official_optimizers() -> None:
    """AdamWeightDecayOptimizer(learning_rate, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999, epsilon=1e-6);
    a gradient of the order of eps makes eps visible."""
    p0 = np.array([1.0, -2.0, 3.0])
    g = np.array([1e-6, -2e-6, 5e-7])
    p = nn.Parameter(torch.tensor(p0))
    opt = AdamWeightDecay([p], lr=0.1)
    p.grad = torch.tensor(g)
    opt.step()
    m, v = 0.1 * g, 0.001 * g * g
    np.testing.assert_allclose(p.detach().numpy(), p0 - 0.1 * m / (np.sqrt(v) + 1e-6), rtol=1e-12)


def test_torch_adam_uses_the_fused_kernel_exactly_where_it_exists() -> None:
    """The fused kernel when every parameter is a float tensor on one device type that has it (the CPU
    since torch 2.4, the project's minimum); fused=True elsewhere makes AdamW raise."""
    cpu = [nn.Parameter(torch.zeros(2))]
    meta = [nn.Parameter(torch.zeros(2, device="meta"))]
    assert _fused_available(cpu)
    assert not _fused_available(meta)  # no fused kernel on "meta"
    assert not _fused_available(cpu + meta)  # two device types
    assert not _fused_available([torch.zeros(2, dtype=torch.long)])
    assert build_optimizer(_Block(), lr=1e-3, kind="torch").defaults["fused"] is True
    assert not build_optimizer(_Block(), lr=1e-3, kind="torch", fused=False).defaults["fused"]


def hf_linear_schedule(step: int, warmup: int, total: int) -> float:
    """transformers' get_linear_schedule_with_warmup lr_lambda, as written there."""
    if step < warmup:
        return float(step) / float(max(1, warmup))
    return max(0.0, float(total - step) / float(max(1, total - warmup)))


def official_schedule(step: int, warmup: float, total: int) -> float:
    """create_optimizer: tf.train.polynomial_decay(power 1, end 0, cycle False) x min(1, step / warmup).
    Without warmup (0 steps) the ramp is left out (TF's step / 0 would be nan at step 0)."""
    decayed = 1.0 - min(step, total) / total  # polynomial_decay: global_step = min(global_step, decay_steps)
    return decayed * (min(1.0, step / warmup) if warmup else 1.0)


@pytest.mark.parametrize("total", [1, 2, 3, 10])
@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 1.0])
def test_schedules_at_their_edges_equal_the_official_and_hf_formulas(total: int, fraction: float) -> None:
    hf_warmup = math.ceil(fraction * total)  # TrainingArguments.get_warmup_steps
    official_warmup = fraction * total  # num_train_steps * warmup_proportion, a float
    hf, official = warmup_linear_decay(hf_warmup, total), official_warmup_decay(official_warmup, total)
    for step in range(total + 2):  # past the end too: the lr left in the optimizer after the last step
        assert hf(step) == pytest.approx(hf_linear_schedule(step, hf_warmup, total), abs=1e-15), step
        assert official(step) == pytest.approx(official_schedule(step, official_warmup, total), abs=1e-15)


def test_a_scheduler_without_a_shape_is_hfs_and_sets_every_steps_lr() -> None:
    p = nn.Parameter(torch.zeros(1))
    opt = AdamWeightDecay([p], lr=2.0)
    sched = build_scheduler(opt, 1, 3)
    seen = []
    for _ in range(4):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([2.0 * hf_linear_schedule(s, 1, 3) for s in range(4)], abs=1e-15)


def test_a_run_without_warmup_decays_from_the_first_step(tmp_path: Path, glue: Path) -> None:
    t = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", warmup_fraction=0.0)
    t.setup(1)
    seen = _record_step_lrs(t)
    t.train_epoch(1, 0, None)
    head = "classifier.dense.weight"
    assert [s[head] for s in seen] == pytest.approx([1e-4 * (1 - k / t.total_steps) for k in range(2)])


def test_the_official_warmup_is_a_fraction_of_a_step_where_the_run_gives_one(
    tmp_path: Path, glue: Path
) -> None:
    # 40 examples, batch 8, 3 epochs: 15 steps, 10% warmup = 1.5 steps (HF's Trainer would take 2).
    t = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", epochs=3, batch_size=8)
    assert t.total_steps == 15
    t.setup(1)
    seen = _record_step_lrs(t)
    for epoch in range(3):
        t.train_epoch(1, epoch, None)
    head = [s["classifier.dense.weight"] for s in seen]
    assert head == pytest.approx([1e-4 * official_schedule(k, 1.5, 15) for k in range(15)], abs=1e-18)
    assert head[1] == pytest.approx(1e-4 * (1 - 1 / 15) / 1.5)


# ----------------------------------------------------------------------------------------------------------
# Recipe validation
# ----------------------------------------------------------------------------------------------------------


def test_recipe_errors_name_the_valid_choices() -> None:
    with pytest.raises(InputError, match=r"--recipe 'paper' is not one of official, intended, hf$"):
        resolve_recipe("paper", {})
    with pytest.raises(InputError, match=r"--head 'mlp' is not one of hf, linear$"):
        resolve_recipe("official", {"head": "mlp"})
    with pytest.raises(InputError, match=r"unknown recipe field\(s\) warmup$"):
        resolve_recipe("official", {"warmup": 0.2})
    with pytest.raises(InputError, match=r"\(0, 1\]"):
        resolve_recipe("official", {"layerwise_lr_decay": 0.0})  # every layer below the head at lr 0
    assert resolve_recipe("official", {"layerwise_lr_decay": 1.0}).layerwise_lr_decay == 1.0


# ----------------------------------------------------------------------------------------------------------
# Encoding: the default cut, empty second texts, labels, devices
# ----------------------------------------------------------------------------------------------------------


def test_encode_defaults_to_the_official_cut_and_keeps_labels_as_documented(tmp_path: Path) -> None:
    tok = load_tokenizer(_model_dir(tmp_path, "m", WORDS))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    pairs = [
        Example("tie", "good bad the", "cat dog sat", "entailment"),
        Example("long-first", "good bad the movie was", "cat", "not_entailment"),
        Example("long-second", "the", "cat dog sat good bad", "entailment"),
        Example("empty-second", "good bad", "", "not_entailment"),
    ]
    enc = encode(tok, pairs, TASKS["rte"], 6)  # no pair_truncation given: the official cut
    for ex, ids in zip(pairs, enc.ids, strict=True):
        a = tok.encode(ex.text, add_special_tokens=False).ids
        b = tok.encode(ex.text_pair, add_special_tokens=False).ids if ex.text_pair else []
        official_truncate_seq_pair(a, b, 6 - 3)
        assert ids == [cls, *a, sep, *b, sep], ex.guid
    assert enc.labels is not None and enc.labels.dtype == np.int64  # label ids in TASKS["rte"].labels order
    assert enc.labels.tolist() == [0, 1, 0, 1]
    scores = encode(tok, [Example("r", "good", None, "3.5"), Example("s", "bad", None, 1)], TASKS["stsb"], 8)
    assert scores.labels is not None and scores.labels.dtype == np.float32
    assert scores.labels.tolist() == [3.5, 1.0]
    unlabeled = encode(tok, [Example("u", "good", None, None)], TASKS["sst2"], 8)
    assert unlabeled.labels is None and len(unlabeled) == 1
    empty = encode(tok, [], TASKS["sst2"], 8)
    assert empty.labels is None and len(empty) == 0


def test_batches_go_to_the_device_asked_for() -> None:
    meta = torch.device("meta")  # a second device on a CPU-only machine
    data = EncodedExamples([[2, 7, 3], [2, 3]], [[0, 0, 0], [0, 0]], None)
    assert {t.device for t in data.batch(np.array([0, 1]), 0, meta).values()} == {meta}


def test_dev_sets_are_cut_as_the_recipe_says(tmp_path: Path, glue: Path) -> None:
    model = _model_dir(tmp_path, "m", WORDS)
    tok = load_tokenizer(model)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    dev = read_glue(TASKS["rte"], glue, "dev")
    got = {}
    for recipe in ("official", "hf"):
        got[recipe] = classifier_trainer(model, glue, tmp_path / recipe, max_seq_len=8, recipe=recipe)
    for i, ex in enumerate(dev):
        a = tok.encode(ex.text, add_special_tokens=False).ids
        b = tok.encode(ex.text_pair, add_special_tokens=False).ids
        official_truncate_seq_pair(a, b, 8 - 3)
        assert got["official"].dev_data["dev"].ids[i] == [cls, *a, sep, *b, sep]
        tok.enable_truncation(max_length=8, strategy="longest_first")  # transformers' truncation=True
        assert got["hf"].dev_data["dev"].ids[i] == tok.encode(ex.text, ex.text_pair).ids
        tok.no_truncation()
    assert got["official"].dev_data["dev"].ids != got["hf"].dev_data["dev"].ids


# ----------------------------------------------------------------------------------------------------------
# Devices and precision
# ----------------------------------------------------------------------------------------------------------


class _Stop(Exception):
    pass


@pytest.mark.parametrize("kind", ["classifier", "tagger"])
def test_the_trainer_moves_the_model_and_every_batch_to_its_device(
    tmp_path: Path, glue: Path, kind: str
) -> None:
    """The CPU is the only real device here; torch's "meta" device stands in for a GPU: a tensor left on
    the CPU next to a meta model makes the forward or the loss raise."""
    if kind == "classifier":
        t: FinetuneTrainer = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o")
    else:
        t = tagger_trainer(_model_dir(tmp_path, "m", TAG_WORDS), tmp_path)
    meta = torch.device("meta")
    t.device = meta
    t.setup(1)
    assert {p.device for p in t.model.parameters()} == {meta}
    assert t.batch_loss(np.arange(4)).device == meta
    seen: list[torch.device] = []

    def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
        seen.extend(v.device for v in [*args, *kwargs.values()] if isinstance(v, torch.Tensor))
        raise _Stop  # a meta forward has no numbers to score

    t.model.register_forward_pre_hook(hook, with_kwargs=True)
    with pytest.raises(_Stop):
        t.evaluate()
    assert seen and set(seen) == {meta}


def test_the_device_and_precision_asked_for_are_the_ones_used(
    tmp_path: Path, glue: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model_dir(tmp_path, "m", WORDS)
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine: --device cpu still means the CPU
        t = classifier_trainer(model, glue, tmp_path / "o", device="cpu", precision="bf16")
    assert t.device == torch.device("cpu")
    with t.autocast:
        product = torch.ones(2, 2) @ torch.ones(2, 2)
    assert product.dtype == torch.bfloat16


@pytest.mark.parametrize(("kind", "recipe"), [("classifier", "official"), ("classifier", "hf"),
                                              ("tagger", "official"), ("tagger", "hf")])  # fmt: skip
def test_every_parameter_gets_a_gradient_from_every_batch(
    tmp_path: Path, glue: Path, kind: str, recipe: str
) -> None:
    """So `zero_grad(set_to_none=True)` and zeroing give the same next gradient (see the list below)."""
    if kind == "classifier":
        t: FinetuneTrainer = classifier_trainer(
            _model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", recipe=recipe
        )
    else:
        t = tagger_trainer(_model_dir(tmp_path, "m", TAG_WORDS), tmp_path, recipe=recipe)
    t.setup(1)
    t.batch_loss(np.arange(3)).backward()
    assert [n for n, p in t.model.named_parameters() if p.grad is None] == []


# ----------------------------------------------------------------------------------------------------------
# Data order, regression targets
# ----------------------------------------------------------------------------------------------------------


def test_each_epoch_takes_every_example_once_in_its_seeded_order(tmp_path: Path, glue: Path) -> None:
    t = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", batch_size=16)
    seen: list[np.ndarray] = []
    step = t.train_step
    t.train_step = lambda idx: (seen.append(idx.copy()), step(idx))[1]  # type: ignore[method-assign]
    t.setup(1)
    for epoch in (0, 1):
        t.train_epoch(7, epoch, None)
    assert [len(b) for b in seen] == [16, 16, 8] * 2
    # docs/finetuning.md: "a permutation per (seed, epoch)", whatever ran before.
    for epoch, batches in enumerate((seen[:3], seen[3:])):
        np.testing.assert_array_equal(
            np.concatenate(batches), np.random.default_rng([7, epoch]).permutation(40)
        )


@pytest.mark.parametrize("recipe", ["official", "hf"])
def test_regression_trains_on_the_official_label_scale_and_scores_on_the_labels_own(
    tmp_path: Path, glue: Path, monkeypatch: pytest.MonkeyPatch, recipe: str
) -> None:
    from electra.training.finetune import trainer as trainer_module

    # STS-B's range is (0, 5): with a zero minimum a wrong sign on it, or a scale applied the wrong way round,
    # leave Pearson and Spearman unchanged. Moved to (-1, 5) the official formula shows.
    monkeypatch.setitem(TASKS, "stsb", dataclasses.replace(TASKS["stsb"], label_range=(-1.0, 5.0)))
    model = _model_dir(tmp_path, "m", WORDS)
    cfg = FinetuneConfig(task="stsb", model=model, out=tmp_path / "o", data_dir=glue, progress=False,
                         recipe=recipe, double_unordered=False)  # fmt: skip
    t = FinetuneTrainer(cfg)
    scaled = recipe == "official"

    def scores(split: str) -> np.ndarray:
        rows = (glue / "STS-B" / f"{split}.tsv").read_text().splitlines()[1:]
        return np.asarray([float(r.split("\t")[-1]) for r in rows], dtype=np.float32)

    # classification_tasks.py RegressionTask: label = (label - min_value) / max_value.
    want = (scores("train") + 1.0) / 5.0 if scaled else scores("train")
    np.testing.assert_allclose(t.train_data.labels, want, rtol=1e-6)
    np.testing.assert_allclose(t.dev_data["dev"].labels, scores("dev"), rtol=1e-6)  # dev stays as read
    t.setup(1)
    t.model.eval()

    def outputs(data: EncodedExamples, idx: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return torch.stack([t.model(**data.batch(np.array([i]), t.pad_id, t.device))[0, 0] for i in idx])

    idx = np.arange(7)
    squared = (outputs(t.train_data, idx) - torch.from_numpy(want[idx])) ** 2
    expected = squared.sum() if scaled else squared.mean()  # official: tf.reduce_sum over the batch
    assert t.batch_loss(idx).item() == pytest.approx(expected.item(), rel=1e-5)

    seen: list[np.ndarray] = []
    real_score = trainer_module.score
    monkeypatch.setattr(
        trainer_module,
        "score",
        lambda task, logits, labels, groups=None: (
            seen.append(logits) or real_score(task, logits, labels, groups)
        ),
    )
    t.evaluate()
    dev = t.dev_data["dev"]
    raw = outputs(dev, np.arange(len(dev))).numpy()
    np.testing.assert_allclose(seen[0][:, 0], raw * 5.0 - 1.0 if scaled else raw, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------------------------------
# A whole run: seeds, the best seed, eval_results.json, the saved model, the progress bar
# ----------------------------------------------------------------------------------------------------------


class _FakeBar:
    """Stands in for electra.progress.progress: records what the trainer shows."""

    def __init__(self, total: int, desc: str, unit: str) -> None:
        self.total, self.desc, self.unit, self.n, self.closed = total, desc, unit, 0, False
        self.postfix: list[tuple[int, dict[str, object]]] = []

    def update(self, k: int) -> None:
        self.n += k

    def set_postfix(self, refresh: bool = True, **kw: object) -> None:
        self.postfix.append((self.n, kw))

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def bars(monkeypatch: pytest.MonkeyPatch) -> list[_FakeBar]:
    from electra.training.finetune import trainer as trainer_module

    made: list[_FakeBar] = []
    monkeypatch.setattr(trainer_module, "progress", lambda **kw: made.append(_FakeBar(**kw)) or made[-1])
    return made


def test_run_reports_every_seed_and_saves_the_best_ones_model(
    tmp_path: Path, glue: Path, monkeypatch: pytest.MonkeyPatch, bars: list[_FakeBar]
) -> None:
    from safetensors.torch import load_file

    model, out = _model_dir(tmp_path, "m", WORDS), tmp_path / "o"
    seeds = [3, 1, 2, 4, 5]
    nan = float("nan")
    # (accuracy, f1) on dev after epochs 1 and 2. Seed 3 has no number (nan: diverged, say); seed 1 beats it;
    # seed 2 ties seed 1 and seed 4 is lower (neither replaces it); seed 5 is nan again.
    scripted = {
        3: [(0.9, 0.1), (nan, 0.5)],
        1: [(0.1, 0.2), (0.6, 0.3)],
        2: [(0.7, 0.3), (0.6, 0.9)],
        4: [(0.8, 0.4), (0.55, 0.7)],
        5: [(0.2, 0.5), (nan, 0.1)],
    }
    cfg = FinetuneConfig(task="rte", model=model, out=out, data_dir=glue, epochs=2, seeds=seeds)
    t = FinetuneTrainer(cfg)
    trained: dict[int, dict[str, torch.Tensor]] = {}
    calls: list[int] = []

    def evaluate() -> dict:
        seed, epoch = seeds[len(calls) // 2], len(calls) % 2
        calls.append(seed)
        if epoch == 1:
            trained[seed] = {k: v.detach().clone() for k, v in t.model.state_dict().items()}
        accuracy, f1 = scripted[seed][epoch]
        return {"dev": {"accuracy": accuracy, "f1": f1}}

    monkeypatch.setattr(t, "evaluate", evaluate)
    started = time.perf_counter()
    summary = t.run()
    wall = time.perf_counter() - started

    text = (out / "eval_results.json").read_text()
    saved = json.loads(text)
    assert text == json.dumps(saved, indent=2) + "\n"
    assert json.dumps(summary) == json.dumps(saved)
    assert (saved["task"], saved["model"], saved["seeds"]) == ("rte", str(model), seeds)
    assert saved["selected_seed"] == 1
    assert list(saved["per_seed"]) == [str(s) for s in seeds]
    head = sorted(k for k in trained[1] if k.startswith("classifier."))
    for seed in seeds:
        entry = saved["per_seed"][str(seed)]
        epochs = [
            {"epoch": e + 1, "dev": {"accuracy": a, "f1": f}} for e, (a, f) in enumerate(scripted[seed])
        ]
        assert json.dumps(entry["epochs"]) == json.dumps(epochs)
        assert json.dumps(entry["final"]) == json.dumps(epochs[-1])
        assert entry["newly_initialized"] == head
    assert saved["median"]["dev"]["f1"] == statistics.median(scripted[s][-1][1] for s in seeds)
    assert (saved["train_examples"], saved["epochs"]) == (40, 2)
    assert 0 < saved["seconds"] <= wall
    config = saved["config"]
    assert (config["task"], config["model"], config["out"], config["seeds"]) == (
        "rte",
        str(model),
        str(out),
        seeds,
    )
    assert saved["recipe"] == dataclasses.asdict(RECIPES["official"])
    assert "labels" not in saved
    weights = load_file(out / "model.safetensors")
    assert all(torch.equal(weights[k], v) for k, v in trained[1].items())
    assert not torch.equal(weights["classifier.dense.weight"], trained[3]["classifier.dense.weight"])
    # One progress bar per seed, advanced once per optimizer step, closed at the end.
    steps = 2 * math.ceil(40 / 32)
    assert [(b.desc, b.unit, b.total, b.n, b.closed) for b in bars] == [
        (f"rte seed {s}", "step", steps, steps, True) for s in seeds
    ]
    t.cfg.progress = False  # --quiet
    assert t._progress_bar(1) is None


def test_a_seed_without_the_main_dev_metric_never_wins(tmp_path: Path, glue: Path) -> None:
    t = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o")
    t.model = nn.Linear(1, 1)
    t.keep_if_best(1, {"epoch": 1})  # no dev scores (an unlabeled dev split is not evaluated)
    t.keep_if_best(2, {"epoch": 1, "dev": {}})
    assert t.best is not None and t.best[1] == 1  # kept only because there is nothing else
    t.keep_if_best(3, {"epoch": 1, "dev": {"accuracy": 0.4}})
    t.keep_if_best(4, {"epoch": 1})
    t.keep_if_best(5, {"epoch": 1, "dev": {}})
    assert t.best[:2] == (0.4, 3)
    t.keep_if_best(6, {"epoch": 1, "dev": {"accuracy": 0.7}})
    assert t.best[:2] == (0.7, 6)


def test_the_progress_bar_shows_the_loss_every_ten_steps(
    tmp_path: Path, glue: Path, bars: list[_FakeBar]
) -> None:
    t = classifier_trainer(_model_dir(tmp_path, "m", WORDS), glue, tmp_path / "o", batch_size=2, epochs=1)
    losses: list[float] = []
    step = t.train_step
    t.train_step = lambda idx: losses.append(step(idx).item()) or torch.tensor(losses[-1])  # type: ignore[method-assign]
    t.setup(1)
    t.cfg.progress = True
    bar = t._progress_bar(1)
    t.train_epoch(1, 0, bar)
    assert (bar.n, len(losses)) == (20, 20)  # 40 examples, batch 2
    assert bar.postfix == [(10, {"loss": f"{losses[9]:.4f}"}), (20, {"loss": f"{losses[19]:.4f}"})]


def test_overwrite_replaces_an_existing_output_directory(tmp_path: Path, glue: Path) -> None:
    model, out = _model_dir(tmp_path, "m", WORDS), tmp_path / "o"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run\n")
    with pytest.raises(InputError, match="already exists"):
        classifier_trainer(model, glue, out, epochs=1)
    classifier_trainer(model, glue, out, epochs=1, overwrite=True).run()
    assert sorted(p.name for p in out.iterdir() if p.name == "stale.txt" or p.suffix == ".json")[:2] == [
        "config.json",
        "eval_results.json",
    ]
    assert not (out / "stale.txt").exists()


# ----------------------------------------------------------------------------------------------------------
# Taggers: where their data comes from, a whole run
# ----------------------------------------------------------------------------------------------------------


def test_a_conll2003_run_reads_its_splits_from_data_dir_and_saves_a_tagger(tmp_path: Path) -> None:
    data = tmp_path / "conll"
    data.mkdir()
    for split, seed, n in (("train", 1, 30), ("dev", 2, 8), ("test", 3, 8)):
        write_conll(data / f"{split}.txt", synthetic(n, seed))
    out = tmp_path / "ner"
    cfg = FinetuneConfig(
        task="conll2003", model=_model_dir(tmp_path, "m", TAG_WORDS), out=out, data_dir=data, epochs=1,
        progress=False,
    )  # fmt: skip
    t = TaggerTrainer(cfg)
    assert (t.task.name, t.task.dev_splits, t.scale) == ("conll2003", ("dev", "test"), None)
    t.run()
    saved = json.loads((out / "eval_results.json").read_text())
    assert saved["task"] == "conll2003" and sorted(saved["median"]) == ["dev", "test"]
    assert saved["labels"] == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]  # tag_set: O, then B-/I- by type
    assert json.loads((out / "config.json").read_text())["architectures"] == ["ElectraForTokenClassification"]


def test_custom_tag_files_are_read_in_the_column_and_scheme_given(tmp_path: Path) -> None:
    def write(path: Path, sentences: list[tuple[list[str], list[str]]]) -> Path:
        # The tag in column 1 of 3, in BIOES.
        blocks = [
            "\n".join(f"{w} {t} X" for w, t in zip(ws, to_bioes(ts), strict=True)) for ws, ts in sentences
        ]
        path.write_text("\n\n".join(blocks) + "\n")
        return path

    train, dev = synthetic(20, 1), synthetic(6, 2)
    cfg = FinetuneConfig(
        task="tags", model=_model_dir(tmp_path, "m", TAG_WORDS), out=tmp_path / "o",
        train=write(tmp_path / "train.txt", train), dev=write(tmp_path / "dev.txt", dev),
        tag_column=1, tag_scheme="bioes", progress=False,
    )  # fmt: skip
    t = TaggerTrainer(cfg)
    assert (t.task.name, t.task.scheme) == ("tags", "bioes")
    assert t.task.labels == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")
    assert [s.tags for s in t.dev_sentences["dev"]] == [tags for _, tags in dev]  # kept as IOB2


def test_the_taggers_padding_label_is_cross_entropys_default_ignore_index() -> None:
    import inspect

    assert IGNORE == -100 == inspect.signature(F.cross_entropy).parameters["ignore_index"].default


# ----------------------------------------------------------------------------------------------------------
# Mutants that cannot change a result (mutmut over the files in [tool.mutmut] only_mutate)
# ----------------------------------------------------------------------------------------------------------
#
# Every other mutant of electra/sizes.py, electra/training/optim.py and electra/training/finetune/ that the
# tests above and tests/test_recipes.py leave alive is listed here, with why no user-visible result (a
# learning rate, an update, a schedule value, a loss, an encoding, what is saved, the seed kept, the numbers
# in eval_results.json) can differ. Names as `mutmut show` gives them (numbering of mutmut 3.8).
#
# Equivalent rewrites (the mutant computes the same thing):
# * optim.adam 11, 27: the betas passed, (0.9, 0.999), are AdamWeightDecay's and torch AdamW's defaults.
# * optim._fused_available 8: `types < supported` differs from `<=` only if the one device type were the
#   whole supported set; torch lists seven (cpu, cuda, mps, xpu, ...).
# * optim.warmup_linear_decay 2: `warmup_steps >= 0`: with warmup 0, `step < 0` never holds for a step >= 0.
# * trainer._loss 8: on (batch, 1) regression logits, squeeze(1) is squeeze(-1).
# * trainer.keep_if_best 13: float("NAN") is nan, as float("nan") is.
# * encoding.encode 20: tokenizers' enable_truncation strategy defaults to "longest_first".
# * encoding.encode 44, 46: np.asarray of Python ints is int64 already (NumPy's default integer on Linux and
#   macOS, and everywhere since NumPy 2); the test above still checks the dtype.
# * encoding._encode_pairs_official 22, 25, 26: zip's strictness; both lists encode the same examples.
# * encoding._encode_pairs_official 42: tokenizers' post_process adds special tokens by default.
# * tag_trainer.batch_loss 20: IGNORE is -100, cross_entropy's default ignore_index (asserted above).
#
# No result depends on it:
# * layerwise.layerwise_groups 30, 32, 34, 36: the order of the optimizer's parameter groups. Each group
#   carries its own lr and weight decay, every update is per parameter, and the fine-tuner never saves
#   the optimizer's state (whose layout would follow the order).
# * tag_trainer.load_data 40: the dev sentences' label ids; a tagger's evaluation takes the gold tags from
#   the dev sentences themselves (dev_sentences), never from dev_data.labels.
# * trainer.train_step 8, 9: zero_grad(set_to_none=False/None) zeroes the gradients instead of freeing
#   them. Every parameter gets a gradient from every batch (test above), so the next gradient is the same
#   bit for bit; only memory differs.
# * trainer.run 14, 15, 16, 21 and trainer._describe 2-7, 9, 12, 13: the text of the per-seed log line
#   ("rte seed 1: dev accuracy 0.5000"), whose format is not documented; its numbers are in
#   eval_results.json, which the tests check.
