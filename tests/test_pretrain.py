"""`electra pretrain` end to end on tiny models: outputs, exact resume, signals, DDP, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from electra.cli.main import main
from electra.serving.process import free_port

from .conftest import prepare_tiny_data, tiny_pretrain_args


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_tiny_data(tmp_path_factory.mktemp("pretrain-data"), n_docs=60)


def pretrain_args(data: Path, out: Path, *extra: str) -> list[str]:
    return tiny_pretrain_args(data, out, "--eval-every", "4", "--quiet", *extra)


def records(run: Path, split: str = "train") -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_tiny_run_writes_metrics_checkpoints_and_hf_models(data_dir: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(pretrain_args(data_dir, run, "--steps", "6", "--checkpoint-every", "3")) == 0
    assert "finished 6 steps" in capsys.readouterr().out
    train = records(run)
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    for key in (
        "tokens",
        "mlm_loss",
        "mlm_accuracy",
        "disc_loss",
        "disc_accuracy",
        "disc_precision",
        "disc_recall",
        "lr",
        "grad_norm",
        "tokens_per_s",
        "peak_memory_bytes",
        "all_original_accuracy",
        "sampled_accuracy",
    ):
        assert key in train[-1], key
    assert train[-1]["tokens"] > train[0]["tokens"] > 0
    val = records(run, "val")
    assert [r["step"] for r in val] == [4, 6]
    # The threshold-free score is evaluation's alone: it needs every validation token's logit.
    assert all(0.0 <= r["disc_auc"] <= 1.0 for r in val) and "disc_auc" not in train[-1]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000003", "step-00000006"]

    import transformers

    disc = transformers.ElectraForPreTraining.from_pretrained(run / "discriminator")
    gen = transformers.ElectraForMaskedLM.from_pretrained(run / "generator")
    tok = transformers.AutoTokenizer.from_pretrained(run / "discriminator")
    enc = tok(["doc1 word2 word3 .", "doc4 word5 ."], padding=True, return_tensors="pt")
    with torch.no_grad():
        assert disc(**enc).logits.shape == enc["input_ids"].shape
        assert gen(**enc).logits.shape[-1] == tok.vocab_size
    # The generator is a quarter of the discriminator's width and shares its embeddings.
    assert gen.config.hidden_size * 4 == disc.config.hidden_size
    assert torch.equal(
        gen.electra.embeddings.word_embeddings.weight, disc.electra.embeddings.word_embeddings.weight
    )

    assert main(["plot", str(run)]) == 0
    png = run / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_resume_continues_exactly(data_dir: Path, tmp_path: Path) -> None:
    common = ("--steps", "8", "--checkpoint-every", "100", "--eval-every", "100")
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(pretrain_args(data_dir, straight, *common)) == 0
    assert main(pretrain_args(data_dir, split, *common, "--stop-at", "4")) == 0
    assert not (split / "discriminator").exists()  # stopped early: no final export yet
    assert main(pretrain_args(data_dir, split, *common, "--resume")) == 0
    a, b = records(straight), records(split)
    assert [r["step"] for r in b] == list(range(1, 9))
    for ra, rb in zip(a, b, strict=True):
        for key in ("mlm_loss", "disc_loss", "grad_norm", "lr", "tokens"):
            assert ra[key] == rb[key], (ra["step"], key)


def test_official_adam_resumes_exactly_and_is_not_adamw(data_dir: Path, tmp_path: Path) -> None:
    """--adam official (no bias correction) runs, resumes like AdamW, and its updates differ from AdamW's."""
    common = ("--steps", "6", "--checkpoint-every", "100", "--eval-every", "100")
    official, split, torch_adam = tmp_path / "official", tmp_path / "split", tmp_path / "torch"
    assert main(pretrain_args(data_dir, official, *common, "--adam", "official")) == 0
    assert main(pretrain_args(data_dir, split, *common, "--adam", "official", "--stop-at", "3")) == 0
    assert main(pretrain_args(data_dir, split, *common, "--adam", "official", "--resume")) == 0
    assert main(pretrain_args(data_dir, torch_adam, *common)) == 0
    assert json.loads((official / "run_config.json").read_text())["adam"] == "official"
    assert json.loads((torch_adam / "run_config.json").read_text())["adam"] == "torch"
    a, b, c = records(official), records(split), records(torch_adam)
    assert [r["disc_loss"] for r in a] == [r["disc_loss"] for r in b]
    # Step 1 has lr 0 (warmup); from step 3 on the parameters have moved differently.
    assert a[0]["disc_loss"] == c[0]["disc_loss"] and a[-1]["disc_loss"] != c[-1]["disc_loss"]


def test_an_unknown_adam_is_an_input_error(tmp_path: Path) -> None:
    from electra.errors import InputError
    from electra.training.pretrain.config import PretrainConfig

    with pytest.raises(InputError, match="--adam 'sgd' is not one of official, torch"):
        PretrainConfig(data=tmp_path, out=tmp_path / "run", adam="sgd").resolved()


def test_rerun_without_resume_is_refused(data_dir: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(pretrain_args(data_dir, run, "--steps", "2")) == 0
    capsys.readouterr()
    assert main(pretrain_args(data_dir, run, "--steps", "2")) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(pretrain_args(data_dir, run, "--steps", "2", "--overwrite")) == 0


def test_overwrite_clears_the_old_run_only_once_the_new_one_is_set_up(
    data_dir: Path, tmp_path: Path, capsys
) -> None:
    """A mistake in the new run's setup (an --init that is not there) leaves the old run whole; an --init
    inside the outputs --overwrite clears is refused, not read and then deleted."""
    run = tmp_path / "run"
    assert main(pretrain_args(data_dir, run, "--steps", "2")) == 0
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    capsys.readouterr()
    assert (
        main(pretrain_args(data_dir, run, "--steps", "2", "--overwrite", "--init", str(tmp_path / "typo")))
        == 2
    )
    assert "typo" in capsys.readouterr().err
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
    init = run / "discriminator"
    assert main(pretrain_args(data_dir, run, "--steps", "2", "--overwrite", "--init", str(init))) == 2
    assert "which --overwrite deletes" in capsys.readouterr().err
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_resume_falls_back_from_a_corrupt_checkpoint(data_dir: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    args = ("--steps", "6", "--checkpoint-every", "2", "--keep-checkpoints", "5")
    assert main(pretrain_args(data_dir, run, *args, "--stop-at", "4")) == 0
    newest = run / "checkpoints" / "step-00000004" / "model.safetensors"
    newest.write_bytes(newest.read_bytes()[:-100])
    capsys.readouterr()
    assert main(pretrain_args(data_dir, run, *args, "--resume")) == 0
    err = capsys.readouterr().err
    assert "step-00000004" in err and "falling back" in err and "resumed from" in err and "step 2" in err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--batch-size", "10", "--grad-accum", "3"), "not divisible"),
        (("--batch-size", "100000"), "fewer than one batch"),
        (("--mask-prob", "1.5"), "--mask-prob"),
    ],
)
def test_bad_training_options(data_dir: Path, tmp_path: Path, capsys, extra, needle) -> None:
    code = main([*pretrain_args(data_dir, tmp_path / "run"), "--steps", "2", *extra])
    # The threads line (electra.threads) may come first: the choice is made before the trainer checks its
    # inputs. The error itself is one line.
    lines = [line for line in capsys.readouterr().err.splitlines() if " INFO electra.threads: " not in line]
    assert code == 2 and len(lines) == 1 and needle in lines[0]


def test_data_not_made_by_prepare_or_from_another_tokenizer(data_dir: Path, tmp_path: Path, capsys) -> None:
    assert main(pretrain_args(tmp_path, tmp_path / "run", "--steps", "2")) == 2
    assert "no manifest.json" in capsys.readouterr().err
    import shutil

    other = tmp_path / "other"
    shutil.copytree(data_dir, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["tokenizer"]["fingerprint"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert main(pretrain_args(other, tmp_path / "run", "--steps", "2")) == 2
    assert "does not match the tokenizer" in capsys.readouterr().err


def test_init_from_a_model_with_another_vocabulary_is_refused(data_dir: Path, tmp_path: Path, capsys) -> None:
    from electra.config import ElectraConfig
    from electra.hf_format import save_hf_dir
    from electra.model import ElectraDiscriminator

    hf = tmp_path / "hf"
    save_hf_dir(ElectraDiscriminator(ElectraConfig.from_size("tiny", vocab_size=500)), hf)
    assert main(pretrain_args(data_dir, tmp_path / "run", "--steps", "2", "--init", str(hf))) == 2
    assert "vocabulary of 500" in capsys.readouterr().err


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_exits_0(data_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "electra",
        *pretrain_args(data_dir, run, "--steps", "100000", "--checkpoint-every", "100000"),
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        (run / "metrics.jsonl").exists() and len((run / "metrics.jsonl").read_text().splitlines()) >= 3
    ):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "stopped by signal" in err
    ckpts = list((run / "checkpoints").iterdir())
    assert len(ckpts) == 1
    from electra.training.pretrain.state.checkpoint import verify_checkpoint

    assert verify_checkpoint(ckpts[0]) is None
    step = int(ckpts[0].name.split("-")[1])
    assert step >= 3
    assert main(pretrain_args(data_dir, run, "--steps", str(step + 2), "--resume")) == 0
    assert records(run)[-1]["step"] == step + 2


@pytest.mark.slow
def test_ddp_two_gloo_processes_match_one_process(data_dir: Path, tmp_path: Path) -> None:
    """Two ranks (global batch 8 = 2 x 4) reach the same weights as one process with the same global batch."""
    common = ["--steps", "4", "--dropout", "0", "--eval-every", "100", "--checkpoint-every", "100"]
    single = tmp_path / "single"
    assert main(pretrain_args(data_dir, single, *common, "--grad-accum", "2")) == 0
    ddp = tmp_path / "ddp"
    port = free_port()
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "WORLD_SIZE": "2",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        cmd = [sys.executable, "-m", "electra", *pretrain_args(data_dir, ddp, *common)]
        procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    from safetensors.torch import load_file

    a = load_file(single / "discriminator" / "model.safetensors")
    b = load_file(ddp / "discriminator" / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5, msg=k)
    for ra, rb in zip(records(single), records(ddp), strict=True):
        assert ra["mlm_loss"] == pytest.approx(rb["mlm_loss"], rel=1e-4)
        assert ra["disc_loss"] == pytest.approx(rb["disc_loss"], rel=1e-4)
    # Evaluation reduces its sums and AUC histograms over both ranks.
    (val,) = records(ddp, "val")
    assert 0.0 <= val["disc_auc"] <= 1.0 and 0.0 < val["replaced_fraction"] < 1.0


def test_mlm_baseline_objective_and_init_from_a_previous_run(data_dir: Path, tmp_path: Path, capsys) -> None:
    mlm = tmp_path / "mlm"
    assert main(pretrain_args(data_dir, mlm, "--steps", "3", "--objective", "mlm")) == 0
    rec = records(mlm)[-1]
    assert rec["mlm_loss"] > 0 and "disc_loss" not in rec
    assert all("disc_auc" not in r and r["mlm_loss"] > 0 for r in records(mlm, "val"))
    import transformers

    model = transformers.ElectraForMaskedLM.from_pretrained(mlm / "mlm")
    assert model.config.hidden_size == 64  # the discriminator-sized encoder, not a generator

    first, second = tmp_path / "first", tmp_path / "second"
    assert main(pretrain_args(data_dir, first, "--steps", "3")) == 0
    capsys.readouterr()
    assert main(pretrain_args(data_dir, second, "--steps", "1", "--init", str(first))) == 0
    err = capsys.readouterr().err
    assert "initialised the discriminator" in err and "initialised the generator" in err


def test_discriminator_starts_at_the_replaced_prior() -> None:
    import math

    from electra.config import ElectraConfig, generator_config
    from electra.training.pretrain.models import ElectraPretrainer
    from electra.training.pretrain.objective import ObjectiveConfig, SpecialTokens

    disc = ElectraConfig.from_size("tiny", vocab_size=50)
    specials = SpecialTokens(pad=0, cls=2, sep=3, mask=4)
    for mask_prob in (0.15, 0.25):
        objective = ObjectiveConfig(mask_prob=mask_prob)
        model = ElectraPretrainer(disc, generator_config(disc), specials, objective)
        bias = model.discriminator.discriminator_predictions.dense_prediction.bias
        # sigmoid(bias) is the share of replaced tokens, so the first steps need not learn the prior.
        assert torch.sigmoid(bias).item() == pytest.approx(mask_prob, rel=1e-5)
        assert bias.item() == pytest.approx(math.log(mask_prob / (1 - mask_prob)), rel=1e-5)
