"""Our ELECTRA against transformers': same parameter names, same logits, interchangeable checkpoints."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch
import transformers
from torch import nn

from electra.config import ElectraConfig, generator_config
from electra.errors import InputError
from electra.hf_format import load_hf_dir, load_hf_dir_with_report, save_hf_dir
from electra.model import (
    ElectraClassifier,
    ElectraDiscriminator,
    ElectraGenerator,
    ElectraHeadModel,
    ElectraTagger,
    build_model,
)

HF_CLASSES = {
    "discriminator": transformers.ElectraForPreTraining,
    "generator": transformers.ElectraForMaskedLM,
    "classifier": transformers.ElectraForSequenceClassification,
    "tagger": transformers.ElectraForTokenClassification,
}
KINDS = list(HF_CLASSES)


def tiny(**overrides) -> ElectraConfig:
    # embedding_size 32 != hidden_size 64, so embeddings_project is exercised.
    return ElectraConfig.from_size(
        "tiny", vocab_size=99, max_position_embeddings=64, num_labels=3, **overrides
    )


CONFIGS = {"tiny": tiny(), "tied_width": tiny(embedding_size=64)}


def hf_model(kind: str, cfg: ElectraConfig) -> transformers.PreTrainedModel:
    """A transformers model with random, non-trivial weights (biases and LayerNorms perturbed too)."""
    cls = HF_CLASSES[kind]
    hf_cfg = transformers.ElectraConfig.from_dict(cfg.to_hf_dict(cls.__name__))
    model = cls(hf_cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def inputs(cfg: ElectraConfig, batch: int = 3, length: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, cfg.vocab_size, (batch, length), generator=g)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, 8:] = 0
    attention_mask[2, 5:] = 0
    input_ids[attention_mask == 0] = cfg.pad_token_id
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    token_type_ids[:, length // 2 :] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape
    return (a - b).abs().max().item()


@torch.no_grad()
def logits(model: nn.Module, x: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(**x)
    return out if isinstance(out, torch.Tensor) else out.logits


# ----- parity with transformers -----


@pytest.mark.parametrize("attn_impl", ["sdpa", "math"])
@pytest.mark.parametrize("cfg_name", list(CONFIGS))
@pytest.mark.parametrize("kind", KINDS)
def test_hf_parity(kind: str, cfg_name: str, attn_impl: str) -> None:
    torch.manual_seed(0)
    cfg = CONFIGS[cfg_name]
    hf = hf_model(kind, cfg)
    ours = build_model(kind, cfg.replace(attn_impl=attn_impl))
    ours.load_state_dict(hf.state_dict(), strict=True)
    assert set(ours.state_dict()) == set(hf.state_dict())
    ours.eval()
    x = inputs(cfg)
    assert max_diff(logits(ours, x), logits(hf, x)) < 1e-5


def test_attention_paths_agree_with_padding() -> None:
    torch.manual_seed(0)
    cfg = tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = ElectraDiscriminator(cfg)
    x = inputs(cfg)
    sdpa = model(**x)
    model.set_attention_impl("math")
    assert all(m.attn_impl == "math" for m in model.modules() if hasattr(m, "attn_impl"))
    assert max_diff(model(**x), sdpa) < 1e-5
    # Padding really is masked: changing padded tokens changes nothing at real positions.
    x2 = dict(x, input_ids=x["input_ids"].masked_fill(x["attention_mask"] == 0, 7))
    keep = x["attention_mask"].bool()
    assert max_diff(model(**x2)[keep], sdpa[keep]) < 1e-5


def test_sdpa_takes_a_boolean_mask_and_none_without_padding() -> None:
    """SDPA gets a boolean mask (no float mask to build), none for a batch without padding (its flash kernel
    may run); the CPU dropout path turns the boolean mask into the scores the additive mask gives."""
    from electra.model import attention_mask_for

    torch.manual_seed(0)
    cfg = tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    x = inputs(cfg)
    mask = attention_mask_for(x["attention_mask"], "sdpa", torch.float32)
    assert mask.dtype == torch.bool and mask.shape == (len(x["input_ids"]), 1, 1, x["input_ids"].shape[1])
    assert attention_mask_for(None, "sdpa", torch.float32) is None
    assert attention_mask_for(x["attention_mask"], "math", torch.float32).dtype == torch.float32
    model = ElectraDiscriminator(cfg)
    full = dict(x, attention_mask=torch.ones_like(x["attention_mask"]))
    assert max_diff(model(x["input_ids"], None, x["token_type_ids"]), model(**full)) < 1e-6
    # Training with attention dropout on the CPU runs the explicit graph: the same dropout draws over the
    # boolean mask's scores and the additive mask's give the same outputs.
    cfg = tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.3)
    model = ElectraDiscriminator(cfg).train()
    torch.manual_seed(1)
    boolean = model(**x)
    model.set_attention_impl("math")
    torch.manual_seed(1)
    assert max_diff(model(**x), boolean) < 1e-5


def test_legacy_buffers_accepted_by_load_state_dict() -> None:
    cfg = tiny()
    state = ElectraDiscriminator(cfg).state_dict()
    state["electra.embeddings.position_ids"] = torch.arange(cfg.max_position_embeddings)[None]
    state["electra.embeddings.token_type_ids"] = torch.zeros(1, cfg.max_position_embeddings, dtype=torch.long)
    ElectraDiscriminator(cfg).load_state_dict(state, strict=True)


def test_init_like_hf() -> None:
    torch.manual_seed(0)
    model = ElectraGenerator(tiny())
    emb = model.electra.embeddings
    assert torch.all(emb.word_embeddings.weight[0] == 0)  # padding row
    assert torch.all(emb.LayerNorm.weight == 1) and torch.all(emb.LayerNorm.bias == 0)
    q = model.electra.encoder.layer[0].attention.self.query
    assert torch.all(q.bias == 0) and 0.015 < q.weight.std().item() < 0.025
    assert torch.all(model.generator_lm_head.bias == 0)


# ----- Hugging Face directory format -----


@pytest.mark.parametrize("kind", KINDS)
def test_save_hf_dir_loads_in_transformers(kind: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    cfg = tiny(problem_type="single_label_classification") if kind == "classifier" else tiny()
    ours = build_model(kind, cfg).eval()
    out = save_hf_dir(ours, tmp_path / "m", extra_files={"tokenizer.json": b"{}"})
    assert (out / "tokenizer.json").read_bytes() == b"{}"
    hf, info = HF_CLASSES[kind].from_pretrained(out, output_loading_info=True)
    assert info["missing_keys"] in ([], set())
    assert info["unexpected_keys"] in ([], set())
    assert info["mismatched_keys"] in ([], set())
    hf.eval()
    x = inputs(cfg)
    assert max_diff(logits(hf, x), logits(ours, x)) < 1e-5
    if kind == "generator":
        assert hf.generator_lm_head.weight is hf.electra.embeddings.word_embeddings.weight
    if kind == "classifier":
        assert hf.config.num_labels == 3 and hf.config.problem_type == "single_label_classification"
    # Overwrite is refused unless asked for, and then replaces the directory atomically.
    with pytest.raises(InputError, match="already exists"):
        save_hf_dir(ours, out)
    save_hf_dir(ours, out, overwrite=True)
    assert not (out / "tokenizer.json").exists()


@pytest.mark.parametrize("safe", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_transformers_save_pretrained_loads_here(kind: str, safe: bool, tmp_path: Path) -> None:
    torch.manual_seed(0)
    cfg = tiny()
    hf = hf_model(kind, cfg)
    hf.save_pretrained(tmp_path, safe_serialization=safe)
    ours, report = load_hf_dir_with_report(tmp_path)  # kind inferred from `architectures`
    assert ours.kind == kind and not ours.training
    assert report.newly_initialized == [] and report.unused == []
    x = inputs(cfg)
    assert max_diff(logits(ours, x), logits(hf, x)) < 1e-5
    if kind == "generator":
        assert ours.generator_lm_head.weight is ours.electra.embeddings.word_embeddings.weight


def test_legacy_checkpoint_with_buffers_and_bare_electra_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.manual_seed(0)
    cfg = tiny()
    hf = hf_model("discriminator", cfg)
    hf.save_pretrained(tmp_path)
    state = dict(hf.state_dict())
    state["electra.embeddings.position_ids"] = torch.arange(cfg.max_position_embeddings)[None]
    (tmp_path / "model.safetensors").unlink()
    torch.save(state, tmp_path / "pytorch_model.bin")
    x = inputs(cfg)
    assert max_diff(logits(load_hf_dir(tmp_path), x), logits(hf, x)) < 1e-5

    # A bare ElectraModel checkpoint (no "electra." prefix) loads as any head, with the head fresh.
    bare = tmp_path / "bare"
    hf.electra.save_pretrained(bare)
    with caplog.at_level(logging.INFO, logger="electra"):
        model, report = load_hf_dir_with_report(bare, "discriminator")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert report.newly_initialized == [
        "discriminator_predictions.dense.bias",
        "discriminator_predictions.dense.weight",
        "discriminator_predictions.dense_prediction.bias",
        "discriminator_predictions.dense_prediction.weight",
    ]
    assert torch.equal(
        model.electra.encoder.layer[1].output.dense.weight, hf.electra.encoder.layer[1].output.dense.weight
    )


def test_discriminator_checkpoint_as_classifier(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    disc = ElectraDiscriminator(tiny())
    save_hf_dir(disc, tmp_path / "d")
    with caplog.at_level(logging.INFO, logger="electra"):
        clf, report = load_hf_dir_with_report(tmp_path / "d", "classifier", num_labels=5)
    # A new head before fine-tuning is expected: said, not warned about.
    assert [r.levelno for r in caplog.records if "head is new" in r.getMessage()] == [logging.INFO]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert isinstance(clf, ElectraClassifier) and clf.config.num_labels == 5
    assert report.newly_initialized == [
        "classifier.dense.bias",
        "classifier.dense.weight",
        "classifier.out_proj.bias",
        "classifier.out_proj.weight",
    ]
    assert report.unused == [
        k for k in sorted(disc.state_dict()) if k.startswith("discriminator_predictions.")
    ]
    ours, theirs = clf.electra.state_dict(), disc.electra.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    assert clf(**inputs(tiny())).shape == (3, 5)


def test_classifier_head_shape_change_needs_overrides(tmp_path: Path) -> None:
    save_hf_dir(ElectraClassifier(tiny()), tmp_path / "c")
    # Same config: the fine-tuned head loads as is.
    assert load_hf_dir_with_report(tmp_path / "c")[1].newly_initialized == []
    # A new label count re-initialises only the output layer.
    _, report = load_hf_dir_with_report(tmp_path / "c", num_labels=2)
    assert report.newly_initialized == ["classifier.out_proj.bias", "classifier.out_proj.weight"]


# ----- generator head and embedding sharing -----


def test_gathered_generator_head_matches_full() -> None:
    torch.manual_seed(0)
    cfg = generator_config(tiny())
    gen = ElectraGenerator(cfg).eval()
    x = inputs(cfg)
    full = logits(gen, x)  # (B, L, V)
    B, L, V = full.shape
    positions = torch.tensor([[1, 4, 7], [0, 2, 3], [4, 1, 1]])  # (B, K), repeats allowed
    per_row = gen(**x, masked_positions=positions)
    assert per_row.shape == (B, 3, V)
    assert max_diff(per_row, torch.gather(full, 1, positions[..., None].expand(-1, -1, V))) < 1e-6
    mask = torch.zeros(B, L, dtype=torch.bool)
    mask[0, [2, 5]] = mask[2, [0, 3, 4]] = True
    flat = mask.flatten().nonzero().squeeze(1)
    picked = gen(**x, masked_positions=flat)
    assert picked.shape == (5, V)
    assert max_diff(picked, full[mask]) < 1e-6


def test_generator_never_builds_full_logits_when_gathering() -> None:
    cfg = generator_config(tiny())
    gen = ElectraGenerator(cfg)
    seen: list[tuple[int, ...]] = []
    gen.generator_lm_head.register_forward_hook(lambda m, i, o: seen.append(tuple(o.shape)))
    gen(**inputs(cfg), masked_positions=torch.tensor([0, 13]))
    assert seen == [(2, cfg.vocab_size)]


def test_shared_embeddings_are_the_same_parameters_and_update_once() -> None:
    torch.manual_seed(0)
    disc = ElectraDiscriminator(tiny())
    gen = ElectraGenerator(generator_config(disc.config))
    gen.tie_embeddings_to(disc)
    d_emb, g_emb = disc.electra.embeddings, gen.electra.embeddings
    for (name, p), q in zip(d_emb.named_parameters(), g_emb.parameters(), strict=True):
        assert p is q, name
    assert gen.generator_lm_head.weight is d_emb.word_embeddings.weight
    # The generator's width differs, so its own projection from embedding_size stays its own.
    assert gen.electra.embeddings_project.weight.shape == (16, 32)

    both = nn.ModuleDict({"generator": gen, "discriminator": disc})
    params = list(both.parameters())  # deduplicated: shared ones appear once
    assert len(params) == len({id(p) for p in gen.parameters()} | {id(p) for p in disc.parameters()})
    opt = torch.optim.SGD(params, lr=0.5)
    x = inputs(disc.config)
    loss = gen(**x).logsumexp(-1).mean() + disc(**x).pow(2).mean()
    loss.backward()
    w = d_emb.word_embeddings.weight
    before, grad = w.detach().clone(), w.grad.clone()
    gen_only = torch.autograd.grad(gen(**x).logsumexp(-1).mean(), w)[0]
    assert (grad - gen_only).abs().max() > 0  # both losses reach the shared weight
    opt.step()
    assert torch.allclose(w.detach(), before - 0.5 * grad)


def test_constructor_shares_embeddings_without_reinitialising_them() -> None:
    torch.manual_seed(0)
    disc = ElectraDiscriminator(tiny())
    emb = disc.electra.embeddings
    snapshot = {k: v.clone() for k, v in emb.state_dict().items()}
    gen = ElectraGenerator(generator_config(disc.config), embeddings=emb)
    assert gen.electra.embeddings is emb
    assert gen.generator_lm_head.weight is emb.word_embeddings.weight
    assert all(torch.equal(v, snapshot[k]) for k, v in emb.state_dict().items())
    with pytest.raises(ValueError, match="cannot share embeddings"):
        ElectraGenerator(tiny(embedding_size=16), embeddings=emb)


# ----- presets and config -----


def shape(c: ElectraConfig) -> tuple[int, ...]:
    return (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size, c.embedding_size)


def test_presets_have_the_papers_shapes() -> None:
    small, base, large = (ElectraConfig.from_size(n) for n in ("small", "base", "large"))
    assert shape(small) == (12, 256, 4, 1024, 128)
    assert shape(base) == (12, 768, 12, 3072, 768)
    assert shape(large) == (24, 1024, 16, 4096, 1024)
    assert 13.4e6 < ElectraDiscriminator(small).num_parameters() < 13.6e6  # ELECTRA-Small: 13.5M
    assert 109e6 < ElectraDiscriminator(base).num_parameters() < 111e6  # ELECTRA-Base: 110M

    assert shape(generator_config(small)) == (12, 64, 1, 256, 128)  # 1/4
    assert shape(generator_config(base)) == (12, 256, 4, 1024, 768)  # 1/3
    assert shape(generator_config(large)) == (24, 256, 4, 1024, 1024)  # 1/4
    assert shape(generator_config(tiny())) == (2, 16, 1, 64, 32)  # 1/4
    assert shape(generator_config(base, fraction=0.5)) == (12, 384, 6, 1536, 768)
    odd = generator_config(tiny(hidden_size=200, num_attention_heads=4), 0.65)  # 130 wide: 2 heads
    assert (odd.hidden_size, odd.num_attention_heads) == (130, 2)


def test_config_round_trips_through_transformers() -> None:
    cfg = tiny(id2label={0: "neg", 1: "neutral", 2: "pos"}, problem_type="single_label_classification")
    d = cfg.to_hf_dict("ElectraForSequenceClassification")
    hf = transformers.ElectraConfig.from_dict(json.loads(json.dumps(d)))
    assert hf.num_labels == 3 and hf.id2label[2] == "pos" and hf.embedding_size == 32
    back = ElectraConfig.from_hf_dict(json.loads(hf.to_json_string()))
    assert back == cfg
    assert back.replace(num_labels=2).id2label == {0: "LABEL_0", 1: "LABEL_1"}


def test_config_validation() -> None:
    with pytest.raises(InputError, match="divisible"):
        tiny(num_attention_heads=3)
    with pytest.raises(InputError, match="unknown model size"):
        ElectraConfig.from_size("huge")
    with pytest.raises(InputError, match="hidden_act"):
        tiny(hidden_act="mish2")


# ----- bad inputs -----


def write_json(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return path


def test_from_json_file_errors_name_the_file(tmp_path: Path) -> None:
    good = tiny().to_hf_dict("ElectraForPreTraining")
    cases = {
        "missing.json": None,
        "garbage.json": "{not json",
        "bert.json": {**good, "model_type": "bert"},
        "partial.json": {k: v for k, v in good.items() if k != "hidden_size"},
        "bad_heads.json": {**good, "num_attention_heads": 5},
    }
    for name, content in cases.items():
        path = tmp_path / name
        if content is not None:
            write_json(path, content)
        with pytest.raises(InputError, match=re.escape(str(path))) as e:
            ElectraConfig.from_json_file(path)
        assert "\n" not in str(e.value)
    extra = write_json(tmp_path / "extra.json", {**good, "some_future_hf_key": 1, "bos_token_id": 2})
    assert ElectraConfig.from_json_file(extra) == tiny().replace(num_labels=2)  # labels: classifiers only


def test_load_hf_dir_errors_name_the_path(tmp_path: Path) -> None:
    cfg = tiny()
    good = save_hf_dir(ElectraDiscriminator(cfg), tmp_path / "good")
    config = json.loads((good / "config.json").read_text())

    def variant(name: str, config_obj: object | None, weights_from: Path | None = good) -> Path:
        d = tmp_path / name
        d.mkdir()
        if config_obj is not None:
            write_json(d / "config.json", config_obj)
        if weights_from is not None:
            (d / "model.safetensors").write_bytes((weights_from / "model.safetensors").read_bytes())
        return d

    a_file = write_json(tmp_path / "file.txt", "x")
    cases = [
        (tmp_path / "nope", "no such directory"),
        (a_file, "not a directory"),
        (variant("no_config", None), "no config.json"),
        (variant("bert", {**config, "model_type": "bert"}), "not 'electra'"),
        (variant("no_weights", config, None), "no model.safetensors or pytorch_model.bin"),
        (variant("shape", {**config, "hidden_size": 128, "intermediate_size": 256}), "mis-shaped"),
        (variant("depth", {**config, "num_hidden_layers": 1}), "unexpected encoder weights"),
        (variant("unknown_arch", {**config, "architectures": ["ElectraModel"]}), "pass kind="),
    ]
    corrupt = variant("corrupt", config, None)
    (corrupt / "model.safetensors").write_bytes(b"\x00" * 10)
    cases.append((corrupt, "unreadable safetensors"))
    for path, message in cases:
        with pytest.raises(InputError, match=re.escape(str(path))) as e:
            load_hf_dir(path)
        assert message in str(e.value) and "\n" not in str(e.value)


def _all_heads() -> list[ElectraHeadModel]:
    return [
        ElectraDiscriminator(tiny()),
        ElectraGenerator(tiny()),
        ElectraClassifier(tiny()),
        ElectraTagger(tiny()),
    ]


def test_heads_have_hf_names() -> None:
    for model in _all_heads():
        hf = HF_CLASSES[model.kind](
            transformers.ElectraConfig.from_dict(model.config.to_hf_dict(model.hf_architecture))
        )
        assert type(hf).__name__ == model.hf_architecture
        assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {
            k: tuple(v.shape) for k, v in hf.state_dict().items()
        }


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"vocab_size": 10**12}, "describes a model of at least"),
        ({"hidden_size": 2**20, "intermediate_size": 2**22, "num_attention_heads": 1}, "describes a model"),
        ({"num_labels": 10**12, "id2label": None, "label2id": None}, "num_labels must be at most 100,000"),
    ],
)
def test_config_sizes_past_the_weights_are_refused_before_the_model_is_built(
    tmp_path: Path, change: dict[str, object], says: str
) -> None:
    """config.json's sizes are the file's to say: a model of them would be built (allocated) before the
    weights were compared with it. Now a config far larger than its weights is an InputError first."""
    from electra.errors import InputError

    out = save_hf_dir(ElectraClassifier(tiny()), tmp_path / "c")
    config = json.loads((out / "config.json").read_text())
    config.update(change)
    config = {k: v for k, v in config.items() if v is not None}
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match=says):
        load_hf_dir(out)
