"""The collapse flag: a discriminator back at the prior after having learned is flagged once, in train and
validation records; a run still learning, or not yet started, is not."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from electra.cli.main import main
from electra.training.pretrain.diagnostics.collapse import CollapseWatch, binary_entropy, prior_gain
from electra.training.pretrain.diagnostics.identity_auc import PHASE_CONTEXT, PHASE_IDENTITY

from .conftest import prepare_tiny_data, tiny_pretrain_args


def train(step: int, loss: float, q: float = 0.148, recall: float = 0.0) -> dict:
    return {"split": "train", "step": step, "disc_loss": loss, "replaced_fraction": q, "disc_recall": recall}


def val(step: int, auc: float, loss: float = 0.40, q: float = 0.148, **extra: object) -> dict:
    rec = {"split": "val", "step": step, "disc_loss": loss, "replaced_fraction": q, "disc_auc": auc}
    return {**rec, **{k if k != "identity" else "identity_auc": v for k, v in extra.items()}}


def test_binary_entropy_is_the_constant_predictors_loss() -> None:
    q = 0.15
    assert binary_entropy(q) == pytest.approx(-(q * math.log(q) + (1 - q) * math.log(1 - q)))
    assert binary_entropy(0.15) == pytest.approx(0.4227, abs=1e-4)
    assert binary_entropy(0.5) == pytest.approx(math.log(2))
    assert binary_entropy(0.0) == binary_entropy(1.0) == 0.0
    assert prior_gain(train(1, binary_entropy(0.148))) == pytest.approx(0.0, abs=1e-12)
    assert prior_gain(train(1, binary_entropy(0.148) / 2)) == pytest.approx(0.5)
    assert prior_gain({"split": "train", "step": 1, "mlm_loss": 3.0}) is None  # the masked-LM baseline


# Figures from a real collapse: ELECTRA tiny, lr 1e-3, batch 32, the shared Wikipedia with BERT's vocabulary.
COLLAPSING = [
    train(25, 0.4197),
    train(200, 0.3305),
    train(400, 0.2795, recall=0.376),
    train(700, 0.3904, recall=0.047),
    train(800, 0.4024, q=0.1485, recall=0.004),
    train(825, 0.4130, q=0.1485, recall=0.0),
]


def texts(lines: list[tuple[int, str]], level: int = logging.WARNING) -> list[str]:
    return [text for lvl, text in lines if lvl == level]


def test_a_collapse_is_flagged_once_and_only_after_learning() -> None:
    watch = CollapseWatch()
    flags, warnings = [], []
    for rec in COLLAPSING:
        warnings.append(texts(watch.observe(rec)))
        flags.append(rec["collapsed"])
    # Step 25 sits at the prior too, but nothing has been learned yet: not a collapse.
    assert flags == [False, False, False, False, False, True]
    assert warnings[:-1] == [[]] * 5
    assert len(warnings[-1]) == 1 and warnings[-1][0].startswith(
        "step 825: the discriminator is back at the prior"
    )
    assert "down from 33.3% at step 400" in warnings[-1][0]
    # It points at the evidence rather than prescribing a remedy.
    assert "identity_auc" in warnings[-1][0] and "generator-lr-scale" not in warnings[-1][0]
    assert COLLAPSING[2]["disc_prior_gain"] == pytest.approx(1 - 0.2795 / binary_entropy(0.148))
    # Still collapsed later: flagged in the record, not warned about again.
    rec = train(900, 0.4131, q=0.1485)
    assert watch.observe(rec) == [] and rec["collapsed"]


def test_validation_auc_collapse_and_a_healthy_run() -> None:
    watch = CollapseWatch()
    records = [val(100, 0.70), val(200, 0.85), val(300, 0.88), val(700, 0.65), val(800, 0.598)]
    out = [texts(watch.observe(r)) for r in records]
    assert [r["collapsed"] for r in records] == [False, False, False, False, True]
    assert out[-1] and "validation AUC 0.60, down from 0.88 at step 300" in out[-1][0]
    healthy = CollapseWatch()
    for step, loss, recall in [(100, 0.41, 0.0), (200, 0.33, 0.0), (400, 0.28, 0.3), (800, 0.30, 0.2)]:
        rec = train(step, loss, recall=recall)
        assert healthy.observe(rec) == [] and not rec["collapsed"]
    # Back at the prior while still flagging replaced tokens is not a collapse: the recall says it learns.
    rec = train(900, 0.4125, recall=0.2)
    assert healthy.observe(rec) == [] and not rec["collapsed"]


def test_the_warning_says_what_the_identity_only_auc_shows() -> None:
    """A peak no higher than identity allows, then both fall: the warning names both figures and the phase."""
    watch = CollapseWatch()
    watch.observe(val(300, 0.80, identity=0.81, phase=PHASE_IDENTITY))
    (warning,) = texts(watch.observe(val(800, 0.55, identity=0.53, phase=PHASE_IDENTITY)))
    assert "down from 0.80 at step 300" in warning
    assert "identity alone could reach 0.81 at that peak and 0.53 now" in warning
    assert "no more than identity gives" in warning and "phase 'identity'" in warning
    # A peak clearly above identity is said to be so.
    other = CollapseWatch()
    other.observe(val(300, 0.80, identity=0.70, phase=PHASE_IDENTITY))
    (warning,) = texts(other.observe(val(800, 0.55, identity=0.53, phase=PHASE_IDENTITY)))
    assert "its peak was above what identity gives" in warning


def test_reading_context_is_noted_once_and_ends_the_warnings() -> None:
    watch = CollapseWatch()
    assert watch.observe(val(300, 0.60, identity=0.55, phase=PHASE_IDENTITY)) == []
    (note,) = texts(watch.observe(val(600, 0.75, identity=0.52, phase=PHASE_CONTEXT)), logging.INFO)
    assert note == (
        "step 600: the discriminator reads context: validation AUC 0.750 against 0.520 for token identity "
        "alone"
    )
    assert watch.observe(val(900, 0.80, identity=0.52, phase=PHASE_CONTEXT)) == []


def test_the_watch_resumes_with_the_run() -> None:
    watch = CollapseWatch()
    for rec in COLLAPSING[:4]:
        watch.observe(dict(rec))
    resumed = CollapseWatch()
    resumed.load_state_dict(json.loads(json.dumps(watch.state_dict())))  # as trainer_state.json holds it
    a, b = dict(COLLAPSING[-1]), dict(COLLAPSING[-1])
    assert watch.observe(a) == resumed.observe(b) and a == b and a["collapsed"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_tiny_data(tmp_path_factory.mktemp("collapse-data"), n_docs=40)


def test_the_trainer_writes_the_flag_and_warns(data_dir: Path, tmp_path: Path, caplog, monkeypatch) -> None:
    """With the bars moved so that any record counts as collapsed, the trainer marks every record, train and
    validation, and warns once."""
    from electra.training.pretrain.diagnostics import collapse

    monkeypatch.setattr(collapse, "LEARNED_GAIN", -1.0)
    monkeypatch.setattr(collapse, "COLLAPSED_GAIN", 10.0)
    monkeypatch.setattr(collapse, "COLLAPSED_RECALL", 2.0)
    run = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="electra.pretrain"):
        assert main(tiny_pretrain_args(data_dir, run, "--steps", "4", "--eval-every", "2", "--quiet")) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train_records = [r for r in records if r["split"] == "train"]
    assert all("disc_prior_gain" in r and "collapsed" in r for r in records)
    assert [r["collapsed"] for r in train_records] == [True, True, True, True]
    warnings = [r.message for r in caplog.records if "back at the prior" in r.message]
    assert len(warnings) == 1 and warnings[0].startswith("step 1:")
    # Every validation record ranks maskable tokens and carries the identity-only AUC and the phase.
    val_records = [r for r in records if r["split"] == "val"]
    assert val_records and all(0.0 <= r["identity_auc"] <= 1.0 for r in val_records)
    # The better of the likelihood ratio's ranking and the held-apart shares' (diagnostics.identity_auc).
    assert all(r["identity_auc_held_apart"] is not None for r in val_records)  # two folds or more
    for r in val_records:
        parts = [r["identity_auc_ratio"], r["identity_auc_held_apart"]]
        assert r["identity_auc"] == max(p for p in parts if p is not None), r
    assert all(r["phase"] in (PHASE_IDENTITY, PHASE_CONTEXT) for r in val_records)


def test_the_plot_draws_the_identity_bound_and_names_the_phase(tmp_path: Path) -> None:
    from electra.training.pretrain.diagnostics import plot

    records = [
        val(300, 0.80, identity=0.81, phase=PHASE_IDENTITY),
        val(600, 0.55, identity=0.53, phase=PHASE_IDENTITY),
    ]
    assert plot.phase_title(records) == "phase: identity (to step 600: not above token identity alone)"
    records.append(val(900, 0.70, identity=0.52, phase=PHASE_CONTEXT))
    assert plot.phase_title(records) == "phase: reading context from step 900"
    assert plot.phase_title([val(300, 0.8)]) is None  # a run from before the identity-only AUC
    key, split, _, label = plot.EXTRA_LINES["disc_auc"]
    assert plot.series(records, key, split) == [(300, 0.81), (600, 0.53), (900, 0.52)]
    assert "identity" in label
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    png = plot.plot_run(run)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_discriminator_below_what_identity_gives_is_warned_about_once() -> None:
    """As the official arm (micro, tied, generator at the full rate) was at 25% of its budget: validation AUC
    0.524 against 0.551 for token identity alone."""
    watch = CollapseWatch()
    assert watch.observe(val(1626, 0.536, identity=0.55, phase=PHASE_IDENTITY)) == []
    (warning,) = texts(watch.observe(val(3252, 0.524, identity=0.551, phase=PHASE_IDENTITY)))
    assert warning.startswith("step 3252: validation AUC 0.524 is below the 0.551 that token identity alone")
    assert texts(watch.observe(val(4878, 0.52, identity=0.56, phase=PHASE_IDENTITY))) == []
