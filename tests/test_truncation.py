"""Model inputs at a cost linear in the input (electra.serving.engine.truncation): the same encodings as the
tokenizers library's own truncating encode, never longer than the model, each distinct text tokenized once;
and a real server answering a 25k + 25k-word pair on every classifier route quickly, its memory flat.

Timing bounds here are generous on purpose (a loaded 2-core machine runs everything about 2x slower): they
tell a linear cost from the quadratic one, not a fast machine from a slow one. The figures are measured by
bench/long_inputs.py (docs/serving.md).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from electra.serving.engine.truncation import Slot, Special, Template, keep_lengths, measure
from electra.serving.process import ServerProcess, free_port, serve_command, start_server
from electra.tokenizer import load_tokenizer

from .conftest import build_serving_bundle, write_serving_vocab

# Words of the serving vocabulary, pieces it splits, accents, CJK, punctuation, a special token written in
# the text, a word past WordPiece's 100 characters (one [UNK]), and odd whitespace.
WORDS = (
    *("the", "cat", "cats", "sat", "on", "mat", "parking", "movies", "quick", "brown", "xyzzy"),
    *("café", "naïve", "über", "日本語", ",", ".", "!", "[MASK]", "a" * 120, "\t", "\u00a0", "\u200b"),
)
TEXT = st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join) | st.text(max_size=60)
LONG_WORDS = 24_999  # "q " * 24999: 49,998 characters, under the server's default --max-chars of 50,000


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_tokenizer(write_serving_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt"))


def library(tokenizer: Any, max_len: int, direction: str) -> Any:
    """The tokenizers library's own truncation, which the helpers must equal."""
    import tokenizers

    copy = tokenizers.Tokenizer.from_str(tokenizer.to_str())
    copy.enable_truncation(max_length=max_len, direction=direction)
    return copy


def test_the_template_is_read_from_the_tokenizer(tokenizer: Any) -> None:
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    template = Template.of(tokenizer)
    assert template.single == (Special(cls, 0), Slot(0, 0), Special(sep, 0))
    assert template.pair == (Special(cls, 0), Slot(0, 0), Special(sep, 0), Slot(1, 1), Special(sep, 1))
    assert (template.specials(False), template.specials(True)) == (2, 3)


@pytest.mark.parametrize(
    ("lengths", "kept"),
    # tokenizers' own table (tokenizers/src/utils/truncation.rs, truncate_encodings_longest_first), budget 7;
    # a text alone keeps up to the budget.
    [
        ((0, 0), (0, 0)),
        ((0, 8), (0, 7)),
        ((2, 8), (2, 5)),
        ((4, 4), (3, 4)),
        ((4, 8), (3, 4)),
        ((8, 2), (5, 2)),
        ((8, 4), (4, 3)),
        ((8, 8), (3, 4)),
        ((9, None), (7, None)),
        ((5, None), (5, None)),
    ],
)
def test_keep_lengths_is_the_librarys_longest_first(lengths: Any, kept: Any) -> None:
    assert keep_lengths(*lengths, budget=7) == kept


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    text=TEXT,
    pair=st.none() | TEXT,
    max_len=st.sampled_from([3, 5, 8, 16, 64]),
    direction=st.sampled_from(["right", "left"]),
)
def test_the_encoding_equals_the_librarys_truncating_encode(
    tokenizer: Any, text: str, pair: str | None, max_len: int, direction: str
) -> None:
    expected = library(tokenizer, max_len, direction).encode(text, pair)
    measured = measure(tokenizer, Template.of(tokenizer), [(text, pair)], max_len, direction)
    (got,) = measured.encoded()
    assert got.ids.tolist() == expected.ids
    assert got.type_ids.tolist() == expected.type_ids
    assert got.offsets == expected.offsets
    assert got.special == expected.special_tokens_mask
    assert got.word_ids == expected.word_ids
    assert got.truncated == bool(expected.overflowing)
    whole = tokenizer.encode(text, pair)  # the length before any cut, special tokens included
    assert measured.length(0) == len(whole.ids)


def _long(content: str, chars: int) -> str:
    """`content` repeated to `chars` characters (a space between repeats)."""
    unit = (content or "x") + " "
    return (unit * (chars // len(unit) + 1))[:chars]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    text=TEXT,
    pair=st.none() | TEXT,
    chars=st.integers(1, 50_000),
    max_len=st.sampled_from([8, 64, 512]),
    direction=st.sampled_from(["right", "left"]),
)
def test_any_input_up_to_the_character_limit_fits_the_model(
    tokenizer: Any, text: str, pair: str | None, chars: int, max_len: int, direction: str
) -> None:
    a = _long(text, chars)
    b = None if pair is None else _long(pair, chars)
    measured = measure(tokenizer, Template.of(tokenizer), [(a, b)], max_len, direction)
    (got,) = measured.encoded()
    assert got.length <= max_len
    assert got.truncated == (measured.length(0) > max_len)
    # What is held of each text is bounded by the model's length, not by the text's.
    assert all(len(side.ids) <= max_len for side in measured.sides)


def _best_of(repeats: int, call: Any) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=TEXT, pair=TEXT)
def test_the_time_grows_linearly_with_the_input(tokenizer: Any, text: str, pair: str) -> None:
    """A pair 4x as long takes about 4x as long; the library's truncation of a pair over the model on both
    sides takes about 16x as long (its pieces' combinations grow with the square of the length). The bound,
    10x, leaves room for a loaded machine: the best of 3 runs of each size is compared."""
    template = Template.of(tokenizer)

    def run(chars: int) -> float:
        item = (_long(text, chars), _long(pair, chars))
        return _best_of(3, lambda: measure(tokenizer, template, [item], 64).encoded())

    small, large = run(12_500), run(50_000)
    assert large < 10 * small + 0.01, (small, large)


def test_a_query_shared_by_every_pair_is_tokenized_once(tokenizer: Any) -> None:
    query = "q " * 20_000
    items = [(query, f"passage {i}") for i in range(100)]
    measured = measure(tokenizer, Template.of(tokenizer), items, 64)
    assert len(measured.sides) == 101
    encoded = measured.encoded()
    assert all(e.length <= 64 and e.truncated for e in encoded)
    assert [measured.length(i) for i in range(3)] == [20_000 + 3 + 2] * 3  # "passage" + a number, 3 specials


# --------------------------------------------------------------------------------------------------------
# A real server: a 25k + 25k-word pair on every classifier route
# --------------------------------------------------------------------------------------------------------

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# The bound, 1 s for a long pair, on the server's CPU time: the work it does for the request, which
# other jobs on the machine do not stretch. Its wall time is bounded too, generously: a 2-core machine loaded
# several times over (as CI and the machines these tests run on are) stretches it several fold. The quadratic
# truncation took minutes of CPU for such a pair at these bundles' 64 tokens. Memory: under 100 MB of growth
# over every request below (it grew by gigabytes before; bench/results/long_inputs_cpu.json).
CPU_S = 1.0
ANSWER_S = 5.0
RSS_GROWTH_MB = 100.0


def rss_mb(pid: int) -> float:
    found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert found is not None
    return int(found.group(1)) / 1024


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of a process so far, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def call(server: ServerProcess, path: str, body: dict[str, Any]) -> tuple[int, Any, float]:
    request = urllib.request.Request(
        server.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    try:
        with OPENER.open(request, timeout=120) as answer:
            status, raw = answer.status, answer.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    return status, json.loads(raw), time.perf_counter() - start


@pytest.fixture(scope="module")
def server(
    serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    ce = build_serving_bundle(tmp_path_factory.mktemp("ce"), "classifier", seed=7, id2label={0: "LABEL_0"})
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELECTRA_")}
    args = serve_command(
        *("--model", f"ce={ce}", "--model", f"sentiment={serving_bundles['sentiment']}"),
        *("--model", f"detector={serving_bundles['detector']}", "--port", str(port)),
    )
    log = tmp_path_factory.mktemp("long-pairs") / "server.log"
    root = Path(__file__).resolve().parents[1]
    url = f"http://127.0.0.1:{port}"
    with start_server(args, env, url=url, log=log, cwd=root, ready_timeout=120) as proc:
        yield proc


def long_pair_requests() -> list[tuple[str, dict[str, Any], int]]:
    query, passage = "q " * LONG_WORDS, "p " * LONG_WORDS
    v2 = [
        {"name": "text", "shape": [1], "datatype": "BYTES", "data": [query]},
        {"name": "text_pair", "shape": [1], "datatype": "BYTES", "data": [passage]},
    ]
    return [
        ("/rerank", {"query": query, "texts": [passage], "model": "ce", "truncate": True}, 200),
        ("/rerank", {"query": query, "texts": [passage], "model": "ce"}, 200),  # --auto-truncate
        ("/rerank", {"query": query, "texts": [passage], "model": "ce", "truncate": False}, 413),
        ("/predict", {"inputs": [query, passage], "model": "sentiment"}, 200),
        ("/classify", {"text": query, "text_pair": passage, "model": "sentiment"}, 200),
        ("/classify", {"text": query, "text_pair": passage, "model": "sentiment", "truncate": False}, 413),
        ("/classify", {"inputs": [{"text": query, "text_pair": passage}] * 4, "model": "sentiment"}, 200),
        ("/v2/models/sentiment/infer", {"inputs": v2}, 200),
        ("/hf/sentiment", {"inputs": {"text": query, "text_pair": passage}}, 200),
        ("/detect", {"text": query, "truncate": True}, 200),
    ]


@pytest.mark.slow
def test_a_long_pair_answers_quickly_on_every_route_and_memory_stays_flat(server: ServerProcess) -> None:
    requests = long_pair_requests()
    for path, body, status in requests:  # once, so the allocator and the queues have their working set
        assert call(server, path, body)[0] == status
    start = rss_mb(server.pid)
    for _ in range(3):
        for path, body, status in requests:
            cpu = cpu_s(server.pid)
            got, answer, seconds = call(server, path, body)
            cpu = cpu_s(server.pid) - cpu
            assert got == status, (path, answer)
            assert cpu < CPU_S and seconds < ANSWER_S, f"{path}: {cpu:.2f} s of CPU, {seconds:.2f} s"
            if got == 413:
                assert "64 tokens" in (answer.get("detail") or answer.get("error")), answer
    grown = rss_mb(server.pid) - start
    assert grown < RSS_GROWTH_MB, f"the server's RSS grew by {grown:.0f} MB over {3 * len(requests)} requests"


@pytest.mark.slow
def test_the_server_stays_live_while_a_long_pair_is_scored(server: ServerProcess) -> None:
    """The tokenization leaves the event loop (and the GIL) free: /health/live answers meanwhile."""
    import threading

    path, body, _ = long_pair_requests()[0]
    done = threading.Event()
    slowest = 0.0

    def hammer() -> None:
        while not done.is_set():
            call(server, path, body)

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(20):
            start = time.perf_counter()
            with OPENER.open(server.url + "/health/live", timeout=30) as answer:
                assert answer.status == 200
            slowest = max(slowest, time.perf_counter() - start)
            time.sleep(0.02)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert slowest < ANSWER_S, slowest
