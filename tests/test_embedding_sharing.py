"""--embedding-sharing tied / gdes / none: where each loss's gradient goes, the fold-in, resume and --init."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from electra.cli.main import main
from electra.config import ElectraConfig, generator_config
from electra.errors import InputError
from electra.training.pretrain.embedding_sharing import (
    TABLES,
    DisentangledEmbeddings,
    plain_discriminator,
)
from electra.training.pretrain.models import ElectraPretrainer
from electra.training.pretrain.objective import ObjectiveConfig, SpecialTokens

from .conftest import prepare_tiny_data, tiny_pretrain_args

SPECIALS = SpecialTokens(pad=0, cls=2, sep=3, mask=4)
VOCAB = 60


def pair(sharing: str, seed: int = 0) -> ElectraPretrainer:
    torch.manual_seed(seed)
    disc = ElectraConfig.from_size(
        "tiny", vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    return ElectraPretrainer(disc, generator_config(disc), SPECIALS, ObjectiveConfig(), sharing)


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (4, 16), generator=g)
    ids[:, 0], ids[:, -1] = SPECIALS.cls, SPECIALS.sep
    ids[1, 10:] = SPECIALS.pad  # padding, so the pad row's gradient is exercised too
    types = torch.zeros_like(ids)
    types[:, 8:] = 1
    return {"input_ids": ids, "attention_mask": (ids != SPECIALS.pad).long(), "token_type_ids": types}


def tables(model: ElectraPretrainer) -> dict[str, torch.nn.Parameter]:
    """Each model's own table parameters (under tied the two are the same Parameters)."""
    d, g = model.discriminator.electra.embeddings, model.generator.electra.embeddings
    out = {}
    for name in TABLES:
        out[f"disc.{name}"] = getattr(d, name).weight
        out[f"gen.{name}"] = getattr(g, name).weight
    return out


def gradients(model: ElectraPretrainer, loss_name: str) -> dict[str, torch.Tensor | None]:
    """The gradient one loss alone sends to every table."""
    model.zero_grad(set_to_none=True)
    out = model(batch(), torch.Generator().manual_seed(1))
    getattr(out, loss_name).backward()
    return {k: None if p.grad is None else p.grad.clone() for k, p in tables(model).items()}


def reaches(grad: torch.Tensor | None) -> bool:
    return grad is not None and bool(grad.abs().sum() > 0)


# Which model's tables each loss must reach, and must not.
EXPECTED = {
    "tied": {"mlm_loss": {"gen", "disc"}, "disc_loss": {"gen", "disc"}},  # one block: both reach both
    "gdes": {"mlm_loss": {"gen"}, "disc_loss": {"disc"}},  # E_G by the MLM loss only, E_delta by RTD only
    "none": {"mlm_loss": {"gen"}, "disc_loss": {"disc"}},
}


@pytest.mark.parametrize("sharing", ["tied", "gdes", "none"])
@pytest.mark.parametrize("loss_name", ["mlm_loss", "disc_loss"])
def test_each_loss_reaches_the_tables_its_mode_allows(sharing: str, loss_name: str) -> None:
    model = pair(sharing)
    if sharing == "tied":
        assert model.discriminator.electra.embeddings is model.generator.electra.embeddings
    grads = gradients(model, loss_name)
    for key, grad in grads.items():
        owner = key.split(".")[0]
        assert reaches(grad) == (owner in EXPECTED[sharing][loss_name]), (sharing, loss_name, key)


def test_gdes_residual_gets_exactly_the_gradient_a_plain_table_would() -> None:
    """d(disc loss)/d(E_delta) is d(disc loss)/d(E) of a plain discriminator whose table E = E_G + E_delta,
    on the same corrupted input: the stop-gradient adds E_G as a constant, nothing else."""
    model = pair("gdes")
    emb = model.discriminator.electra.embeddings
    assert isinstance(emb, DisentangledEmbeddings)
    with torch.no_grad():
        for name in TABLES:  # a residual that is not zero, so a fold that forgot it would show
            getattr(emb, name).weight.normal_(0.0, 0.05)
            getattr(emb, name).weight[SPECIALS.pad if name == "word_embeddings" else 0].zero_()
    plain = plain_discriminator(model.discriminator)
    b = batch()
    ids, mask, types = b["input_ids"], b["attention_mask"], b["token_type_ids"]
    labels = (torch.rand(ids.shape, generator=torch.Generator().manual_seed(3)) < 0.15).float()
    losses = []
    for disc in (model.discriminator, plain):
        disc.zero_grad(set_to_none=True)
        logits = disc(ids, mask, types)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, weight=mask.float())
        loss.backward()
        losses.append(loss.detach())
    assert torch.allclose(losses[0], losses[1], atol=1e-6)
    for name in TABLES:
        torch.testing.assert_close(
            getattr(emb, name).weight.grad,
            getattr(plain.electra.embeddings, name).weight.grad,
            atol=1e-7,
            rtol=1e-5,
        )
        assert getattr(model.generator.electra.embeddings, name).weight.grad is None


def test_gdes_starts_where_tied_starts_and_folds_what_it_learned() -> None:
    model = pair("gdes")
    emb = model.discriminator.electra.embeddings
    assert all(not getattr(emb, name).weight.any() for name in TABLES)  # E_delta starts at zero
    b = batch()
    args = (b["input_ids"], b["attention_mask"], b["token_type_ids"])
    # With E_delta = 0 the discriminator sees the generator's tables: the tied pair's starting point.
    folded = plain_discriminator(model.discriminator)
    for name in TABLES:
        assert torch.equal(
            getattr(folded.electra.embeddings, name).weight,
            getattr(model.generator.electra.embeddings, name).weight,
        )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(3):
        opt.zero_grad()
        model(b, torch.Generator().manual_seed(step)).loss().backward()
        opt.step()
    assert emb.word_embeddings.weight.abs().sum() > 0
    model.eval()
    folded = plain_discriminator(model.discriminator).eval()
    assert isinstance(folded.electra.embeddings, torch.nn.Module)
    assert not isinstance(folded.electra.embeddings, DisentangledEmbeddings)
    with torch.no_grad():
        torch.testing.assert_close(folded(*args), model.discriminator(*args), atol=1e-6, rtol=1e-5)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_tiny_data(tmp_path_factory.mktemp("sharing-data"), n_docs=40)


def records(run: Path, split: str = "train") -> list[dict]:
    return [
        r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["split"] == split
    ]


def run_args(data: Path, out: Path, sharing: str, *extra: str) -> list[str]:
    common = ("--checkpoint-every", "100", "--eval-every", "100", "--quiet", "--embedding-sharing", sharing)
    return tiny_pretrain_args(data, out, *common, *extra)


@pytest.mark.parametrize("sharing", ["gdes", "none"])
def test_resume_continues_exactly_and_the_saved_discriminator_is_plain_electra(
    sharing: str, data_dir: Path, tmp_path: Path
) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(run_args(data_dir, straight, sharing, "--steps", "8")) == 0
    assert main(run_args(data_dir, split, sharing, "--steps", "8", "--stop-at", "4")) == 0
    assert main(run_args(data_dir, split, sharing, "--steps", "8", "--resume")) == 0
    for ra, rb in zip(records(straight), records(split), strict=True):
        for key in ("mlm_loss", "disc_loss", "grad_norm"):
            assert ra[key] == rb[key], (ra["step"], key)
    assert json.loads((straight / "run_config.json").read_text())["embedding_sharing"] == sharing

    import transformers

    from electra.training.pretrain.state.checkpoint import latest_checkpoint, load_checkpoint

    # The checkpoint keeps the generator's tables and the discriminator's own (E_delta under gdes) apart.
    ckpt = load_checkpoint(latest_checkpoint(straight))
    own = ckpt.tensors["discriminator.electra.embeddings.word_embeddings.weight"]
    gen_table = ckpt.tensors["generator.electra.embeddings.word_embeddings.weight"]
    hf = transformers.ElectraForPreTraining.from_pretrained(straight / "discriminator").eval()
    saved = hf.electra.embeddings.word_embeddings.weight.detach()
    torch.testing.assert_close(saved, own + gen_table if sharing == "gdes" else own)
    tok = transformers.AutoTokenizer.from_pretrained(straight / "discriminator")
    enc = tok(["doc1 word2 word3 .", "doc4 word5 ."], padding=True, return_tensors="pt")
    ours = pair_from_checkpoint(ckpt.tensors, sharing, hf.config.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(
            hf(**enc).logits,
            ours.discriminator(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]),
            atol=1e-5,
            rtol=1e-5,
        )


def pair_from_checkpoint(tensors: dict[str, torch.Tensor], sharing: str, vocab: int) -> ElectraPretrainer:
    """The training-time pair, rebuilt from a checkpoint's model tensors."""
    disc = ElectraConfig.from_size("tiny", vocab_size=vocab, max_position_embeddings=512, pad_token_id=0)
    model = ElectraPretrainer(disc, generator_config(disc), SPECIALS, ObjectiveConfig(), sharing)
    model.load_state_dict(tensors)
    return model.eval()


def test_resume_with_another_sharing_is_refused(data_dir: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(run_args(data_dir, run, "gdes", "--steps", "4", "--stop-at", "2")) == 0
    capsys.readouterr()
    assert main(run_args(data_dir, run, "tied", "--steps", "4", "--resume")) == 2
    assert "embedding_sharing=gdes, now tied" in capsys.readouterr().err


def test_init_from_a_gdes_run_keeps_both_models(data_dir: Path, tmp_path: Path) -> None:
    """--init of a gdes run's output: the generator gets its own tables back and the discriminator sees
    exactly the tables it was saved with (E_delta = loaded - E_G)."""
    import transformers

    first = tmp_path / "first"
    assert main(run_args(data_dir, first, "gdes", "--steps", "4")) == 0
    disc = transformers.ElectraForPreTraining.from_pretrained(first / "discriminator")
    gen = transformers.ElectraForMaskedLM.from_pretrained(first / "generator")
    for sharing in ("gdes", "none", "tied"):
        from electra.training.pretrain.config import PretrainConfig
        from electra.training.pretrain.trainer import PretrainTrainer

        cfg = PretrainConfig(
            data=data_dir,
            out=tmp_path / f"second-{sharing}",
            size="tiny",
            steps=1,
            batch_size=4,
            init=first,
            embedding_sharing=sharing,
            progress=False,
        )
        model = PretrainTrainer(cfg).model
        effective = plain_discriminator(model.discriminator).electra.embeddings
        gen_emb = model.generator.electra.embeddings
        for name in TABLES:
            torch.testing.assert_close(
                getattr(effective, name).weight, getattr(disc.electra.embeddings, name).weight
            )
            if sharing != "tied":
                torch.testing.assert_close(
                    getattr(gen_emb, name).weight, getattr(gen.electra.embeddings, name).weight
                )


def test_bad_embedding_sharing(data_dir: Path, tmp_path: Path, capsys) -> None:
    args = tiny_pretrain_args(data_dir, tmp_path / "run", "--steps", "1", "--quiet")
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--embedding-sharing", "shared"])
    assert exit_info.value.code == 2 and "invalid choice: 'shared'" in capsys.readouterr().err
    assert main([*args, "--embedding-sharing", "gdes", "--objective", "mlm"]) == 2
    err = capsys.readouterr().err
    assert "applies to --objective electra only" in err and err.count("\n") == 1


@pytest.mark.parametrize("sharing", ["tied", "gdes", "none"])
def test_generator_lr_scale_slows_only_what_the_generator_owns(sharing: str) -> None:
    from electra.training.pretrain.models import optimizer_groups

    model = pair(sharing)
    disc = {id(p) for p in model.discriminator.parameters()}
    owned = {id(p) for p in model.generator.parameters()} - disc
    groups = optimizer_groups(model, 1e-3, 0.01, 0.25)
    seen = [id(p) for g in groups for p in g["params"]]
    assert sorted(seen) == sorted({id(p) for p in model.parameters()})  # each Parameter exactly once
    for g in groups:
        lr = g.get("lr", 1e-3)
        for p in g["params"]:
            assert lr == (0.25e-3 if id(p) in owned else 1e-3)
        decayed = g["weight_decay"] > 0
        names = [n for n, q in model.named_parameters() if any(q is p for p in g["params"])]
        assert all(("LayerNorm" in n or n.endswith("bias")) != decayed for n in names)
    gen_table = model.generator.electra.embeddings.word_embeddings.weight
    # Under tied the one block is the discriminator's too, and learns at the full rate.
    assert (id(gen_table) in owned) == (sharing != "tied")
    # At 1 the groups are the two the optimizer always had, so checkpoints from before still load.
    plain = optimizer_groups(model, 1e-3, 0.01, 1.0)
    assert len(plain) == 2 and all("lr" not in g for g in plain)


@pytest.mark.parametrize("sharing", ["tied", "gdes", "none"])
def test_generator_lr_scope_layers_keeps_the_generators_embeddings_at_the_full_rate(sharing: str) -> None:
    from electra.training.pretrain.models import optimizer_groups

    model = pair(sharing)
    disc = {id(p) for p in model.discriminator.parameters()}
    embeddings = {id(p) for p in model.generator.electra.embeddings.parameters()}
    layers = {id(p) for p in model.generator.parameters()} - disc - embeddings
    groups = optimizer_groups(model, 1e-3, 0.01, 0.25, "layers")
    seen = [id(p) for g in groups for p in g["params"]]
    assert sorted(seen) == sorted({id(p) for p in model.parameters()})
    lr_of = {id(p): g.get("lr", 1e-3) for g in groups for p in g["params"]}
    assert layers and all(lr_of[i] == 0.25e-3 for i in layers)
    assert all(lr_of[i] == 1e-3 for i in embeddings | disc)
    # The generator's word table is DeBERTaV3's E_G under gdes: full rate, as its MLM loss alone trains it.
    assert lr_of[id(model.generator.electra.embeddings.word_embeddings.weight)] == 1e-3
    # A scope the config does not know is refused before any work.
    from electra.training.pretrain.config import PretrainConfig

    with pytest.raises(InputError, match="--generator-lr-scope 'head'"):
        PretrainConfig(data=Path("d"), out=Path("o"), size="tiny", generator_lr_scope="head").resolved()


def test_generator_lr_scale_in_a_run_follows_the_schedule_and_resumes_only_as_it_began(
    data_dir: Path, tmp_path: Path, capsys
) -> None:
    from electra.training.pretrain.config import PretrainConfig
    from electra.training.pretrain.trainer import PretrainTrainer

    cfg = PretrainConfig(
        data=data_dir,
        out=tmp_path / "run",
        size="tiny",
        steps=6,
        batch_size=8,
        lr=1e-3,
        embedding_sharing="gdes",
        generator_lr_scale=0.1,
        progress=False,
        eval_every=100,
        checkpoint_every=100,
    )
    trainer = PretrainTrainer(cfg)
    for _ in range(3):
        trainer.train_step()
    # The learning rates live in device tensors (optim.device_learning_rates).
    lrs = sorted({round(float(g["lr"]), 12) for g in trainer.optimizer.param_groups})
    full = float(trainer.scheduler.get_last_lr()[0])
    assert len(lrs) == 2 and lrs[1] == pytest.approx(full) and lrs[0] == pytest.approx(full * 0.1)
    run = tmp_path / "cli"
    args = run_args(data_dir, run, "gdes", "--steps", "4")
    assert main([*args, "--generator-lr-scale", "0.1", "--stop-at", "2"]) == 0
    capsys.readouterr()
    assert main([*args, "--resume"]) == 2
    assert "generator_lr_scale=0.1, now 1.0" in capsys.readouterr().err
    assert main([*args, "--generator-lr-scale", "0"]) == 2
    assert "--generator-lr-scale 0.0 must be in (0, 1]" in capsys.readouterr().err
