"""Artifacts written by the previous release (0.1.0, commit 01b513a) still load with the current code.

tests/fixtures/legacy-0.1 holds a tokenizer, prepared data, a stopped and a finished tiny pre-training run, a
fine-tuned classifier and two ONNX bundles, all written by the old code (its README has the commands). The
tests drive the CLI where they can (the stable surface) and work on a copy in a temporary directory: the
fixtures are never written to, and a check at the end of the module proves it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from electra.cli.main import main

FIXTURES = Path(__file__).parent / "fixtures" / "legacy-0.1"
# What the old code wrote (see the fixture README); the tests check the new code reads the same.
TRAIN_EXAMPLES, VAL_EXAMPLES, MAX_SEQ_LEN, VOCAB_SIZE = 115, 8, 32, 300
STOPPED_AT, STEPS = 2, 4
TEXT = "The baker carried fresh bread near the harbour before sunrise."


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`electra --debug ARGV` in-process: (exit code, stdout, stderr); --debug puts tracebacks in stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--debug", *argv])
    return code, out.getvalue(), err.getvalue()


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module", autouse=True)
def fixtures_untouched() -> Iterator[None]:
    before = digest(FIXTURES)
    assert before, f"{FIXTURES} is missing"
    yield
    assert digest(FIXTURES) == before, f"a test wrote into {FIXTURES}; tests must work on copies"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the legacy artifacts (paths inside the manifests are relative to it)."""
    root = tmp_path_factory.mktemp("legacy") / "legacy-0.1"
    shutil.copytree(FIXTURES, root)
    return root


# ----------------------------------------------------------------------------------------------------------
# Tokenizer and prepared data (no torch)
# ----------------------------------------------------------------------------------------------------------


def test_old_tokenizer_loads_with_the_data_fingerprint(legacy: Path) -> None:
    from electra.tokenizer import load_tokenizer, tokenizer_fingerprint

    manifest = json.loads((legacy / "data" / "manifest.json").read_text())
    for where in (legacy / "tokenizer", legacy / "data" / "tokenizer"):
        tok = load_tokenizer(where)
        assert tok.get_vocab_size() == VOCAB_SIZE
        # Pre-training refuses data whose tokenizer fingerprint differs: the old one must still match.
        assert tokenizer_fingerprint(tok) == manifest["tokenizer"]["fingerprint"], where
    code, out, err = run_cli("tokenizer", "show", "--tokenizer", str(legacy / "tokenizer"), TEXT)
    assert code == 0, err
    assert "baker" in out


def test_old_prepared_data_opens_and_verifies(legacy: Path) -> None:
    from electra.training.data.dataset import PretrainingData

    data = PretrainingData.open(legacy / "data")
    data.verify_checksums()
    assert data.max_seq_len == MAX_SEQ_LEN
    assert (len(data.train), len(data.val)) == (TRAIN_EXAMPLES, VAL_EXAMPLES)
    assert (data.tokenizer_dir / "tokenizer.json").is_file()


def test_old_prepared_data_info_verify_cli(legacy: Path) -> None:
    code, out, err = run_cli("data", "info", str(legacy / "data"), "--verify")
    assert code == 0, err
    assert "checksums: ok" in out
    assert f"{TRAIN_EXAMPLES} examples" in out and f"{VAL_EXAMPLES} examples" in out
    code, out, err = run_cli("data", "info", str(legacy / "data"), "--json")
    assert code == 0, err
    assert json.loads(out)["max_seq_len"] == MAX_SEQ_LEN


# ----------------------------------------------------------------------------------------------------------
# Pre-training: resume the old stopped run
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def resumed(legacy: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str, str]:
    """`electra pretrain --resume` of a copy of the old run stopped at step 2, to its planned 4 steps."""
    pytest.importorskip("torch", reason="the train extra is not installed")
    run = tmp_path_factory.mktemp("resume") / "run"
    shutil.copytree(legacy / "pretrain-stopped", run)
    code, out, err = run_cli(
        "pretrain",
        "--data", str(legacy / "data"),
        "--out", str(run),
        "--size", "tiny",
        "--steps", str(STEPS),
        "--batch-size", "4",
        "--checkpoint-every", "2",
        "--eval-every", "2",
        "--log-every", "1",
        "--device", "cpu",
        "--seed", "0",
        "--quiet",
        "--resume",
    )  # fmt: skip
    return run, code, out, err


@pytest.mark.slow
def test_resume_old_checkpoint_continues_from_its_step(resumed: tuple[Path, int, str, str]) -> None:
    run, code, out, err = resumed
    assert code == 0, err
    assert f"at step {STOPPED_AT}" in err, err  # "resumed from .../step-00000002 at step 2"
    assert f"finished {STEPS} steps" in out, out
    # Not from scratch: the old records of steps 1-2 are kept and the new ones continue at 3, once each.
    records = read_jsonl(run / "metrics.jsonl")
    train_steps = [r["step"] for r in records if r.get("split") == "train"]
    assert train_steps == list(range(1, STEPS + 1)), train_steps
    old = read_jsonl(FIXTURES / "pretrain-stopped" / "metrics.jsonl")
    assert records[: len(old)] == old
    old_tokens = next(r["tokens"] for r in old if r.get("split") == "train" and r["step"] == STOPPED_AT)
    step3 = next(r for r in records if r.get("split") == "train" and r["step"] == STOPPED_AT + 1)
    assert step3["tokens"] > old_tokens
    # The old checkpoint is still there, the new one is complete and says step 4, the final models exist.
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert f"step-{STOPPED_AT:08d}" in checkpoints and f"step-{STEPS:08d}" in checkpoints, checkpoints
    for name in ("discriminator", "generator"):
        assert (run / name / "config.json").is_file(), name
        assert (run / name / "model.safetensors").is_file(), name
        assert (run / name / "tokenizer.json").is_file(), name


@pytest.mark.slow
def test_resumed_run_repeats_what_the_old_code_did(resumed: tuple[Path, int, str, str]) -> None:
    """The old code resumed the same checkpoint to step 4 (fixture pretrain/): same data order, masking and
    updates, because the checkpoint carries the RNG state and the data position. Same losses, up to float
    noise."""
    run, code, _, err = resumed
    assert code == 0, err
    new = {(r["split"], r["step"]): r for r in read_jsonl(run / "metrics.jsonl")}
    old = {(r["split"], r["step"]): r for r in read_jsonl(FIXTURES / "pretrain" / "metrics.jsonl")}
    for key in [("train", s) for s in range(STOPPED_AT + 1, STEPS + 1)] + [("val", STEPS)]:
        assert key in new, key
        for metric in ("mlm_loss", "disc_loss"):
            assert new[key][metric] == pytest.approx(old[key][metric], rel=1e-4, abs=1e-5), (key, metric)


@pytest.mark.slow
def test_resumed_discriminator_loads(resumed: tuple[Path, int, str, str]) -> None:
    from electra.hf_format import load_hf_dir

    run, code, _, err = resumed
    assert code == 0, err
    model = load_hf_dir(run / "discriminator")
    assert model.kind == "discriminator"


# ----------------------------------------------------------------------------------------------------------
# Hugging Face directories: fine-tune from the old discriminator, load the old classifier
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_finetune_from_old_discriminator(legacy: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra is not installed")
    out = tmp_path / "classifier"
    code, stdout, err = run_cli(
        "finetune",
        "--task", "custom",
        "--model", str(legacy / "pretrain" / "discriminator"),
        "--train", str(legacy / "inputs" / "train.csv"),
        "--dev", str(legacy / "inputs" / "dev.csv"),
        "--epochs", "1",
        "--batch-size", "8",
        "--max-seq-len", "32",
        "--device", "cpu",
        "--quiet",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert "accuracy" in stdout
    config = json.loads((out / "config.json").read_text())
    assert set(config["id2label"].values()) == {"neg", "pos"}
    assert (out / "eval_results.json").is_file()


def test_old_classifier_and_discriminator_dirs_load(legacy: Path) -> None:
    torch = pytest.importorskip("torch", reason="the train extra is not installed")
    from electra.hf_format import load_hf_dir
    from electra.tokenizer import load_tokenizer

    classifier = load_hf_dir(legacy / "classifier")
    assert classifier.kind == "classifier"
    assert {int(k): v for k, v in classifier.config.id2label.items()} == {0: "neg", 1: "pos"}
    discriminator = load_hf_dir(legacy / "pretrain" / "discriminator")
    assert discriminator.kind == "discriminator"
    generator = load_hf_dir(legacy / "pretrain" / "generator")
    assert generator.kind == "generator"

    enc = load_tokenizer(legacy / "classifier").encode(TEXT)
    ids = torch.tensor([enc.ids])
    with torch.no_grad():
        logits = classifier(ids, torch.ones_like(ids), torch.tensor([enc.type_ids]))
        flags = discriminator(ids, torch.ones_like(ids), torch.tensor([enc.type_ids]))
    assert tuple(logits.shape) == (1, 2) and bool(torch.isfinite(logits).all())
    assert tuple(flags.shape) == (1, len(enc.ids)) and bool(torch.isfinite(flags).all())


# ----------------------------------------------------------------------------------------------------------
# ONNX bundles in the server runtime (the serve extra)
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runners(legacy: Path) -> dict[str, Any]:
    pytest.importorskip("onnxruntime", reason="the serve extra is not installed")
    from electra.serving.engine.runtime import ModelRunner

    return {
        "detector": ModelRunner("detector", legacy / "bundle-discriminator"),
        "sentiment": ModelRunner("sentiment", legacy / "bundle-classifier"),
    }


def test_old_bundles_run_in_the_server_runtime(runners: dict[str, Any]) -> None:
    import numpy as np

    detector, sentiment = runners["detector"], runners["sentiment"]
    assert (detector.kind, sentiment.kind) == ("discriminator", "classifier")
    assert sentiment.labels == ["neg", "pos"]
    (flags,) = detector.infer(detector.encode([TEXT]))
    assert flags.shape == (len(detector.encode([TEXT])[0].ids),) and np.isfinite(flags).all()
    (scores,) = sentiment.infer(sentiment.encode([TEXT]))
    assert scores.shape == (2,) and np.isfinite(scores).all()
    assert detector.describe()["precision"] == "fp32" and sentiment.describe()["precision"] == "int8"


def test_old_bundles_agree_with_old_hf_dirs(legacy: Path, runners: dict[str, Any]) -> None:
    """The new runtime's bundle output = the new PyTorch model's output on the old weights (fp32 exactly,
    int8 within quantisation noise): the old exports and the old weights mean the same thing today."""
    torch = pytest.importorskip("torch", reason="the train extra is not installed")
    import numpy as np

    from electra.hf_format import load_hf_dir

    texts = [TEXT, "A sailor found an old map.", "the kitchen clock was awful at noon"]
    for name, model_dir, atol in (
        ("detector", legacy / "pretrain" / "discriminator", 1e-4),
        ("sentiment", legacy / "classifier", 2e-2),
    ):
        runner = runners[name]
        batch = runner.encode(texts)
        feeds = runner.pad(batch)
        onnx_out = runner.run(feeds)
        model = load_hf_dir(model_dir)
        with torch.no_grad():
            torch_out = model(
                torch.from_numpy(feeds["input_ids"]),
                torch.from_numpy(feeds["attention_mask"]),
                torch.from_numpy(feeds["token_type_ids"]),
            ).numpy()
        if name == "detector":
            mask = feeds["attention_mask"].astype(bool)
            onnx_out, torch_out = onnx_out[mask], torch_out[mask]
        np.testing.assert_allclose(onnx_out, torch_out, atol=atol, rtol=0, err_msg=name)


def test_old_bundles_behind_the_http_app(legacy: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the serve extra is not installed")
    testing = pytest.importorskip("litestar.testing", reason="the serve extra is not installed")
    import time

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    settings = ServeSettings(
        models=(
            ModelSpec("detector", legacy / "bundle-discriminator"),
            ModelSpec("sentiment", legacy / "bundle-classifier"),
        )
    )
    with testing.TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 30
        while client.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.02)
        r = client.post("/detect", json={"model": "detector", "text": TEXT})
        assert r.status_code == 200, r.text
        (result,) = r.json()["results"]
        assert [t["text"] for t in result["tokens"]][:2] == ["The", "baker"]
        r = client.post("/classify", json={"model": "sentiment", "text": TEXT})
        assert r.status_code == 200, r.text
        (result,) = r.json()["results"]
        assert set(result["scores"]) == {"neg", "pos"} and result["label"] in ("neg", "pos")
