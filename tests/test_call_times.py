"""The model-call time predictor that decides which calls may run on the event loop."""

from __future__ import annotations

import pytest

from electra.serving.engine.call_times import DECAY, CallTimes

# About a 2-core VM's ELECTRA-Small calls (bench/results/inference_cpu.json): 1.2 ms fixed, 0.068 ms a token.
FIXED, PER_TOKEN = 0.0012, 0.000068


def call(tokens: int) -> float:
    return FIXED + PER_TOKEN * tokens


def test_nothing_is_predicted_before_the_first_call() -> None:
    assert CallTimes().predict(16) is None


def test_a_mix_of_lengths_is_fitted_as_a_fixed_part_plus_a_part_per_token() -> None:
    times = CallTimes()
    for tokens in [4, 8, 16, 12, 6, 128, 10, 8, 64] * 3:
        times.add(tokens, call(tokens))
    for tokens in (1, 40, 128, 512):
        assert times.predict(tokens) == pytest.approx(call(tokens), rel=1e-6)


def test_calls_of_one_length_predict_in_proportion_to_the_tokens() -> None:
    times = CallTimes()
    for _ in range(5):
        times.add(32, 0.010)
    assert times.predict(32) == pytest.approx(0.010)
    assert times.predict(64) == pytest.approx(0.020)  # no fixed part can be told apart: conservative


def test_the_latest_calls_weigh_most() -> None:
    times = CallTimes()
    for tokens in [8, 64] * 20:
        times.add(tokens, call(tokens))
    for tokens in [8, 64] * 20:  # the machine got twice as slow
        times.add(tokens, 2 * call(tokens))
    # The first 40 calls keep DECAY ** 40 (13%) of the weight: the prediction is mostly the new speed.
    old_share = DECAY**40
    assert times.predict(32) == pytest.approx((2 - old_share) * call(32), rel=0.01)


def test_noise_that_makes_longer_calls_look_faster_falls_back_to_the_rate_per_token() -> None:
    times = CallTimes()
    times.add(10, 0.010)
    times.add(20, 0.009)
    weights = (DECAY, 1.0)
    mean_tokens = (weights[0] * 10 + weights[1] * 20) / sum(weights)
    mean_seconds = (weights[0] * 0.010 + weights[1] * 0.009) / sum(weights)
    assert times.predict(30) == pytest.approx(mean_seconds * 30 / mean_tokens)


def test_a_fixed_part_below_zero_never_predicts_a_negative_time() -> None:
    times = CallTimes()
    for tokens in [100, 200] * 5:
        times.add(tokens, 1e-5 * tokens - 0.0009)  # superlinear: the line crosses zero at 90 tokens
    assert times.predict(10) == 0.0
    assert times.predict(200) == pytest.approx(1e-5 * 200 - 0.0009, rel=1e-6)
