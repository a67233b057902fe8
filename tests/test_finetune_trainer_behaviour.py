"""What a real fine-tuning run does, step by step, against the official code's formulas.

tests/test_recipes.py checks that the recipe's pieces (optimizer, layer-wise rule, schedule) are the official
ones; these tests check that the trainer uses them: the learning rate every parameter receives at each step of
a `FinetuneTrainer`/`TaggerTrainer` run, the gradient clipping, the loss, the heads' forward, the lr table
and how a too-long pair is cut. Each expected value is computed here from the official code
(google-research/electra: `model/optimization.py`, `configure_finetuning.py`, `run_finetuning.py`,
`finetune/classification/classification_tasks.py`, `finetune/tagging/tagging_tasks.py`), not from ours.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from electra.config import ElectraConfig
from electra.hf_format import save_hf_dir
from electra.model import ElectraDiscriminator
from electra.sizes import SIZES, finetune_recipe
from electra.tokenizer import load_tokenizer, save_tokenizer
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.encoding import encode, truncated_pair_lengths
from electra.training.finetune.tag_trainer import TaggerTrainer
from electra.training.finetune.tasks import TASKS, Example
from electra.training.finetune.trainer import FinetuneTrainer

from .test_recipes import WORDS, official_lr_at, write_glue
from .test_tagging_finetune import synthetic, write_conll

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
