"""experiments/generator_strength.py: each ELECTRA setting's generator context gain against its fine-tuned
suite average, read from equal-compute results files, with the masked LM and random init beside them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import spearmanr

from experiments import generator_strength as gs


def run(
    seed: int, loss: float | None, sst2: float | None, conll: float | None, auc: float | None = None
) -> dict:
    tasks = {}
    if sst2 is not None:
        tasks["sst2"] = {"median": sst2}
    if conll is not None:
        tasks["conll2003"] = {"median": conll}
    val: dict[str, Any] = {} if loss is None else {"mlm_loss": loss}
    if auc is not None:
        val["disc_auc"] = auc
    return {"seed": seed, "point": 1.0, "step": 100, "tasks": tasks, "validation": val}


def result(name: str, arms: dict[str, list[dict]], scale: float = 0.05) -> dict:
    def row(point: float, runs: list[dict]) -> dict:
        scored = [r for r in runs if len(r["tasks"]) == 2]
        avg = sum((r["tasks"]["sst2"]["median"] + r["tasks"]["conll2003"]["median"]) / 2 for r in scored)
        return {"point": point, "runs": runs, **({"suite_average": avg / len(scored)} if scored else {})}

    return {
        "benchmark": name,
        "unigram_entropy": 7.0,
        "setup": {
            "tasks": ["sst2", "conll2003"],
            "recipe": {"generator_lr_scale": scale, "generator_size": None},
        },
        "arms": {arm: [row(0.0 if arm == "random" else 1.0, runs)] for arm, runs in arms.items()},
    }


V3 = result("v3", {"official": [run(1, 6.0, 80.0, 60.0, 0.7), run(2, 6.2, 81.0, 59.0, 0.68)]})
V2 = result(
    "v2",
    {
        "official": [run(1, 1.0, 0.0, 0.0)],  # V3's wins: given first
        "gdes-all": [run(1, 6.6, 81.0, 55.0, 0.75)],
        "mlm": [run(1, 5.5, 80.7, 65.9)],
        "random": [
            {
                "seed": 1,
                "point": 0.0,
                "step": 0,
                "tasks": {"sst2": {"median": 79.5}, "conll2003": {"median": 53.7}},
            }
        ],
    },
)
SWEEP = result(
    "sweep", {"gdes-1x": [run(1, 6.4, 80.0, 57.0, 0.72)], "gdes-all-0.2-half": [run(1, 6.5, 79.0, None)]}
)


def test_settings_take_their_recipe_from_the_arm_and_their_file() -> None:
    out = gs.collect([V3, V2, SWEEP])
    s = out["settings"]
    assert list(s) == ["official", "gdes-all", "gdes-1x", "gdes-all-0.2-half"]
    assert s["official"]["file"] == "v3"
    assert (s["official"]["generator_lr_scale"], s["official"]["adam"], s["official"]["schedule"]) == (
        1.0,
        "official",
        "official",
    )
    # gdes-all takes its file's scale; the sweep's arms carry their own rate and width.
    assert (s["gdes-all"]["generator_lr_scale"], s["gdes-all"]["generator_size"], s["gdes-all"]["adam"]) == (
        0.05,
        0.25,
        "torch",
    )
    assert (s["gdes-all-0.2-half"]["generator_lr_scale"], s["gdes-all-0.2-half"]["generator_size"]) == (
        0.2,
        0.5,
    )
    # Context gain: the unigram entropy minus the generator's validation loss, the median over seeds.
    assert s["official"]["context_gain"] == pytest.approx(0.9)
    assert [r["context_gain"] for r in s["official"]["runs"]] == pytest.approx([1.0, 0.8])
    assert s["official"]["runs"][0]["suite_average"] == 70.0
    # A run not yet scored on every task has no suite average.
    assert s["gdes-all-0.2-half"]["runs"][0]["suite_average"] is None
    refs = out["references"]
    assert refs["mlm"]["context_gain"] == pytest.approx(1.5) and refs["random"][
        "suite_average"
    ] == pytest.approx(66.6)


def test_the_rank_correlation_is_spearmans_over_the_settings_with_both_figures() -> None:
    out = gs.collect([V3, V2, SWEEP])
    pts = [
        (s["context_gain"], s["suite_average"])
        for s in out["settings"].values()
        if s.get("suite_average") is not None
    ]
    assert len(pts) == 3 and out["rank_correlation"]["settings"] == 3
    want = spearmanr([g for g, _ in pts], [a for _, a in pts]).statistic
    assert out["rank_correlation"]["spearman_rho"] == pytest.approx(want)
    # Ties share their mean rank, as scipy ranks them.
    assert list(gs.ranks([3.0, 1.0, 3.0, 2.0])) == [3.5, 1.0, 3.5, 2.0]
    assert gs.rank_correlation({"a": {"context_gain": 1.0, "suite_average": 2.0}}) is None


def test_the_table_orders_settings_by_context_gain_and_ends_with_the_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gs, "RESULTS", tmp_path)
    for r in (V3, V2, SWEEP):
        (tmp_path / f"{r['benchmark']}.json").write_text(json.dumps(r))
    assert gs.main(["--results", "v3,v2,sweep", "--name", "gs"]) == 0
    written = json.loads((tmp_path / "gs.json").read_text())
    assert written["sources"] == ["v3", "v2", "sweep"] and (tmp_path / "gs.png").stat().st_size > 1000
    lines = gs.markdown_table(written).splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| gdes-all",
        "| gdes-all-0.2-half",
        "| gdes-1x",
        "| official",
        "| mlm",
        "| random",
    ]
    assert lines[5] == "| official | tied | 1x | 1/4 | official | 1, 2 | +0.90 | 0.690 | 70.0 |"
    assert gs.main(["--results", "absent", "--name", "gs"]) == 2
