"""Fine-tuning recipes against the official ELECTRA code (google-research/electra), formula by formula.

Each check re-implements the official code independently (NumPy, or a literal port of the TF function) and
compares it with what the trainer actually builds, so a wrong rule, update or schedule fails here.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from electra.cli.main import main
from electra.config import ElectraConfig
from electra.errors import InputError
from electra.hf_format import load_hf_dir, load_hf_dir_with_report, save_hf_dir
from electra.model import ElectraClassifier, ElectraDiscriminator
from electra.training.finetune.config import FinetuneConfig
from electra.training.finetune.data import double_unordered
from electra.training.finetune.head import fold_target_scale
from electra.training.finetune.recipe import RECIPES, resolve_recipe
from electra.training.finetune.tasks import TASKS, Example, read_glue
from electra.training.finetune.trainer import FinetuneTrainer
from electra.training.optim import AdamWeightDecay, build_optimizer, build_scheduler

from .conftest import shared_path

# ------------------------------------------------------------------------------------------------------------
# The recipe table and its torch-free mirrors
# ------------------------------------------------------------------------------------------------------------


def test_torch_free_choice_lists_mirror_the_implementations() -> None:
    from electra import model
    from electra.training import optim
    from electra.training.finetune import recipe
    from electra.training.pretrain import config as pretrain_config

    assert recipe.ADAMS == optim.ADAMS == pretrain_config.ADAMS
    assert recipe.SCHEDULES == optim.SCHEDULES == tuple(optim.SCHEDULE_FACTORS) == pretrain_config.SCHEDULES
    assert recipe.CLASSIFIER_HEADS == model.CLASSIFIER_HEADS


def test_every_recipe_field_can_be_overridden_from_the_config() -> None:
    from electra.training.finetune.recipe import OVERRIDABLE

    fields = FinetuneConfig.__dataclass_fields__
    assert all(name in fields and fields[name].default is None for name in OVERRIDABLE)
    cfg = FinetuneConfig(
        task="rte", model=Path("m"), out=Path("o"), recipe="official", head="hf", adam_eps=1e-8
    )
    r = cfg.resolved_recipe()
    assert (r.head, r.adam_eps, r.adam, r.schedule) == ("hf", 1e-8, "official", "official")


def test_the_three_recipes_differ_only_where_documented() -> None:
    official, intended, hf = RECIPES["official"], RECIPES["intended"], RECIPES["hf"]
    assert FinetuneConfig(task="rte", model=Path("m"), out=Path("o")).recipe == "official"
    diff = {k for k, v in official.describe().items() if intended.describe()[k] != v}
    assert diff == {"name", "layerwise_rule"}
    assert (official.adam, official.adam_eps, official.weight_decay) == ("official", 1e-6, 0.01)
    assert (official.head, official.head_init, official.loss_reduction) == ("linear", "glorot", "sum")
    assert official.double_unordered and official.normalize_regression_labels
    assert (official.lr_table, official.pair_truncation) == ("code", "official")
    assert (hf.lr_table, hf.pair_truncation) == ("code", "longest_first")  # same lr: A/Bs compare recipes
    assert (hf.adam, hf.adam_eps, hf.weight_decay, hf.layerwise_lr_decay) == ("torch", 1e-8, 0.0, 1.0)
    assert (hf.head, hf.head_init, hf.loss_reduction, hf.schedule) == ("hf", "normal", "mean", "hf")
    assert not hf.double_unordered and not hf.normalize_regression_labels


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("head", "mlp", "--head"),
        ("adam_eps", 0.0, "--adam-eps"),
        ("layerwise_lr_decay", 1.5, "(0, 1]"),
        ("lr_table", "table7", "--lr-table"),
        ("pair_truncation", "shortest", "--pair-truncation"),
    ],
)
def test_bad_overrides_are_input_errors(field: str, value: object, needle: str) -> None:
    with pytest.raises(InputError) as e:
        resolve_recipe("official", {field: value})
    assert needle in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="--recipe"):
        resolve_recipe("paper", {})


# ------------------------------------------------------------------------------------------------------------
# Layer-wise learning rates: model/optimization.py _get_layer_lrs, ported literally
# ------------------------------------------------------------------------------------------------------------


def official_get_layer_lrs(learning_rate: float, layer_decay: float, n_layers: int) -> dict[str, float]:
    key_to_depths = collections.OrderedDict(
        {"/embeddings/": 0, "/embeddings_project/": 0, "task_specific/": n_layers + 2}
    )
    for layer in range(n_layers):
        key_to_depths["encoder/layer_" + str(layer) + "/"] = layer + 1
    return {
        key: learning_rate * (layer_decay ** (n_layers + 2 - depth)) for key, depth in key_to_depths.items()
    }


def tf_variable_name(name: str) -> str:
    """Our (HF) parameter name as the official TF variable it corresponds to."""
    if name.startswith("classifier."):
        return "task_specific/rte/" + name.removeprefix("classifier.").replace(".", "/")
    parts = name.split(".")
    if parts[:3] == ["electra", "encoder", "layer"]:
        parts = ["electra", "encoder", f"layer_{parts[3]}", *parts[4:]]
    return "/".join(parts)


def official_lr(name: str, lrs: dict[str, float]) -> float:
    """AdamWeightDecayOptimizer.apply_gradients: the learning rate of the key contained in the name."""
    hits = [lr for key, lr in lrs.items() if key in tf_variable_name(name)]
    assert len(hits) == 1, (name, tf_variable_name(name))  # the official code applies each match
    return hits[0]


def intended_lr(name: str, lr: float, decay: float, n: int) -> float:
    """electra issue #51: head lr, top layer decay^1, ..., layer 0 decay^n, embeddings decay^(n+1)."""
    if name.startswith("classifier."):
        return lr
    if name.startswith("electra.encoder.layer."):
        return lr * decay ** (n - int(name.split(".")[3]))
    return lr * decay ** (n + 1)


def trainer_lrs(model: nn.Module, lr: float, decay: float, rule: str) -> dict[str, float]:
    from electra.training.finetune.layerwise import layerwise_groups

    groups = layerwise_groups(model, lr, decay, 0.01, rule)
    by_id = {id(p): g["lr"] for g in groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert sorted(by_id) == sorted(id(p) for p in named.values()), "every parameter in exactly one group"
    return {name: by_id[id(p)] for name, p in named.items()}


@pytest.mark.parametrize(("layers", "decay"), [(12, 0.8), (24, 0.9)])  # Small/Base depth; Large depth
@pytest.mark.parametrize("head", ["linear", "hf"])
def test_layer_lrs_equal_the_official_and_the_intended_formula(layers: int, decay: float, head: str) -> None:
    # Narrow but of the paper's depth; embedding_size != hidden_size puts embeddings_project in the model.
    cfg = ElectraConfig(vocab_size=30, embedding_size=16, hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=64, num_labels=2)  # fmt: skip
    model = ElectraClassifier(cfg, head=head)
    lr = 3e-4
    official = official_get_layer_lrs(lr, decay, layers)
    for name, got in trainer_lrs(model, lr, decay, "official").items():
        assert got == pytest.approx(official_lr(name, official), rel=1e-12), name
    for name, got in trainer_lrs(model, lr, decay, "intended").items():
        assert got == pytest.approx(intended_lr(name, lr, decay, layers), rel=1e-12), name
    # The two rules differ by exactly one factor of decay below the head.
    top = f"electra.encoder.layer.{layers - 1}.output.dense.weight"
    assert trainer_lrs(model, lr, decay, "official")[top] == pytest.approx(lr * decay**2)
    assert trainer_lrs(model, lr, decay, "intended")[top] == pytest.approx(lr * decay)


# ------------------------------------------------------------------------------------------------------------
# The optimizer step: AdamWeightDecayOptimizer._apply_gradients in NumPy
# ------------------------------------------------------------------------------------------------------------


def numpy_official_step(p, g, m, v, lr, wd, decays, b1=0.9, b2=0.999, eps=1e-6):
    next_m = b1 * m + (1.0 - b1) * g
    next_v = b2 * v + (1.0 - b2) * np.square(g)
    update = next_m / (np.sqrt(next_v) + eps)
    if wd > 0 and decays:
        update += wd * p
    return p - lr * update, next_m, next_v


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Linear(7, 5)
        self.LayerNorm = nn.LayerNorm(5)


def test_official_adam_step_equals_numpy_on_random_tensors() -> None:
    torch.manual_seed(0)
    block = _Block()
    with torch.no_grad():
        for p in block.parameters():
            p.normal_()
    opt = build_optimizer(block, lr=1e-3, weight_decay=0.01, kind="official")
    assert isinstance(opt, AdamWeightDecay)
    ref = {n: (p.detach().double().numpy().copy(), 0.0, 0.0) for n, p in block.named_parameters()}
    rng = np.random.default_rng(1)
    for _ in range(4):
        grads = {n: rng.standard_normal(p.shape) for n, p in block.named_parameters()}
        for n, p in block.named_parameters():
            p.grad = torch.from_numpy(grads[n]).float()
        opt.step()
        for n in ref:
            decays = n == "dense.weight"  # biases and LayerNorm are excluded
            ref[n] = numpy_official_step(*ref[n][:1], grads[n], *ref[n][1:], lr=1e-3, wd=0.01, decays=decays)
    for n, p in block.named_parameters():
        np.testing.assert_allclose(p.detach().double().numpy(), ref[n][0], rtol=1e-5, atol=1e-6, err_msg=n)


def test_without_bias_correction_the_first_step_is_larger_than_adamw() -> None:
    """(1 - b1^t) / sqrt(1 - b2^t) = 0.1 / sqrt(0.001) = 3.16 at step 1: the uncorrected step is larger."""
    steps = {}
    for kind in ("official", "torch"):
        p = nn.Parameter(torch.zeros(3))
        opt = build_optimizer(nn.ParameterList([p]), lr=1.0, weight_decay=0.0, eps=1e-12, kind=kind)
        p.grad = torch.tensor([1.0, -2.0, 0.5])
        opt.step()
        steps[kind] = p.detach().abs()
    torch.testing.assert_close(steps["official"] / steps["torch"], torch.full((3,), 0.1 / math.sqrt(0.001)))


# ------------------------------------------------------------------------------------------------------------
# The schedule: create_optimizer's polynomial_decay x warmup ramp
# ------------------------------------------------------------------------------------------------------------


def official_lr_at(step: int, peak: float, total: int, warmup_proportion: float) -> float:
    warmup_steps = total * warmup_proportion  # max(num_train_steps * warmup_proportion, 0), a float
    return peak * (1 - min(step, total) / total) * min(1.0, step / warmup_steps)


def hf_lr_at(step: int, peak: float, total: int, warmup_ratio: float) -> float:
    warmup = math.ceil(total * warmup_ratio)  # TrainingArguments.get_warmup_steps
    if step < warmup:  # get_linear_schedule_with_warmup
        return peak * step / max(1, warmup)
    return peak * max(0.0, (total - step) / max(1, total - warmup))


def lrs_of_a_run(schedule: str, total: int, warmup: float) -> list[float]:
    p = nn.Parameter(torch.zeros(1))
    opt = AdamWeightDecay([p], lr=2e-4)
    sched = build_scheduler(opt, warmup, total, schedule)
    used = []
    for _ in range(total):
        used.append(opt.param_groups[0]["lr"])  # the rate of this step's update
        p.grad = torch.ones(1)
        opt.step()
        sched.step()
    return used


@pytest.mark.parametrize("total", [37, 50])
def test_schedules_equal_the_official_and_hf_formulas_at_every_step(total: int) -> None:
    from electra.training.optim import warmup_steps_for

    official = lrs_of_a_run("official", total, warmup_steps_for("official", 0.1, total))
    assert official == pytest.approx([official_lr_at(s, 2e-4, total, 0.1) for s in range(total)], abs=1e-15)
    hf = lrs_of_a_run("hf", total, warmup_steps_for("hf", 0.1, total))
    assert hf == pytest.approx([hf_lr_at(s, 2e-4, total, 0.1) for s in range(total)], abs=1e-15)
    # Between warmup and the end the HF shape is higher, by at most T / (T - W) (1.11x at W = 10% of T).
    ratio = max(h / o for h, o in zip(hf, official, strict=True) if o > 0)
    assert 1.0 < ratio <= total / (total - math.ceil(0.1 * total)) + 1e-9


# ------------------------------------------------------------------------------------------------------------
# The trainer builds what the recipe says (a tiny model, generated GLUE-shaped files)
# ------------------------------------------------------------------------------------------------------------

WORDS = ["good", "bad", "the", "movie", "was", "plot", "and", "very", "a", "cat", "dog", "sat"]


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    from electra.tokenizer import load_tokenizer, save_tokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS]) + "\n")
    tok = load_tokenizer(vocab)
    out = tmp_path / "disc"
    torch.manual_seed(0)
    save_hf_dir(ElectraDiscriminator(ElectraConfig.from_size("tiny", vocab_size=tok.get_vocab_size())), out)
    save_tokenizer(tok, out)
    return out


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(2, 6))) + " ."


def write_glue(root: Path, n: int = 20) -> Path:
    """MRPC, STS-B and RTE train/dev files in the GLUE layout, n rows each."""
    rng = random.Random(0)
    layouts = {
        "MRPC": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", lambda a, b, y: f"{y}\t1\t2\t{a}\t{b}"),
        "STS-B": (
            "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
            lambda a, b, y: f"0\tg\tf\t2012\t0\ts\ts\t{a}\t{b}\t{y * 4.5:.1f}",
        ),
        "RTE": (
            "index\tsentence1\tsentence2\tlabel",
            lambda a, b, y: f"0\t{a}\t{b}\t{'entailment' if y else 'not_entailment'}",
        ),
    }
    for task, (header, row) in layouts.items():
        (root / task).mkdir(parents=True)
        for split in ("train", "dev"):
            lines = [header] + [row(_sentence(rng), _sentence(rng), rng.randint(0, 1)) for _ in range(n)]
            (root / task / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


def trainer(tiny_model: Path, tmp_path: Path, task: str, **kw: object) -> FinetuneTrainer:
    glue = tmp_path / "glue"
    if not glue.exists():
        write_glue(glue)
    cfg = FinetuneConfig(task=task, model=tiny_model, out=tmp_path / f"out-{task}", data_dir=glue,
                         progress=False, **kw)  # fmt: skip
    return FinetuneTrainer(cfg)


@pytest.mark.parametrize(("task", "doubled"), [("mrpc", True), ("stsb", True), ("rte", False)])
def test_double_unordered_doubles_mrpc_and_stsb_with_swapped_segments(
    tiny_model: Path, tmp_path: Path, task: str, doubled: bool
) -> None:
    t = trainer(tiny_model, tmp_path, task)
    n = 20
    assert len(t.train_data) == (2 * n if doubled else n)
    for dev in t.dev_data.values():
        assert len(dev) == n  # dev sets are never doubled
    if doubled:
        for i in range(n):
            a, b = _segments(t.train_data.ids[i], t.train_data.type_ids[i])
            assert (b, a) == _segments(t.train_data.ids[n + i], t.train_data.type_ids[n + i])
        np.testing.assert_array_equal(t.train_data.labels[:n], t.train_data.labels[n:])
    off = trainer(tiny_model, tmp_path, task, recipe="hf")
    assert len(off.train_data) == n
    assert len(trainer(tiny_model, tmp_path, task, double_unordered=False).train_data) == n


def _segments(ids: list[int], types: list[int]) -> tuple[list[int], list[int]]:
    """The two texts of [CLS] a [SEP] b [SEP], without the special tokens."""
    a = [i for i, t in zip(ids, types, strict=True) if t == 0][1:-1]
    b = [i for i, t in zip(ids, types, strict=True) if t == 1][:-1]
    return a, b


def test_double_unordered_leaves_single_text_and_other_tasks_alone() -> None:
    ex = [Example("1", "a b", "c", "1"), Example("2", "d", "e f", "0")]
    assert double_unordered(TASKS["rte"], ex) == ex
    assert double_unordered(TASKS["mrpc"], ex)[2:] == [
        Example("1-swapped", "c", "a b", "1"),
        Example("2-swapped", "e f", "d", "0"),
    ]


def test_real_mrpc_and_stsb_train_sets_double(tmp_path: Path) -> None:
    glue = shared_path("glue")
    for task in ("mrpc", "stsb"):
        train = read_glue(TASKS[task], glue, "train")
        doubled = double_unordered(TASKS[task], train)
        assert len(doubled) == 2 * len(train)
        assert all(
            s.text == e.text_pair and s.text_pair == e.text
            for e, s in zip(train, doubled[len(train) :], strict=True)
        )


def test_trainer_builds_the_recipes_optimizer_schedule_and_head(tiny_model: Path, tmp_path: Path) -> None:
    t = trainer(tiny_model, tmp_path, "rte")
    t.setup(1)
    assert isinstance(t.optimizer, AdamWeightDecay)
    assert isinstance(t.model, ElectraClassifier) and t.model.head == "linear"
    decayed = {g["weight_decay"] for g in t.optimizer.param_groups}
    assert decayed == {0.0, 0.01} and {g["eps"] for g in t.optimizer.param_groups} == {1e-6}
    factor = t.scheduler.lr_lambdas[0]
    for step in range(t.total_steps):
        assert factor(step) == pytest.approx(official_lr_at(step, 1.0, t.total_steps, 0.1), abs=1e-15)
    # Glorot-uniform head: |w| <= sqrt(6 / (fan_in + fan_out)), far wider than N(0, 0.02).
    w = t.model.classifier.dense.weight
    bound = math.sqrt(6 / sum(w.shape))
    assert w.abs().max() <= bound and w.std() > 0.3 * bound and not t.model.classifier.dense.bias.any()

    h = trainer(tiny_model, tmp_path, "rte", recipe="hf")
    h.setup(1)
    assert type(h.optimizer) is torch.optim.AdamW and h.model.head == "hf"
    assert {g["eps"] for g in h.optimizer.param_groups} == {1e-8}
    assert {g["initial_lr"] for g in h.optimizer.param_groups} == {1e-4}  # no layer-wise decay
    assert h.model.classifier.out_proj.weight.std() < 0.03  # N(0, 0.02)


def test_sum_loss_is_batch_size_times_the_mean() -> None:
    from electra.training.finetune.trainer import _loss

    logits, labels = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    assert _loss(logits, labels, False, "sum") == pytest.approx(
        6 * _loss(logits, labels, False, "mean").item()
    )


def test_stsb_trains_on_score_over_5_and_saves_a_model_on_the_0_to_5_scale(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from electra.training.finetune import trainer as trainer_module
    from electra.training.finetune.evaluate import evaluate_model
    from electra.training.finetune.inference import predict_logits
    from electra.training.finetune.model_dir import load_classifier

    t = trainer(tiny_model, tmp_path, "stsb", epochs=1)
    unscaled = trainer(tiny_model, tmp_path, "stsb", normalize_regression_labels=False)
    np.testing.assert_allclose(t.train_data.labels * 5, unscaled.train_data.labels, rtol=1e-6)
    assert t.train_data.labels.max() <= 1.0 < unscaled.train_data.labels.max()

    def predict(model: nn.Module) -> np.ndarray:
        return predict_logits(
            model, t.dev_data["dev"], t.pad_id, torch.device("cpu"), contextlib.nullcontext()
        )

    trained: list[np.ndarray] = []  # the model's outputs as trained, on the 0..1 scale

    def spy(model: ElectraClassifier, scale: tuple[float, float]) -> None:
        trained.append(predict(model))
        fold(model, scale)

    fold = trainer_module.fold_target_scale
    monkeypatch.setattr(trainer_module, "fold_target_scale", spy)
    summary = t.run()
    saved = predict(load_classifier(t.cfg.out, "stsb", "cpu").model)
    np.testing.assert_allclose(saved, trained[0] * 5.0, rtol=1e-5, atol=1e-5)
    again = evaluate_model(t.cfg.out, "stsb", data_dir=tmp_path / "glue", device="cpu")
    # Folding the scale into the last layer moves outputs by float rounding; a tiny model's outputs vary
    # little, so its Pearson moves by up to ~1e-5 (the outputs themselves are compared tightly above).
    assert again["dev"]["pearson"] == pytest.approx(summary["median"]["dev"]["pearson"], abs=1e-4)


def test_folding_the_target_scale_is_exact() -> None:
    torch.manual_seed(0)
    model = ElectraClassifier(
        ElectraConfig.from_size("tiny", vocab_size=20, num_labels=1), head="linear"
    ).eval()
    ids = torch.randint(5, 20, (3, 7))
    with torch.no_grad():
        before = model(ids)
        fold_target_scale(model, (1.0, 5.0))
        torch.testing.assert_close(model(ids), before * 5.0 + 1.0)


# ------------------------------------------------------------------------------------------------------------
# The linear head on disk: our loader, transformers, old directories
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("labels", [{0: "no", 1: "yes"}, {0: "score"}])
def test_linear_head_round_trips_and_runs_in_transformers_with_its_remote_code(
    tmp_path: Path, hf_remote_code: Path, labels: dict[int, str]
) -> None:
    torch.manual_seed(0)
    problem = "regression" if len(labels) == 1 else None
    cfg = ElectraConfig.from_size("tiny", vocab_size=40, id2label=labels, problem_type=problem)
    model = ElectraClassifier(cfg, head="linear").eval()
    if problem:
        fold_target_scale(model, (0.0, 5.0))  # as STS-B is saved
    out = save_hf_dir(model, tmp_path / "linear")
    config = json.loads((out / "config.json").read_text())
    assert config["classifier_head"] == "linear"
    assert config["auto_map"] == {
        "AutoConfig": "modeling_electra_linear.ElectraLinearConfig",
        "AutoModelForSequenceClassification": "modeling_electra_linear.ElectraForSequenceClassification",
    }
    assert config["model_type"] == "electra_linear"  # so transformers asks for trust_remote_code
    again = load_hf_dir(out)
    assert isinstance(again, ElectraClassifier) and again.head == "linear"
    ids = torch.randint(5, 40, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        torch.testing.assert_close(again(ids, mask), model(ids, mask), atol=0, rtol=0)
    import transformers

    # transformers' own class never loads it with a random head ...
    with pytest.raises(RuntimeError, match="size mismatch"):
        transformers.ElectraForSequenceClassification.from_pretrained(out)
    # ... and its Auto class, trusting the remote code saved with it, gives our logits.
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(out, trust_remote_code=True).eval()
    assert hf.config.problem_type == problem
    with torch.no_grad():
        torch.testing.assert_close(
            hf(input_ids=ids, attention_mask=mask).logits, model(ids, mask), atol=1e-5, rtol=0
        )


def test_a_config_without_classifier_head_has_the_hf_head(tmp_path: Path) -> None:
    model = ElectraClassifier(ElectraConfig.from_size("tiny", vocab_size=40))
    out = save_hf_dir(model, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    assert config.pop("classifier_head") == "hf"
    (out / "config.json").write_text(json.dumps(config))
    assert load_hf_dir(out).head == "hf"
    legacy = Path(__file__).parent / "fixtures" / "legacy-0.1" / "classifier"
    assert "classifier_head" not in json.loads((legacy / "config.json").read_text())
    assert load_hf_dir(legacy).head == "hf"


def test_an_unknown_head_is_a_one_line_input_error(tmp_path: Path) -> None:
    out = save_hf_dir(ElectraClassifier(ElectraConfig.from_size("tiny", vocab_size=40)), tmp_path / "m")
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "classifier_head": "mlp"}))
    with pytest.raises(InputError, match="classifier_head 'mlp' is not one of hf, linear") as e:
        load_hf_dir(out)
    assert "\n" not in str(e.value)


def test_asking_for_the_other_head_never_reuses_the_files_head_weights(tmp_path: Path) -> None:
    cfg = ElectraConfig.from_size("tiny", vocab_size=40, num_labels=64)  # linear dense (64, 64) == hf dense
    out = save_hf_dir(ElectraClassifier(cfg, head="linear"), tmp_path / "m")
    model, report = load_hf_dir_with_report(out, head="hf")
    assert model.head == "hf"
    assert report.newly_initialized == sorted(k for k in model.state_dict() if k.startswith("classifier."))


def test_cli_recipe_and_overrides(tiny_model: Path, tmp_path: Path, capsys) -> None:
    write_glue(tmp_path / "glue")
    base = ["finetune", "--task", "rte", "--data-dir", str(tmp_path / "glue"), "--model", str(tiny_model)]
    base += ["--epochs", "1", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "a"), "--recipe", "intended", "--head", "hf"]) == 0
    recipe = json.loads((tmp_path / "a" / "eval_results.json").read_text())["recipe"]
    assert recipe["name"] == "intended" and recipe["head"] == "hf" and recipe["adam"] == "official"
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "b"), "--weight-decay", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--weight-decay" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as e:
        main([*base, "--out", str(tmp_path / "c"), "--recipe", "paper"])
    assert e.value.code == 2
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_linear_head_with_as_many_labels_as_hidden_units_is_refused() -> None:
    from electra.training.finetune.head import check_head

    model = ElectraClassifier(ElectraConfig.from_size("tiny", vocab_size=40, num_labels=64), head="linear")
    with pytest.raises(InputError, match="--head hf"):
        check_head(model)


def test_each_size_fine_tunes_with_the_papers_layerwise_decay() -> None:
    # Table 7 of the paper: layer-wise decay 0.8 for Small and Base, 0.9 for Large (its 24 layers would leave
    # the embeddings at 0.8^25 = 0.4% of the top's learning rate).
    from electra.sizes import SIZES, finetune_recipe

    assert {name: SIZES[name].layerwise_lr_decay for name in ("small", "base", "large")} == {
        "small": 0.8,
        "base": 0.8,
        "large": 0.9,
    }
    assert finetune_recipe(SIZES["large"].hidden_size) == (5e-5, 0.9)
    assert finetune_recipe(SIZES["base"].hidden_size) == (1e-4, 0.8)


@pytest.mark.parametrize("head", ["linear", "hf"])
def test_the_classifier_heads_drop_out_the_cls_vector_while_training(head: str) -> None:
    # The official head is dropout on [CLS], then one dense layer (get_prediction_module); without the
    # dropout, training-mode logits would not depend on the dropout mask. Checked on the head alone, with the
    # encoder's output fixed, so nothing below it can supply the randomness.
    import torch

    cfg = ElectraConfig(vocab_size=30, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, num_labels=3,
                        hidden_dropout_prob=0.5)  # fmt: skip
    model = ElectraClassifier(cfg, head=head)
    states = torch.randn(4, 5, 32)
    model.classifier.train()
    torch.manual_seed(0)
    a = model.classifier(states)
    torch.manual_seed(1)
    b = model.classifier(states)
    assert not torch.allclose(a, b), "training-mode logits ignore the dropout mask"
    torch.manual_seed(0)
    assert torch.equal(a, model.classifier(states)), "the same mask gives the same logits"
    model.classifier.eval()
    assert torch.equal(model.classifier(states), model.classifier(states))
    if head == "linear":
        # Dropout then the dense layer and nothing else: with the mask undone, the dense layer alone.
        dense = model.classifier.dense
        assert torch.allclose(model.classifier(states), dense(states[:, 0]))
        assert [type(m).__name__ for m in model.classifier.children()] == ["Dropout", "Linear"]
        assert model.classifier.dropout.p == 0.5
