"""The bookkeeping of experiments/finetune_convergence.py: sizes parse or are refused by name, curves read
the cache per encoder, task and recipe, "stops rising" is the smallest budget within the tolerance of the
best, and the write-up's table is the results file. (The curves themselves need the shared data and hours
of CPU.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import finetune_convergence as fc
from experiments.lib.store import Cache

ROOT = Path(__file__).resolve().parents[1]


def test_sizes_parse_per_task_with_all_for_the_whole_training_set_and_x_for_epochs() -> None:
    got = fc.parse_sizes(["sst2=3000,all", "conll2003=7000,allx6,500x2"], epochs=3)
    assert got == {"sst2": [(3000, 3), (None, 3)], "conll2003": [(7000, 3), (None, 6), (500, 2)]}
    assert [fc.size_name(b) for b in got["conll2003"]] == ["7000x3", "allx6", "500x2"]


@pytest.mark.parametrize(
    "item", ["sst2", "sst2=", "sst2=3000,lots", "sst2=3k", "sst2=allx", "sst2=0", "sst2=allx0", "sst2=x3"]
)
def test_a_bad_size_is_refused_naming_the_item(item: str) -> None:
    with pytest.raises(ValueError, match=f"--sizes '{item}'"):
        fc.parse_sizes([item], epochs=3)


def put(
    cache: Cache,
    encoder: str,
    task: str,
    size: int | None,
    examples: int,
    scores: list[float],
    epochs: int = 3,
) -> None:
    for seed, score in enumerate(scores, start=1):
        key = f"{fc.key(encoder, task, (size, epochs), 'official')}/{task}/{seed}"
        cache.put(key, {"score": score, "train_examples": examples, "epochs": epochs, "seconds": 10.0 * seed})


def test_a_curve_stops_rising_at_the_smallest_budget_within_the_tolerance_of_its_best(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.jsonl")
    put(cache, "random", "sst2", 3000, 3000, [70.0, 72.0])
    put(cache, "random", "sst2", 10000, 10000, [78.0, 79.0])
    put(cache, "random", "sst2", None, 67349, [79.2, 79.0])
    put(cache, "random", "sst2", 1000, 1000, [60.0, 61.0], epochs=30)
    # Given out of order: the curve runs by steps, whatever the sizes and epochs.
    sizes = {"sst2": [(None, 3), (10000, 3), (3000, 3), (1000, 30)]}
    curves = fc.curves(cache, {"random": Path("r")}, sizes, ["official"], (1, 2), tolerance=0.7)
    curve = curves["random"]["sst2"]["official"]
    assert [p["median"] for p in curve["points"]] == [71.0, 78.5, 60.5, 79.1]
    # ceil(examples / batch 32) x epochs: a partial last batch is a step
    assert [(p["train_examples"], p["epochs"], p["steps"]) for p in curve["points"]] == [
        (3000, 3, 282),
        (10000, 3, 939),
        (1000, 30, 960),
        (67349, 3, 6315),
    ]
    assert curve["best_median"] == 79.1
    assert curve["train_examples_within_tolerance"] == 10000 and curve["steps_within_tolerance"] == 939
    tighter = fc.curves(cache, {"random": Path("r")}, sizes, ["official"], (1, 2), tolerance=0.5)
    assert tighter["random"]["sst2"]["official"]["train_examples_within_tolerance"] == 67349


def test_a_size_not_yet_evaluated_is_left_out_and_an_encoder_without_any_is_absent(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.jsonl")
    put(cache, "random", "sst2", 3000, 3000, [70.0])
    curves = fc.curves(
        cache,
        {"random": Path("r"), "mlm": Path("m")},
        {"sst2": [(3000, 3), (10000, 3)]},
        ["official"],
        (1, 2),
        tolerance=0.5,
    )
    assert list(curves) == ["random"]
    assert [p["train_examples"] for p in curves["random"]["sst2"]["official"]["points"]] == [3000]


def test_markdown_table_puts_each_encoder_in_a_column_and_names_a_second_recipe(tmp_path: Path) -> None:
    def point(examples: int, lo: float, hi: float, epochs: int = 3) -> dict:
        return {
            "train_examples": examples,
            "epochs": epochs,
            "steps": examples // 10 * epochs,
            "median": (lo + hi) / 2,
            "min": lo,
            "max": hi,
        }

    result = {
        "setup": {
            "recipes": ["official", "hf"],
            "sizes": {"sst2": ["1000x3", "allx3"], "conll2003": ["allx3", "allx6"]},
        },
        "curves": {
            "random": {
                "conll2003": {
                    "official": {"points": [point(14041, 54.0, 54.2), point(14041, 55.0, 55.5, 6)]}
                },
                "sst2": {
                    "official": {"points": [point(1000, 70.0, 71.0), point(67349, 79.0, 79.2)]},
                    "hf": {"points": [point(67349, 80.0, 80.0)]},
                },
            },
            "mlm": {"sst2": {"official": {"points": [point(1000, 68.0, 69.0)]}}},
        },
    }
    assert fc.markdown_table(result).splitlines() == [
        "| task | training examples | epochs | steps | random | random (hf) | mlm |",
        "|---|---|---|---|---|---|---|",
        "| sst2 | 1,000 | 3 | 300 | 70.5 (70.0-71.0) |  | 68.5 (68.0-69.0) |",
        "| sst2 | 67,349 | 3 | 20,202 | 79.1 (79.0-79.2) | 80.0 (80.0-80.0) |  |",
        "| conll2003 | 14,041 | 3 | 4,212 | 54.1 (54.0-54.2) |  |  |",
        "| conll2003 | 14,041 | 6 | 8,424 | 55.2 (55.0-55.5) |  |  |",
    ]


def test_the_setup_names_each_encoder_by_its_run_not_its_last_directory() -> None:
    encoders = {"mlm": ROOT / "runs" / "eq2" / "arms" / "mlm" / "seed-1" / "point-100" / "mlm"}
    got = fc.describe(encoders, {"sst2": [(None, 3)]}, 3, ["official"], (1, 2), 0.5)
    assert got["encoders"] == {"mlm": "runs/eq2/arms/mlm/seed-1/point-100/mlm"}
    assert got["sizes"] == {"sst2": ["allx3"]} and got["batch_size"] == 32


@pytest.mark.parametrize(
    "argv",
    [
        ["--work", "w"],
        ["--work", "w", "--encoder", "random=r"],
        ["--work", "w", "--encoder", "r", "--sizes", "sst2=3000"],
        ["--work", "w", "--encoder", "a/b=r", "--sizes", "sst2=3000"],
        ["--work", "w", "--encoder", "random=r", "--sizes", "sst2=many"],
    ],
)
def test_bad_arguments_exit_2_with_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        fc.main(argv)
    assert exit_.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_the_write_up_tables_are_the_results_files() -> None:
    paths = sorted((ROOT / "experiments" / "results").glob("finetune_convergence*.json"))
    if not paths:
        pytest.skip("no committed convergence results")
    readme = (ROOT / "experiments" / "README.md").read_text(encoding="utf-8")
    for path in paths:
        assert fc.markdown_table(json.loads(path.read_text())) in readme, path.name
