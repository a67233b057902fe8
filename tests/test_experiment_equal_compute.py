"""The bookkeeping of experiments/equal_compute.py: results survive interruptions and invocations split by
arm or seed, spreads pool pre-training x fine-tuning seeds, and the write-up's tables read the results files.
(The experiment itself needs the shared data and hours of CPU.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiments import equal_compute as ec
from experiments.lib.arms import Setup, finetune_keys, load_setup, point_dir, save_setup
from experiments.lib.evaluation import FinetuneBudget
from experiments.lib.pretraining import Recipe, first_collapse
from experiments.lib.store import Cache

ROOT = Path(__file__).resolve().parents[1]


def setup_in(work: Path, seeds: tuple[int, ...] = (1, 2)) -> Setup:
    return Setup(
        work=work,
        vocab="cased-8192",
        size="micro",
        flops=1e14,
        recipe=Recipe(lr=1e-3, generator_lr_scale=0.5),
        points=(0.25, 0.5),
        pretrain_seeds=seeds,
        tasks=("sst2", "conll2003"),
        finetune_seeds=(1, 2),
        budgets={"sst2": FinetuneBudget(20000, 3), "conll2003": FinetuneBudget(None, 3)},
        swaps=10,
    )


def write_point(setup: Setup, arm: str, seed: int, point: float, step: int) -> dict:
    rec = {"point": point, "step": step, "tokens": 100 * step, "seed": seed}
    path = point_dir(setup, arm, seed, point) / "point.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec))
    return rec


def test_points_are_read_back_per_seed_from_the_work_directory(tmp_path: Path) -> None:
    setup = setup_in(tmp_path)
    late = write_point(setup, "gdes", 1, 0.5, 1200)
    early = write_point(setup, "gdes", 1, 0.25, 600)
    assert ec.finished_points(setup, "gdes", 1) == [early, late]
    assert ec.finished_points(setup, "gdes", 2) == []
    assert ec.finished_points(setup, "random", 1) == []
    rand = point_dir(setup, "random", 1, 0.0)
    rand.mkdir(parents=True)
    (rand / "config.json").write_text("{}")
    assert ec.finished_points(setup, "random", 1) == [{"point": 0.0, "step": 0, "tokens": 0, "seed": 1}]


def test_an_invocation_for_one_seed_reports_the_seeds_other_invocations_left(tmp_path: Path) -> None:
    from experiments.lib.arms import seeds_held

    setup = setup_in(tmp_path, seeds=(1,))
    write_point(setup, "mlm", 2, 0.25, 640)
    assert seeds_held(setup, "mlm") == [1, 2]
    save_setup(setup_in(tmp_path, seeds=(2,)))
    save_setup(setup)
    again = load_setup(tmp_path)
    assert again.pretrain_seeds == (1, 2)  # both invocations' seeds
    assert again.budgets == setup.budgets and again.recipe == setup.recipe and again.vocab == "cased-8192"
    # One work directory, one experiment: a changed setup is refused, not mixed in.
    from dataclasses import replace

    with pytest.raises(ValueError, match="another flops; use another --work"):
        save_setup(replace(setup, flops=2e14))


def test_the_setup_of_a_work_directory_that_never_ran_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"run experiments\.equal_compute there first"):
        load_setup(tmp_path)


def test_each_arm_gets_the_shared_recipe_with_its_own_objective_and_sharing(tmp_path: Path) -> None:
    setup = setup_in(tmp_path)
    gdes, gdes_all, mlm = (setup.arm_recipe(a) for a in ("gdes", "gdes-all", "mlm"))
    assert (gdes.embedding_sharing, gdes.generator_lr_scope, gdes.generator_lr_scale) == (
        "gdes",
        "layers",
        0.5,
    )
    assert (gdes_all.generator_lr_scope, gdes_all.lr) == ("all", 1e-3)
    # The masked LM has no generator: no slowing, no width.
    assert (mlm.objective, mlm.generator_lr_scale, mlm.generator_size, mlm.lr) == ("mlm", 1.0, None, 1e-3)
    with pytest.raises(ValueError):
        setup.arm_recipe("random")


def test_evaluation_keys_name_the_budget_so_a_changed_budget_is_evaluated_anew(tmp_path: Path) -> None:
    setup = setup_in(tmp_path)
    keys = finetune_keys(setup, "mlm", 2, 0.5)
    assert keys("sst2", 3) == "finetune/mlm/2/0.5/sst2/20000x3/official/3"
    assert keys("conll2003", 1) == "finetune/mlm/2/0.5/conll2003/allx3/official/1"


def test_per_task_budgets_parse_and_refuse_a_task_not_in_the_suite() -> None:
    got = ec.budgets("sst2=20000,conll2003=all", ("sst2", "conll2003"), 3, "official")
    assert got == {"sst2": FinetuneBudget(20000, 3), "conll2003": FinetuneBudget(None, 3)}
    assert ec.budgets("5000", ("sst2",), 2, "hf") == {"sst2": FinetuneBudget(5000, 2, "hf")}
    with pytest.raises(ValueError, match="'mrpc' is not one of the tasks"):
        ec.budgets("mrpc=100", ("sst2",), 3, "official")


def test_a_point_pools_every_pretraining_and_finetuning_seed(tmp_path: Path) -> None:
    setup = setup_in(tmp_path)

    def run(seed: int, sst2: list[float], conll: list[float], auc: float) -> dict:
        return {
            "seed": seed,
            "step": 600,
            "tokens": 1,
            "flops": 1e13 * seed,
            "validation": {"disc_auc": auc},
            "collapsed_at_step": None,
            "tasks": {
                "sst2": {"per_seed": sst2, "median": sorted(sst2)[0]},
                "conll2003": {"per_seed": conll, "median": sorted(conll)[0]},
            },
        }

    row = ec.point_row(
        setup, 0.25, [run(1, [70.0, 72.0], [40.0, 41.0], 0.8), run(2, [60.0, 61.0], [50.0, 52.0], 0.9)]
    )
    assert row["tasks"]["sst2"] == {
        "median": 65.5,
        "min": 60.0,
        "max": 72.0,
        "per_seed": [70.0, 72.0, 60.0, 61.0],
        "pretrain_seeds": [1, 2],
    }
    assert row["tasks"]["conll2003"]["median"] == 45.5
    assert row["suite_average"] == pytest.approx((65.5 + 45.5) / 2)
    assert row["flops"] == pytest.approx(1.5e13)
    assert row["validation"] == {"disc_auc": pytest.approx(0.85)}
    assert row["pretrain_seeds"] == [1, 2]
    assert row["suite_average_per_pretrain_seed"] == [
        pytest.approx((70 + 40) / 2),
        pytest.approx((60 + 50) / 2),
    ]
    # A task one seed was not evaluated on (only the top point of a second seed, say) pools the seeds that
    # were, and says which.
    partial = run(2, [60.0], [1.0], 0.9)
    del partial["tasks"]["conll2003"]
    got = ec.point_row(setup, 0.25, [run(1, [70.0], [40.0], 0.8), partial])
    assert got["tasks"]["conll2003"] == {
        "median": 40.0,
        "min": 40.0,
        "max": 40.0,
        "per_seed": [40.0],
        "pretrain_seeds": [1],
    }
    assert got["tasks"]["sst2"]["pretrain_seeds"] == [1, 2]
    assert got["suite_average_per_pretrain_seed"] == [pytest.approx(55.0)]


def test_beyond_the_spread_means_the_ranges_do_not_touch() -> None:
    def row(point: float, lo: float, mid: float, hi: float) -> dict:
        return {
            "point": point,
            "tasks": {"sst2": {"median": mid, "min": lo, "max": hi}},
            "suite_average": mid,
        }

    arms = {
        "random": [row(0.0, 70.0, 71.0, 72.0)],
        "mlm": [row(0.5, 71.5, 73.0, 74.0), row(1.0, 72.5, 75.0, 76.0)],
    }
    got = ec.against_random(arms)["mlm"]
    assert got["0.5"]["sst2"] == {"gap": 2.0, "beyond_spread": False}  # 71.5 < 72.0: the ranges overlap
    assert got["1"]["sst2"] == {"gap": 4.0, "beyond_spread": True}
    assert got["1"]["suite_average"] == {"gap": 4.0, "beyond_spread": True}
    assert got["0.5"]["suite_average"] == {"gap": 2.0, "beyond_spread": False}


def test_the_cache_skips_a_half_written_line_and_appends_after_it(tmp_path: Path) -> None:
    path = tmp_path / "evaluations.jsonl"
    path.write_text(json.dumps({"key": "a", "score": 1.0}) + "\n" + '{"key": "b", "sco')
    cache = Cache(path)
    assert set(cache.rows) == {"a"}  # b runs again
    cache.put("b", {"score": 2.0})
    again = Cache(path)
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
    # Results of the script's first version name no pre-training seeds: no column for them.
    assert lines[0].startswith("| arm | budget | steps | FLOPs | sst2 | conll2003 | average |")
    assert lines[2] == "| random | - | 0 | 0 | 71.4 (70.8-72.0) | 47.2 (46.8-47.5) | 59.3 |  |  |  |"
    assert lines[3] == "| gdes | 25% | 600 | 2.28e+13 | 68.1 (67.2-68.9) |  |  | 0.89 | 0.844 | 0.904 |"
    assert lines[4] == "| gdes | 50% | 1200 | 4.55e+13 |  |  |  | 0.55 (collapsed at 400) |  |  |"
    # Results that name them: the seeds each row pools, those of any task.
    result["arms"]["gdes"][0]["pretrain_seeds"] = [1, 2]
    result["arms"]["gdes"][0]["tasks"]["sst2"]["pretrain_seeds"] = [2, 1]
    result["arms"]["gdes"][1]["pretrain_seeds"] = [1, 2]
    lines = ec.markdown_table(result).splitlines()
    assert lines[0].startswith("| arm | budget | pre-training seeds | steps | FLOPs | sst2 |")
    assert lines[2].startswith("| random | - |  | 0 | 0 | 71.4 (70.8-72.0) |")
    assert lines[3].startswith("| gdes | 25% | 1, 2 | 600 | 2.28e+13 | 68.1 (67.2-68.9) |")
    assert lines[4].startswith("| gdes | 50% |  | 1200 |")


def test_a_collapse_is_found_in_the_training_log_before_the_point(tmp_path: Path) -> None:
    records = [
        {"split": "train", "step": 50, "collapsed": False},
        {"split": "val", "step": 300, "collapsed": False},
        {"split": "train", "step": 400, "collapsed": True},
        {"split": "train", "step": 450, "collapsed": True},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert first_collapse(tmp_path, 300) is None
    assert first_collapse(tmp_path, 600) == 400
    assert first_collapse(tmp_path / "missing", 600) is None


def test_validation_history_puts_each_validation_at_the_flops_spent_by_its_step(tmp_path: Path) -> None:
    import numpy as np

    records = [
        {"split": "train", "step": 2, "mlm_loss": 9.0},
        {"split": "val", "step": 2, "mlm_loss": 7.5, "disc_auc": 0.6, "disc_loss": 0.4},
        {"split": "val", "step": 4, "mlm_loss": 7.2, "disc_auc": 0.65},
        # resumed from a checkpoint before step 4: validated again, the later record counts
        {"split": "val", "step": 4, "mlm_loss": 7.1, "disc_auc": 0.66},
        {"split": "val", "step": 6, "mlm_loss": 7.0},  # past the point
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    curve = np.array([10.0, 20.0, 35.0, 50.0, 60.0])  # cumulative FLOPs after steps 1..5
    assert ec.validation_history(tmp_path, curve) == [
        {"step": 2, "flops": 20.0, "mlm_loss": 7.5, "disc_auc": 0.6},
        {"step": 4, "flops": 50.0, "mlm_loss": 7.1, "disc_auc": 0.66},
    ]
    assert ec.validation_history(tmp_path / "missing", curve) == []


def test_pretraining_table_gives_each_seed_and_point_its_context_gain() -> None:
    def run(seed: int, point: float, step: int, loss: float, auc: float | None = None) -> dict:
        val = {"mlm_loss": loss} if auc is None else {"mlm_loss": loss, "disc_auc": auc}
        return {"seed": seed, "point": point, "step": step, "tokens": step * 4000, "validation": val}

    result = {
        "unigram_entropy": 7.0,
        "arms": {
            "gdes-all": [
                {"point": 0.5, "runs": [run(1, 0.5, 500, 6.9, 0.7012), run(2, 0.5, 501, 7.2, 0.65)]},
                {"point": 1.0, "runs": [run(1, 1.0, 1000, 6.6, 0.757)]},
            ],
            "mlm": [
                {
                    "point": 1.0,
                    "runs": [
                        run(1, 1.0, 1100, 5.53),
                        {"seed": 2, "point": 1.0, "step": 1100, "tokens": 4.4e6},
                    ],
                }
            ],
            "random": [{"point": 0.0, "runs": [{"seed": 1, "point": 0.0, "step": 0, "tokens": 0}]}],
        },
    }
    assert ec.pretraining_table(result).splitlines()[2:] == [
        "| gdes-all | 1 | 50% | 500 | 2.0M | 6.90 | +0.10 | 0.701 |",
        "| gdes-all | 1 | 100% | 1,000 | 4.0M | 6.60 | +0.40 | 0.757 |",
        "| gdes-all | 2 | 50% | 501 | 2.0M | 7.20 | -0.20 | 0.650 |",
        "| mlm | 1 | 100% | 1,100 | 4.4M | 5.53 | +1.47 |  |",
        "| mlm | 2 | 100% | 1,100 | 4.4M |  |  |  |",
    ]


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
    # 3 points a decade from 53 at 1e14: the floor (59) at 1e16, the aim (62) a decade later.
    assert got["gdes"]["flops"] == pytest.approx(1e16)
    assert got["gdes"]["aim"]["margin"] == ec.AIM_MARGIN == 3.0
    assert got["gdes"]["aim"]["flops"] == pytest.approx(1e17)
    assert got["gdes"]["aim"]["above_floor"] is False


def test_an_arm_above_the_floor_but_short_of_the_aim_gets_the_aims_budget() -> None:
    arms = {
        "random": [{"point": 0.0, "suite_average": 50.0}],
        "gdes-all": [{"flops": 1e13, "suite_average": 50.5}, {"flops": 1e14, "suite_average": 51.5}],
    }
    got = ec.floor_crossings(arms)["gdes-all"]
    assert got["above_floor"] is True and got["flops"] == 1e14
    # 1 point a decade from 51.5 at 1e14: 53 (floor + 3) at 10**15.5.
    assert got["aim"]["above_floor"] is False
    assert got["aim"]["flops"] == pytest.approx(10**15.5)


def test_each_seed_is_plotted_with_the_history_of_its_furthest_point(tmp_path: Path) -> None:
    def run(seed: int, steps: int) -> dict:
        return {
            "seed": seed,
            "validation_history": [
                {"step": s, "flops": s * 1e10, "mlm_loss": 7.0} for s in range(1, steps + 1)
            ],
        }

    rows = [{"point": 0.5, "runs": [run(1, 5), run(2, 4)]}, {"point": 1.0, "runs": [run(1, 10)]}]
    got = ec.histories(rows)
    assert sorted(got) == [1, 2]
    assert [h["step"] for h in got[1]] == list(range(1, 11)) and len(got[2]) == 4
    result = {"arms": {"mlm": rows}, "unigram_entropy": 7.01}
    assert ec.plot_pretraining(result, tmp_path / "p.png").stat().st_size > 0


def test_the_suite_averages_range_is_the_average_of_the_task_ranges() -> None:
    def row(sst2: tuple[float, float], conll: tuple[float, float]) -> dict:
        tasks = {
            t: {"min": lo, "median": (lo + hi) / 2, "max": hi}
            for t, (lo, hi) in (("sst2", sst2), ("conll2003", conll))
        }
        return {"tasks": tasks, "suite_average": sum(t["median"] for t in tasks.values()) / 2}

    # CoNLL's ranges overlap, SST-2's are far apart: the averages' ranges, 60-62 and 55.5-57.5, do not touch.
    got = ec.gaps(row((70, 72), (50, 52)), row((60, 62), (51, 53)))
    assert got["conll2003"]["beyond_spread"] is False and got["sst2"]["beyond_spread"] is True
    assert got["suite_average"] == {"gap": 4.5, "beyond_spread": True}
    # 60-62 against 59-61: they overlap.
    assert (
        ec.gaps(row((70, 72), (50, 52)), row((66, 68), (52, 54)))["suite_average"]["beyond_spread"] is False
    )


def test_the_suite_plot_draws_a_point_that_pools_a_seed_evaluated_on_one_task(tmp_path: Path) -> None:
    # Seed 2 has SST-2 only: the pooled average (60.0) lies below seed 1's own (61.0), once drawn as a
    # negative error bar, which matplotlib refuses.
    def row(flops: float, sst2: float, conll: float, **extra: Any) -> dict:
        tasks = {
            "sst2": {"min": sst2 - 1, "median": sst2, "max": sst2 + 1},
            "conll2003": {"min": conll - 1, "median": conll, "max": conll + 1},
        }
        return {"point": 1.0, "flops": flops, "tasks": tasks, "suite_average": (sst2 + conll) / 2, **extra}

    result = {
        "setup": {"tasks": ["sst2", "conll2003"], "size": "micro"},
        "machine": {"cores": 2},
        "arms": {
            "random": [row(0.0, 70.0, 50.0)],
            "mlm": [row(1e14, 68.0, 52.0, suite_average_per_pretrain_seed=[61.0])],
        },
    }
    assert ec.plot(result, tmp_path / "suite.png").stat().st_size > 0


def test_catch_up_meets_the_leaders_line_in_log_flops() -> None:
    # Trail rises 6 points a decade from 5 behind, the leader 3: level 5/3 decades after 1e13.
    trail, lead = [(1e13, 50.0), (1e14, 56.0)], [(1e13, 55.0), (1e14, 58.0)]
    got = ec.catch_up(trail, lead)
    assert got["ahead"] is False
    assert got["slope_per_decade"] == pytest.approx(6.0) and got["lead_slope_per_decade"] == pytest.approx(
        3.0
    )
    assert got["flops"] == pytest.approx(10 ** (13 + 5 / 3))
    # The leader rising as fast or faster: the gap never closes.
    assert ec.catch_up([(1e13, 50.0), (1e14, 53.0)], lead)["flops"] is None
    assert ec.catch_up([(1e13, 50.0), (1e14, 52.0)], lead)["flops"] is None
    # Level or ahead at the last point: that point.
    level = ec.catch_up([(1e13, 50.0), (1e14, 58.0)], lead)
    assert level["ahead"] is True and level["flops"] == 1e14


def test_electra_arms_are_compared_with_the_masked_lm_at_equal_flops() -> None:
    def row(point: float, flops: float, lo: float, mid: float, hi: float) -> dict:
        t = {"median": mid, "min": lo, "max": hi}
        return {"point": point, "flops": flops, "tasks": {"sst2": t}, "suite_average": mid}

    arms = {
        "random": [row(0.0, 0.0, 50.0, 51.0, 52.0)],
        "mlm": [row(0.5, 1e13, 54.0, 55.0, 56.0), row(1.0, 1e14, 57.0, 58.0, 59.0)],
        "gdes-all": [row(0.5, 1e13, 49.0, 50.0, 51.0), row(1.0, 1e14, 55.5, 56.0, 57.5)],
        "electra": [row(0.25, 5e12, 40.0, 41.0, 42.0)],  # no masked-LM point at its budget
    }
    got = ec.against_masked_lm(arms)
    assert set(got) == {"gdes-all"}
    points = got["gdes-all"]["points"]
    assert points["0.5"]["sst2"] == {"gap": -5.0, "beyond_spread": True}
    assert points["1"]["sst2"] == {"gap": -2.0, "beyond_spread": False}  # 57.5 > 57.0: the ranges overlap
    assert points["1"]["suite_average"] == {"gap": -2.0, "beyond_spread": False}
    assert got["gdes-all"]["catch_up"]["flops"] == pytest.approx(10 ** (13 + 5 / 3))
    result = {
        "setup": {"tasks": ["sst2"]},
        "against_random": ec.against_random(arms),
        "against_masked_lm": got,
    }
    assert ec.gaps_table(result).splitlines() == [
        "| arm | budget | sst2 vs random | average vs random | sst2 vs masked LM | average vs masked LM |",
        "|---|---|---|---|---|---|",
        "| mlm | 50% | +4.0* | +4.0* |  |  |",
        "| mlm | 100% | +7.0* | +7.0* |  |  |",
        "| gdes-all | 50% | -1.0 | -1.0 | -5.0* | -5.0* |",
        "| gdes-all | 100% | +5.0* | +5.0* | -2.0 | -2.0 |",
        "| electra | 25% | -10.0* | -10.0* |  |  |",
    ]


def test_the_write_up_tables_are_the_results_files() -> None:
    # The write-up quotes the committed results, not numbers typed in by hand: a rerun that changes them
    # must change the write-up too.
    from experiments import embedding_swap as es
    from experiments import recipe_pilot as rp

    readme = (ROOT / "experiments" / "README.md").read_text(encoding="utf-8")
    results = ROOT / "experiments" / "results"
    for name in ("equal_compute_cpu", "equal_compute_cpu_2x"):
        assert ec.markdown_table(json.loads((results / f"{name}.json").read_text())) in readme, name
    assert es.markdown_table(json.loads((results / "embedding_swap_cpu.json").read_text())) in readme
    for path in sorted([*results.glob("equal_compute_v2*.json"), *results.glob("equal_compute_v3*.json")]):
        result = json.loads(path.read_text())
        assert ec.markdown_table(result) in readme, path.name
        assert ec.pretraining_table(result) in readme, path.name
        if "against_masked_lm" in result:
            assert ec.gaps_table(result) in readme, path.name
    pilot = results / "recipe_pilot.json"
    if pilot.is_file():
        assert rp.markdown_table(json.loads(pilot.read_text())) in readme


def test_evaluate_points_default_to_every_point_and_must_be_among_them(capsys: pytest.CaptureFixture) -> None:
    base = ["--work", "w", "--flops", "1e14", "--vocab", "uncased-8192"]
    assert ec.parse_args(base)[4] == (0.25, 0.5, 1.0)
    assert ec.parse_args([*base, "--evaluate-points", "1"])[4] == (1.0,)
    for bad in ("0.75", "top"):
        with pytest.raises(SystemExit) as exit_:
            ec.parse_args([*base, "--evaluate-points", bad])
        assert exit_.value.code == 2
        assert f"--evaluate-points {bad}" in capsys.readouterr().err.replace("'", "")


def test_a_pretraining_invocation_leaves_the_results_file_to_the_evaluating_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # A --stage pretrain invocation runs with the default fine-tuning budget, under which no score is cached:
    # writing the results file from it would blank every score the evaluating invocations wrote.
    written, evaluated = [], []
    monkeypatch.setattr(ec, "missing", lambda *paths: [])
    monkeypatch.setattr(ec, "prepare", lambda *a: None)
    monkeypatch.setattr(ec, "pretrain", lambda setup, arm, seed: [{"point": 1.0}])
    monkeypatch.setattr(
        ec, "evaluate", lambda setup, cache, arm, seed, point, jobs: evaluated.append((arm, point))
    )
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"setup": {"tasks": ["sst2"]}, "arms": {}}))
    monkeypatch.setattr(ec, "write", lambda *a: written.append(a[2]) or results)
    base = ["--work", str(tmp_path / "w"), "--flops", "1e14", "--vocab", "uncased-8192", "--arms", "mlm"]
    assert ec.main([*base, "--stage", "pretrain", "--pretrain-seeds", "1"]) == 0
    assert written == [] and evaluated == []
    assert "written by the invocations that evaluate" in capsys.readouterr().out
    assert ec.main([*base, "--pretrain-seeds", "1", "--name", "v"]) == 0
    assert evaluated == [("mlm", 1.0)] and written == ["v", "v"]


def test_earlier_results_stand_beside_the_work_directorys_own_arms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An earlier results file of the same setup lends the arms this work directory lacks, marked with their
    file and in ARMS order; an arm run here wins; a file of another setup or corpus is refused by name."""
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(ec, "RESULTS", results)
    setup = setup_in(tmp_path / "w")
    described = json.loads(json.dumps(setup.describe()))
    # Written before Recipe had `adam` and `schedule`: the fields it lacks were at their defaults.
    del described["recipe"]["adam"], described["recipe"]["schedule"]
    row = {"point": 1.0, "step": 10, "tasks": {}}
    earlier = {
        "commit": "abc1234",
        "date": "2026-11-20T00:00:00+00:00",
        "setup": described,
        "unigram_entropy": 7.0116,
        "arms": {"mlm": [row], "random": [{**row, "point": 0.0}], "official": [{**row, "step": 99}]},
    }
    (results / "v2.json").write_text(json.dumps(earlier))
    own = {"official": [{**row, "step": 11}]}
    provenance = ec.import_arms(setup, ["v2"], own, entropy=7.0118)
    assert list(own) == ["official", "mlm", "random"]
    assert own["official"] == [{**row, "step": 11}]  # this work directory's own run, not the file's
    assert own["mlm"] == [{**row, "imported_from": "v2"}]
    assert provenance == [
        {
            "file": "v2.json",
            "commit": "abc1234",
            "date": "2026-11-20T00:00:00+00:00",
            "arms": ["mlm", "random"],
            "unigram_entropy": 7.0116,
        }
    ]
    with pytest.raises(ValueError, match="unigram entropy"):
        ec.import_arms(setup, ["v2"], {}, entropy=7.13)
    (results / "other.json").write_text(json.dumps({**earlier, "setup": {**described, "flops": 2e14}}))
    with pytest.raises(ValueError, match="differs in flops"):
        ec.importable(setup, "other")
    changed = {**described, "recipe": {**described["recipe"], "generator_lr_scale": 0.05}}
    (results / "recipe.json").write_text(json.dumps({**earlier, "setup": changed}))
    with pytest.raises(ValueError, match=r"differs in recipe\.generator_lr_scale"):
        ec.importable(setup, "recipe")
    with pytest.raises(ValueError, match=r"no .*absent\.json"):
        ec.importable(setup, "absent")


def test_the_official_arm_trains_as_the_official_code_whatever_the_setups_generator_scale(
    tmp_path: Path,
) -> None:
    recipe = setup_in(tmp_path).arm_recipe("official")
    assert (recipe.embedding_sharing, recipe.generator_lr_scale) == ("tied", 1.0)
    assert (recipe.adam, recipe.schedule) == ("official", "official")
    # The other arms keep the setup's scale and torch's Adam with the hf schedule.
    other = setup_in(tmp_path).arm_recipe("gdes-all")
    assert (other.generator_lr_scale, other.adam, other.schedule) == (0.5, "torch", "hf")


def test_pretraining_table_shows_the_identity_only_auc_when_the_runs_have_it() -> None:
    def run(seed: int, auc: float, identity: float | None) -> dict:
        val: dict[str, Any] = {"mlm_loss": 6.5, "disc_auc": auc}
        if identity is not None:
            val.update(
                identity_auc=identity, phase="identity" if auc <= identity + 0.02 else "reading context"
            )
        return {"seed": seed, "point": 1.0, "step": 100, "tokens": 2e6, "validation": val}

    result = {
        "unigram_entropy": 7.0,
        "arms": {
            "official": [{"point": 1.0, "runs": [run(1, 0.70, 0.55)]}],
            "gdes-all": [{"point": 1.0, "runs": [run(1, 0.75, None)]}],
        },
    }
    lines = ec.pretraining_table(result).splitlines()
    assert lines[0].endswith("| val AUC | identity-only AUC | phase |")
    assert lines[2] == "| official | 1 | 100% | 100 | 2.0M | 6.50 | +0.50 | 0.700 | 0.550 | reading context |"
    assert lines[3] == "| gdes-all | 1 | 100% | 100 | 2.0M | 6.50 | +0.50 | 0.750 |  |  |"
    del result["arms"]["official"]
    assert "identity" not in ec.pretraining_table(result)
