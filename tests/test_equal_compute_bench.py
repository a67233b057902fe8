"""The bookkeeping of bench/equal_compute.py: results survive interruptions and partial invocations, and the
README's table reads them right. (The experiment itself needs the shared data and hours of CPU.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import equal_compute as ec  # noqa: E402


def setup_in(work: Path) -> ec.Setup:
    return ec.Setup(
        work=work,
        size="micro",
        steps=2400,
        batch_size=32,
        lr=None,
        generator_lr_scale=0.05,
        points=(0.25, 0.5),
        tasks=("sst2", "conll2003"),
        seeds=(1, 2),
        max_train_examples=3000,
        max_epochs=3,
        swaps=10,
    )


def write_point(setup: ec.Setup, arm: str, point: float, step: int) -> dict:
    rec = {"arm": arm, "point": point, "step": step, "tokens": 100 * step}
    path = ec.point_dir(setup, arm, point) / "point.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec))
    return rec


def test_an_invocation_for_one_arm_reports_every_arm_the_work_directory_holds(tmp_path: Path) -> None:
    # The run of one arm (or a resumed run that has reached its first arm only) must not drop the others'
    # results from the results file: they are read back from the work directory.
    setup = setup_in(tmp_path)
    gdes_25 = write_point(setup, "gdes", 0.25, 600)
    gdes_50 = write_point(setup, "gdes", 0.5, 1200)
    mlm_25 = write_point(setup, "mlm", 0.25, 640)
    (tmp_path / "arms" / "random" / "point-000").mkdir(parents=True)
    (tmp_path / "arms" / "random" / "point-000" / "config.json").write_text("{}")
    electra = [{"arm": "electra", "point": 0.25, "step": 600, "tokens": 1}]

    found = ec.finished_points(setup, {"electra": electra})

    assert list(found) == ["electra", "gdes", "mlm", "random"]  # the README's order
    assert found["electra"] == electra
    assert found["gdes"] == [gdes_25, gdes_50]
    assert found["mlm"] == [mlm_25]
    assert found["random"] == [ec.RANDOM_POINT]


def test_this_invocations_records_win_over_the_files(tmp_path: Path) -> None:
    setup = setup_in(tmp_path)
    write_point(setup, "gdes", 0.25, 600)
    fresh = {"arm": "gdes", "point": 0.25, "step": 600, "tokens": 7, "validation": {"disc_auc": 0.9}}
    assert ec.finished_points(setup, {"gdes": [fresh]}) == {"gdes": [fresh]}


def test_the_cache_skips_a_half_written_line_and_appends_after_it(tmp_path: Path) -> None:
    path = tmp_path / "evaluations.jsonl"
    path.write_text(json.dumps({"key": "a", "score": 1.0}) + "\n" + '{"key": "b", "sco')
    cache = ec.Cache(path)
    assert set(cache.rows) == {"a"}  # b runs again
    cache.put("b", {"score": 2.0})
    again = ec.Cache(path)
    assert again.get("a")["score"] == 1.0 and again.get("b")["score"] == 2.0


def test_markdown_table_rows() -> None:
    result = {
        "setup": {"tasks": ["sst2", "conll2003"]},
        "arms": {
            "random": [
                {
                    "point": 0.0,
                    "step": 0,
                    "tasks": {
                        "sst2": {"median": 71.4, "min": 70.8, "max": 72.0},
                        "conll2003": {"median": 47.2, "min": 46.8, "max": 47.5},
                    },
                    "suite_average": 59.3,
                }
            ],
            "gdes": [
                {
                    "point": 0.25,
                    "step": 600,
                    "flops": 2.28e13,
                    "tasks": {"sst2": {"median": 68.1, "min": 67.2, "max": 68.9}},
                    "validation": {"disc_auc": 0.886, "collapsed": False},
                    "heldout_detection": {"swap_auc": 0.8441, "generator_auc": 0.9037},
                },
                {
                    "point": 0.5,
                    "step": 1200,
                    "flops": 4.55e13,
                    "tasks": {},
                    "validation": {"disc_auc": 0.55, "collapsed": False},
                    "collapsed_at_step": 400,
                },
            ],
        },
    }
    lines = ec.markdown_table(result).splitlines()
    assert lines[0].startswith("| arm | budget | steps | FLOPs | sst2 | conll2003 | average |")
    assert lines[2] == "| random | - | 0 | 0 | 71.4 (70.8-72.0) | 47.2 (46.8-47.5) | 59.3 |  |  |  |"
    assert lines[3] == "| gdes | 25% | 600 | 2.28e+13 | 68.1 (67.2-68.9) |  |  | 0.89 | 0.844 | 0.904 |"
    assert lines[4] == "| gdes | 50% | 1200 | 4.55e+13 |  |  |  | 0.55 (collapsed at 400) |  |  |"


def test_a_collapse_is_found_in_the_training_log_before_the_point(tmp_path: Path) -> None:
    records = [
        {"split": "train", "step": 50, "collapsed": False},
        {"split": "val", "step": 300, "collapsed": False},
        {"split": "train", "step": 400, "collapsed": True},
        {"split": "train", "step": 450, "collapsed": True},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert ec.first_collapse(tmp_path, 300) is None
    assert ec.first_collapse(tmp_path, 600) == 400
    assert ec.first_collapse(tmp_path / "missing", 600) is None


def test_floor_crossing_extrapolates_in_log_flops() -> None:
    # 50 at 1e13, 53 at 1e14: 3 points a decade, so 59 (the floor) at 1e16.
    got = ec.floor_crossing([(1e13, 50.0), (1e14, 53.0)], floor=59.0)
    assert got["above_floor"] is False
    assert abs(got["slope_per_decade"] - 3.0) < 1e-9
    assert abs(got["flops"] / 1e16 - 1.0) < 1e-9
    # Least squares over three points, not the last two.
    three = ec.floor_crossing([(1e13, 50.0), (1e14, 54.0), (1e15, 56.0)], floor=59.0)
    assert abs(three["slope_per_decade"] - 3.0) < 1e-9
    # Falling or flat: no crossing ahead; already above: the last point.
    assert ec.floor_crossing([(1e13, 55.0), (1e14, 54.0)], floor=59.0)["flops"] is None
    above = ec.floor_crossing([(1e13, 58.0), (1e14, 60.0)], floor=59.0)
    assert above["above_floor"] is True and above["flops"] == 1e14


def test_floor_crossings_per_arm() -> None:
    arms = {
        "random": [{"point": 0.0, "suite_average": 59.0}],
        "gdes": [{"flops": 1e13, "suite_average": 50.0}, {"flops": 1e14, "suite_average": 53.0}],
        "mlm": [{"flops": 1e13, "suite_average": 50.0}],  # one point: no line
    }
    got = ec.floor_crossings(arms)
    assert set(got) == {"gdes"} and got["gdes"]["floor"] == 59.0 and got["gdes"]["points"] == 2


def test_the_readme_tables_are_the_results_files() -> None:
    # The README quotes the committed results, not numbers typed in by hand: a rerun that changes them
    # must change the README too.
    import embedding_swap as es

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    results = ROOT / "bench" / "results"
    assert ec.markdown_table(json.loads((results / "equal_compute_cpu.json").read_text())) in readme
    assert es.markdown_table(json.loads((results / "embedding_swap_cpu.json").read_text())) in readme
    assert ec.markdown_table(json.loads((results / "equal_compute_cpu_2x.json").read_text())) in readme
