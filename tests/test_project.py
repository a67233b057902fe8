"""The project's promises about itself: README set-up commands, layout, the main job."""

from __future__ import annotations

import importlib
import os
import re
import time
from pathlib import Path

import pytest

from electra.cli.main import main
from electra.training.data.dataset import PretrainingData

ROOT = Path(__file__).resolve().parents[1]


def _readme_block(marker: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(rf"<!-- {marker} -->\s*```bash\n(.+?)\n```", text, re.S)
    assert m, f"README.md lacks the {marker} block"
    return m.group(1).strip()


def test_readme_has_exactly_the_two_setup_commands_and_ci_runs_the_test_one() -> None:
    main_cmd, test_cmd = _readme_block("main-command"), _readme_block("test-command")
    assert "\n" not in main_cmd and "\n" not in test_cmd
    assert "electra demo" in main_cmd and "pytest" in test_cmd
    assert "-c constraints.txt" in main_cmd and "-c constraints.txt" in test_cmd
    ci = (ROOT / ".ci" / "run").read_text()
    assert "test-command" in ci, ".ci/run must run the command from the README"


def test_torch_pin_is_satisfiable_by_the_local_cpu_wheel() -> None:
    constraints = (ROOT / "constraints.txt").read_text()
    assert re.search(r"^torch==2\.13\.0$", constraints, re.M)


def test_subpackages_import_and_no_top_level_onnx_shadows_the_library() -> None:
    for name in ("electra.training", "electra.onnx", "electra.serving"):
        importlib.import_module(name)
    assert not (ROOT / "onnx" / "__init__.py").exists()
    assert not (ROOT / "onnx.py").exists()


@pytest.mark.slow
def test_demo_builds_every_stage_serves_the_bundle_and_reuses_stages(tmp_path: Path, capsys) -> None:
    from litestar.testing import TestClient

    from electra.bundle import read_bundle
    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    work = tmp_path / "demo"
    argv = ["demo", "--workdir", str(work), "--corpus-mb", "1", "--vocab-size", "2000", "--steps", "12"]
    assert main([*argv, "--no-serve", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "demo corpus" in err and "bundle ready" in out
    # One line says how many threads pre-training took and why (the tests fix them with OMP_NUM_THREADS).
    threads = os.environ["OMP_NUM_THREADS"]
    assert (
        f"pre-training on {threads} CPU thread{'s' if threads != '1' else ''} (OMP_NUM_THREADS={threads})"
        in err
    )
    data = PretrainingData.open(work / "data")
    assert len(data.train) > 100 and len(data.val) > 0
    assert data.manifest["tokenizer"]["vocab_size"] <= 2000
    assert (work / "pretrain" / "metrics.jsonl").is_file()
    bundle = read_bundle(work / "bundle")
    assert bundle.kind == "discriminator" and bundle.fused_operators["Attention"] == 2

    text = "The server scores every token of this sentence."
    with TestClient(create_app(ServeSettings(models=(ModelSpec("demo", work / "bundle"),)))) as client:
        deadline = time.monotonic() + 30
        while client.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = client.post("/detect", json={"text": text})
        assert r.status_code == 200, r.text
        tokens = r.json()["results"][0]["tokens"]
        assert [text[t["start"] : t["end"]] for t in tokens] == [t["text"] for t in tokens]

    # A second run reuses every finished stage.
    assert main([*argv, "--no-serve", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("reusing") == 5 and "CPU thread" not in err
