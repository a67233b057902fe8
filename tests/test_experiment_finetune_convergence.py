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


def test_sizes_parse_per_task_with_all_for_the_whole_training_set() -> None:
    got = fc.parse_sizes(["sst2=3000,all", "conll2003=7000"])
    assert got == {"sst2": [3000, None], "conll2003": [7000]}


@pytest.mark.parametrize("item", ["sst2", "sst2=", "sst2=3000,lots", "sst2=3k"])
def test_a_bad_size_is_refused_naming_the_item(item: str) -> None:
    with pytest.raises(ValueError, match=f"--sizes '{item}'"):
        fc.parse_sizes([item])


def put(cache: Cache, encoder: str, task: str, size: int | None, examples: int, scores: list[float]) -> None:
    for seed, score in enumerate(scores, start=1):
        key = f"{fc.key(encoder, task, size, 3, 'official')}/{task}/{seed}"
        cache.put(key, {"score": score, "train_examples": examples, "epochs": 3, "seconds": 10.0 * seed})


def test_a_curve_stops_rising_at_the_smallest_budget_within_the_tolerance_of_its_best(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.jsonl")
    put(cache, "random", "sst2", 3000, 3000, [70.0, 72.0])
    put(cache, "random", "sst2", 10000, 10000, [78.0, 79.0])
    put(cache, "random", "sst2", None, 67349, [79.2, 79.0])
    curves = fc.curves(
        cache, {"random": Path("r")}, {"sst2": [3000, 10000, None]}, 3, ["official"], (1, 2), tolerance=0.7
    )
    curve = curves["random"]["sst2"]["official"]
    assert [p["median"] for p in curve["points"]] == [71.0, 78.5, 79.1]
    # ceil(examples / batch 32) x 3 epochs: a partial last batch is a step
    assert [p["steps"] for p in curve["points"]] == [282, 939, 6315]
    assert curve["best_median"] == 79.1
    assert curve["train_examples_within_tolerance"] == 10000 and curve["steps_within_tolerance"] == 939
    tighter = fc.curves(
        cache, {"random": Path("r")}, {"sst2": [3000, 10000, None]}, 3, ["official"], (1, 2), tolerance=0.5
    )
    assert tighter["random"]["sst2"]["official"]["train_examples_within_tolerance"] == 67349


def test_a_size_not_yet_evaluated_is_left_out_and_an_encoder_without_any_is_absent(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.jsonl")
    put(cache, "random", "sst2", 3000, 3000, [70.0])
    curves = fc.curves(
        cache,
        {"random": Path("r"), "mlm": Path("m")},
        {"sst2": [3000, 10000]},
        3,
        ["official"],
        (1, 2),
        tolerance=0.5,
    )
    assert list(curves) == ["random"]
    assert [p["train_examples"] for p in curves["random"]["sst2"]["official"]["points"]] == [3000]


def test_markdown_table_puts_each_encoder_in_a_column_and_names_a_second_recipe(tmp_path: Path) -> None:
    def point(examples: int, lo: float, hi: float) -> dict:
        return {
            "train_examples": examples,
            "steps": examples // 10,
            "median": (lo + hi) / 2,
            "min": lo,
            "max": hi,
        }

    result = {
        "setup": {"recipes": ["official", "hf"], "sizes": {"sst2": [1000, None], "conll2003": [None]}},
        "curves": {
            "random": {
                "conll2003": {"official": {"points": [point(14041, 54.0, 54.2)]}},
                "sst2": {
                    "official": {"points": [point(1000, 70.0, 71.0), point(67349, 79.0, 79.2)]},
                    "hf": {"points": [point(67349, 80.0, 80.0)]},
                },
            },
            "mlm": {"sst2": {"official": {"points": [point(1000, 68.0, 69.0)]}}},
        },
    }
    assert fc.markdown_table(result).splitlines() == [
        "| task | training examples | steps | random | random (hf) | mlm |",
        "|---|---|---|---|---|---|",
        "| sst2 | 1,000 | 100 | 70.5 (70.0-71.0) |  | 68.5 (68.0-69.0) |",
        "| sst2 | 67,349 | 6,734 | 79.1 (79.0-79.2) | 80.0 (80.0-80.0) |  |",
        "| conll2003 | 14,041 | 1,404 | 54.1 (54.0-54.2) |  |  |",
    ]


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
