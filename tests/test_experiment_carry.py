"""experiments/lib/carry.py: a finished point packed on one machine is, unpacked into another's work
directory, a finished point there with its evaluations cached, carrying no generator, checkpoint or
machine path; unpacking never overwrites what the work directory has."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from experiments import equal_compute as ec
from experiments.lib import carry
from experiments.lib.arms import Setup, detection_key, finetune_keys, point_dir, run_dir, save_setup
from experiments.lib.pretraining import encoder_dir
from experiments.lib.store import Cache
from tests.test_experiment_equal_compute import setup_in as equal_compute_setup


def setup_in(work: Path) -> Setup:
    """One pre-training seed trained to the whole budget, as the sweep's arms are."""
    return replace(equal_compute_setup(work, seeds=(1,)), vocab="uncased-8192", points=(1.0,))


def finished(setup: Setup, arm: str) -> Path:
    """A point trained to the end as train_to_points leaves it: record, both models, the run beside it."""
    point = point_dir(setup, arm, 1, 1.0)
    (point / "discriminator").mkdir(parents=True)
    (point / "generator").mkdir()
    (point / "point.json").write_text(json.dumps({"point": 1.0, "step": 40, "tokens": 4000, "seed": 1}))
    for model in ("discriminator", "generator"):
        (point / model / "config.json").write_text(json.dumps({"model_type": "electra"}))
        (point / model / "model.safetensors").write_bytes(model.encode() * 10)
    run = run_dir(setup, arm, 1)
    (run / "checkpoints" / "step-00000040").mkdir(parents=True)
    (run / "checkpoints" / "step-00000040" / "optimizer.pt").write_bytes(b"\0" * 64)
    (run / "metrics.jsonl").write_text(json.dumps({"split": "val", "step": 40, "disc_auc": 0.7}) + "\n")
    (run / "run_config.json").write_text(json.dumps({"data": str(setup.work / "data")}))
    return point


@pytest.fixture
def work(tmp_path: Path) -> Setup:
    setup = setup_in(tmp_path / "here")
    save_setup(setup)
    (setup.work / "steps.json").write_text(json.dumps({"gdes-all-0.2/1/1e+14/recipe": 40}))
    vocab = setup.work / "vocab" / "uncased-8192"
    vocab.mkdir(parents=True)
    (vocab / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n")
    finished(setup, "gdes-all-0.2")
    finished(setup, "gdes-all")  # an arm whose name the packed one's begins with: not packed with it
    return setup


def cache_evaluations(setup: Setup, arm: str, detection: bool = True) -> Cache:
    cache = Cache(setup.work / carry.EVALUATIONS)
    key = finetune_keys(setup, arm, 1, 1.0)
    cache.put(key("sst2", 1), {"arm": arm, "task": "sst2", "seed": 1, "score": 81.0})
    if detection:
        cache.put(detection_key(arm, 1, 1.0), {"arm": arm, "swap_auc": 0.68, "generator_auc": 0.62})
    return cache


def test_an_electra_point_packs_only_once_its_detection_is_cached(work: Setup, tmp_path: Path) -> None:
    cache = cache_evaluations(work, "gdes-all-0.2", detection=False)
    with pytest.raises(carry.CarryError, match="held-out detection is not cached"):
        carry.pack(work, cache, ["gdes-all-0.2"], tmp_path / "pack")
    assert not (tmp_path / "pack").exists()


def test_a_packed_point_is_a_finished_point_on_another_machine(work: Setup, tmp_path: Path) -> None:
    cache = cache_evaluations(work, "gdes-all-0.2")
    cache_evaluations(work, "gdes-all")
    pack = tmp_path / "pack"
    assert carry.pack(work, Cache(work.work / carry.EVALUATIONS), ["gdes-all-0.2", "random"], pack) == [
        point_dir(work, "gdes-all-0.2", 1, 1.0)
    ]
    packed = sorted(str(p.relative_to(pack)) for p in pack.rglob("*") if p.is_file())
    assert packed == [
        "arms/gdes-all-0.2/seed-1/point-100/discriminator/config.json",
        "arms/gdes-all-0.2/seed-1/point-100/discriminator/model.safetensors",
        "arms/gdes-all-0.2/seed-1/point-100/point.json",
        "arms/gdes-all-0.2/seed-1/run/metrics.jsonl",
        "evaluations.jsonl",
        "setup.json",
        "steps.json",
        "vocab/uncased-8192/vocab.txt",
    ]

    there = setup_in(tmp_path / "there")
    carry.unpack(pack, there.work)
    save_setup(there)  # the same experiment: accepted
    assert ec.finished_points(there, "gdes-all-0.2", 1) == ec.finished_points(work, "gdes-all-0.2", 1)
    assert ec.finished_points(there, "gdes-all", 1) == []
    point = point_dir(there, "gdes-all-0.2", 1, 1.0)
    assert encoder_dir(point) == point / "discriminator"
    assert (encoder_dir(point) / "model.safetensors").read_bytes() == b"discriminator" * 10
    moved = Cache(there.work / carry.EVALUATIONS)
    assert moved.rows == {k: v for k, v in cache.rows.items() if k.split("/")[1] == "gdes-all-0.2"}
    assert moved.get(detection_key("gdes-all-0.2", 1, 1.0)) is not None


def test_unpacking_keeps_what_the_work_directory_has(work: Setup, tmp_path: Path) -> None:
    cache_evaluations(work, "gdes-all-0.2")
    pack = tmp_path / "pack"
    carry.pack(work, Cache(work.work / carry.EVALUATIONS), ["gdes-all-0.2"], pack)
    there = setup_in(tmp_path / "there")
    own = there.work / "vocab" / "uncased-8192" / "vocab.txt"
    own.parent.mkdir(parents=True)
    own.write_text("its own\n")
    key = finetune_keys(there, "gdes-all-0.2", 1, 1.0)("sst2", 1)
    Cache(there.work / carry.EVALUATIONS).put(key, {"score": 79.0})
    copied = carry.unpack(pack, there.work)
    assert own.read_text() == "its own\n" and own not in copied
    assert Cache(there.work / carry.EVALUATIONS).get(key) == {"key": key, "score": 79.0}
    # Unpacked twice: nothing new, no evaluation twice in the file.
    assert carry.unpack(pack, there.work) == []
    lines = [line for line in (there.work / carry.EVALUATIONS).read_text().splitlines() if line]
    assert len(lines) == 2  # its own fine-tune and the packed detection


def test_a_file_naming_the_work_directory_is_not_packed(work: Setup, tmp_path: Path) -> None:
    cache = cache_evaluations(work, "gdes-all-0.2")
    metrics = run_dir(work, "gdes-all-0.2", 1) / "metrics.jsonl"
    metrics.write_text(json.dumps({"data": str(work.work / "data")}) + "\n")
    with pytest.raises(carry.CarryError, match="names this machine's work directory"):
        carry.pack(work, cache, ["gdes-all-0.2"], tmp_path / "pack")


def test_a_point_whose_run_log_is_gone_is_not_packed(work: Setup, tmp_path: Path) -> None:
    cache = cache_evaluations(work, "gdes-all-0.2")
    (run_dir(work, "gdes-all-0.2", 1) / "metrics.jsonl").unlink()
    with pytest.raises(carry.CarryError, match=r"run/metrics\.jsonl: missing"):
        carry.pack(work, cache, ["gdes-all-0.2"], tmp_path / "pack")


def test_the_experiment_packs_and_refuses_what_is_not_a_pack(
    work: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(ec, "missing", lambda *paths: [])
    monkeypatch.setattr(ec, "prepare", lambda *a: pytest.fail("--pack trains nothing"))
    cache_evaluations(work, "gdes-all-0.2")
    base = ["--work", str(work.work), "--flops", "1e14", "--vocab", "uncased-8192", "--lr", "1e-3"]
    base += [
        "--points",
        "1",
        "--pretrain-seeds",
        "1",
        "--seeds",
        "1,2",
        "--train-examples",
        "sst2=all,conll2003=all",
    ]
    base += ["--swaps", "10", "--generator-lr-scale", "0.5"]
    pack = tmp_path / "pack"
    assert ec.main([*base, "--arms", "gdes-all-0.2", "--pack", str(pack)]) == 0
    assert "packed 1 points" in capsys.readouterr().out
    assert (pack / "arms/gdes-all-0.2/seed-1/point-100/discriminator/config.json").is_file()
    assert ec.main([*base, "--arms", "official", "--pack", str(pack)]) == 2
    assert "holds no finished point of official to pack" in capsys.readouterr().err
    assert ec.main([*base, "--unpack", str(tmp_path / "nothing")]) == 2
    assert "not a packed work directory" in capsys.readouterr().err
