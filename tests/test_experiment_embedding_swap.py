"""experiments/embedding_swap.py: the hybrids hold exactly the parts they claim, open in transformers, and
the word table's geometry is measured per frequency bucket. (The experiment itself needs an equal-compute
run.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from electra.config import ElectraConfig
from electra.hf_format import save_hf_dir
from electra.model import ElectraDiscriminator, ElectraGenerator
from experiments import embedding_swap as es


def tiny() -> ElectraConfig:
    return ElectraConfig.from_size("micro", vocab_size=50, max_position_embeddings=32)


def test_hybrid_state_takes_each_part_from_the_side_it_names() -> None:
    pre = {
        "electra.embeddings.word_embeddings.weight": torch.ones(3, 2),
        "electra.embeddings.LayerNorm.weight": torch.ones(2),
        "electra.embeddings_project.weight": torch.ones(4, 2),
        "electra.encoder.layer.0.attention.self.query.weight": torch.ones(4, 4),
        "generator_lm_head.bias": torch.ones(3),
    }
    rnd = {k: torch.zeros_like(v) for k, v in pre.items() if k != "generator_lm_head.bias"}

    layers = es.hybrid_state(pre, rnd, "layers")
    embeddings = es.hybrid_state(pre, rnd, "embeddings")

    for key in pre:
        if key.startswith("electra.embeddings"):
            assert layers[key].sum() == 0 and embeddings[key].sum() == pre[key].sum(), key
        elif key.startswith("electra."):
            assert layers[key].sum() == pre[key].sum() and embeddings[key].sum() == 0, key
    # Outside the encoder: the pre-trained head stays (fine-tuning drops it), whatever the part.
    assert layers["generator_lm_head.bias"].sum() == 3 and embeddings["generator_lm_head.bias"].sum() == 3


def test_hybrid_state_refuses_a_part_it_does_not_know_and_a_shape_that_differs() -> None:
    pre = {"electra.embeddings.word_embeddings.weight": torch.ones(3, 2)}
    with pytest.raises(ValueError, match="keep_pretrained"):
        es.hybrid_state(pre, pre, "heads")
    with pytest.raises(ValueError, match="shape"):
        es.hybrid_state(pre, {"electra.embeddings.word_embeddings.weight": torch.ones(4, 2)}, "layers")


def test_a_hybrid_of_a_masked_lm_and_a_random_discriminator_opens_in_transformers(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(1)
    mlm = ElectraGenerator(tiny())
    torch.manual_seed(2)
    rnd = ElectraDiscriminator(tiny())
    save_hf_dir(mlm, tmp_path / "mlm")
    save_hf_dir(rnd, tmp_path / "random")

    out = es.write_hybrid(tmp_path / "mlm", tmp_path / "random", "layers", tmp_path / "hybrid")

    model = transformers.ElectraModel.from_pretrained(out)
    got = model.state_dict()
    want_emb = rnd.state_dict()["electra.embeddings.word_embeddings.weight"]
    want_layer = mlm.state_dict()["electra.encoder.layer.1.output.dense.weight"]
    assert torch.equal(got["embeddings.word_embeddings.weight"], want_emb)
    assert torch.equal(got["encoder.layer.1.output.dense.weight"], want_layer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hybrid", "mlm", "random"]  # nothing left aside
    # Built once: a second call keeps what is there.
    before = (out / "model.safetensors").stat().st_mtime_ns
    es.write_hybrid(tmp_path / "mlm", tmp_path / "random", "layers", out)
    assert (out / "model.safetensors").stat().st_mtime_ns == before


def test_frequency_buckets() -> None:
    counts = np.array([0, 50, 3, 11, 1, 0, 10, 200])
    buckets = es.frequency_buckets(counts, frequent=2)
    assert buckets["frequent"].tolist() == [7, 1]
    assert buckets["rare"].tolist() == [2, 4, 6]  # 1 to 10 times, 11 is not rare
    assert buckets["never"].tolist() == [0, 5]


def test_mean_pair_cosine_sees_rows_that_share_a_direction() -> None:
    rng = np.random.default_rng(0)
    table = rng.standard_normal((200, 64))
    common = rng.standard_normal(64)
    table[100:] = 0.2 * table[100:] + 3 * common  # rows 100..199 pulled towards one direction
    spread = es.mean_pair_cosine(table, np.arange(100))
    pulled = es.mean_pair_cosine(table, np.arange(100, 200))
    assert spread is not None and abs(spread) < 0.05
    assert pulled is not None and pulled > 0.95
    # Scale does not matter, only direction; fewer than two rows have no pairs.
    assert es.mean_pair_cosine(table * 7, np.arange(100, 200)) == pytest.approx(pulled)
    assert es.mean_pair_cosine(table, np.arange(1)) is None


def test_markdown_table_names_the_part_kept() -> None:
    result = {
        "setup": {"tasks": ["sst2"]},
        "rows": [
            {
                "model": "random",
                "part": "all",
                "scores": {"sst2": {"median": 71.4, "min": 70.8, "max": 72.0}},
                "word_table_cosine": {"frequent": 0.001, "rare": 0.002, "never": None},
                "state_cosine": 0.234,
            },
            {"model": "mlm@1", "part": "layers", "scores": {}},
        ],
    }
    lines = es.markdown_table(result).splitlines()
    assert lines[2] == "| random | none | 71.4 (70.8-72.0) | 0.00 / 0.00 / - | 0.23 |"
    assert lines[3] == "| mlm@1 | its layers, random embeddings |  |  |  |"


def test_state_cosine_is_one_when_every_token_state_points_one_way(tmp_path: Path) -> None:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "film", "good", "bad", "plot", "is", "the"]
    torch.manual_seed(0)
    model = ElectraDiscriminator(tiny())
    save_hf_dir(model, tmp_path / "random", extra_files={"vocab.txt": "\n".join(words).encode() + b"\n"})
    last = model.electra.encoder.layer[-1].output.LayerNorm
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(1.0)  # every token's last state is the bias
    save_hf_dir(model, tmp_path / "one-way", extra_files={"vocab.txt": "\n".join(words).encode() + b"\n"})
    sentences = ["the film is good", "a bad plot", "the plot"]

    spread = es.state_cosine(tmp_path / "random", sentences)
    assert es.state_cosine(tmp_path / "one-way", sentences) == pytest.approx(1.0)
    assert -1.0 < spread < 0.9
