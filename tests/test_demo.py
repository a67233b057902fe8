"""The demo's example: swapped docstring-like sentences, the choice of the one the model flags, its record."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest

from electra import demo
from electra.demo import (
    EXAMPLE_JSON,
    EXAMPLE_SENTENCES,
    SWAP_WORDS,
    DemoExample,
    DemoPaths,
    Swap,
    WordScores,
    bundle_scorer,
    choose_example,
    load_example,
    save_example,
    serve_command,
    swap_candidates,
)

WORD = re.compile(r"[A-Za-z]+|[^\sA-Za-z]")


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in WORD.finditer(text)]


def stub_scorer(scores: dict[str, float], default: float = 0.1, calls: list[int] | None = None):
    """Scores each word by a table (lower-cased), like the bundle scorer's word-level answer."""

    def score(texts: list[str]) -> list[WordScores]:
        if calls is not None:
            calls.append(len(texts))
        return [[(w, s, e, scores.get(w.lower(), default)) for w, s, e in _words(t)] for t in texts]

    return score


def _swap(original: str, word: str, new: str) -> Swap:
    start = original.index(word)
    return Swap(original.replace(word, new, 1), original, word, new, start, start + len(new))


# ---------------------------------------------------------------------------------------------------------
# Candidates


def test_swaps_are_deterministic_and_replace_one_word_with_one_of_its_kind() -> None:
    swaps = swap_candidates()
    assert swaps == swap_candidates() and len(swaps) > 100
    assert swaps != swap_candidates(seed=1), "the seed picks the replacements"
    kind_of = {w: kind for kind, words in SWAP_WORDS.items() for w in words}
    for swap in swaps:
        assert swap.original in EXAMPLE_SENTENCES
        assert swap.text[swap.start : swap.end] == swap.replaced
        assert swap.original[swap.start : swap.start + len(swap.word)] == swap.word
        assert swap.text[: swap.start] == swap.original[: swap.start]
        assert swap.text[swap.end :] == swap.original[swap.start + len(swap.word) :]
        assert kind_of[swap.replaced.lower()] == kind_of[swap.word.lower()]
        assert swap.replaced != swap.word and swap.replaced[0].isupper() == swap.word[0].isupper()
        others = {w.lower() for w, _, _ in _words(swap.original)}
        assert swap.replaced.lower() not in others, "the swapped-in word is new to the sentence"
        before = swap.text[: swap.start].split()
        if before and before[-1].lower() in ("a", "an"):
            assert (before[-1].lower() == "an") == (swap.replaced[0].lower() in "aeiou"), swap.text
    # Every sentence gets swaps, and several words of each.
    assert {swap.original for swap in swaps} == set(EXAMPLE_SENTENCES)


def test_example_sentences_can_be_pasted_into_the_curl() -> None:
    for sentence in EXAMPLE_SENTENCES:
        assert "'" not in sentence and '"' not in sentence and "\\" not in sentence
        assert sentence[0].isupper() and sentence.endswith(".")


# ---------------------------------------------------------------------------------------------------------
# The choice


ORIGINAL = "Raise an exception if the file does not exist."


def test_choice_prefers_a_flagged_swap_with_no_original_word_flagged() -> None:
    swaps = [
        _swap(ORIGINAL, "file", "buffer"),  # not flagged
        _swap(ORIGINAL, "file", "banana"),  # flagged, but "exception" is flagged too
        _swap(ORIGINAL, "file", "horse"),  # flagged, nothing else: the one
        _swap(ORIGINAL, "file", "garden"),  # flagged, nothing else, smaller margin
    ]

    def score(texts: list[str]) -> list[WordScores]:
        table = {"buffer": 0.3, "banana": 0.99, "horse": 0.8, "garden": 0.7}
        out = []
        for text in texts:
            flagged_exception = "banana" in text
            out.append(
                [
                    (w, s, e, table.get(w, 0.6 if (w == "exception" and flagged_exception) else 0.1))
                    for w, s, e in _words(text)
                ]
            )
        return out

    example = choose_example(score, swaps)
    assert example.text == "Raise an exception if the horse does not exist."
    assert (example.word, example.replaced, example.score) == ("file", "horse", 0.8)
    assert example.text[example.start : example.end] == "horse"
    assert example.flagged and example.false_flags == []
    assert (example.checked, example.detected, example.clean) == (4, 3, 2)
    assert [w for w, *_ in example.words] == [w for w, _, _ in _words(example.text)]
    report = example.report()
    assert report[1] == f'example: "{example.text}"'
    assert '"file" swapped for "horse": replaced score 0.80 (flagged); no original word flagged' in report[2]


def test_choice_takes_the_fewest_false_flags_when_every_flagged_swap_has_some() -> None:
    swaps = [_swap(ORIGINAL, "file", "banana"), _swap(ORIGINAL, "file", "horse")]
    score = stub_scorer({"banana": 0.9, "horse": 0.9, "raise": 0.7, "exist": 0.6})
    example = choose_example(score, swaps)
    assert example.flagged and example.false_flags == [("Raise", 0.7), ("exist", 0.6)]
    assert example.replaced == "banana", "equal keys: the first in order"
    assert "original words flagged too" in example.report()[2]


def test_a_model_that_flags_no_swap_says_so_plainly() -> None:
    example = choose_example(stub_scorer({"horse": 0.4}), [_swap(ORIGINAL, "file", "horse")])
    assert not example.flagged and (example.detected, example.clean) == (0, 0)
    line = example.report()[2]
    assert "NOT flagged" in line and "failed this check" in line


def test_choice_is_deterministic_over_the_real_candidates() -> None:
    score = stub_scorer({"banana": 0.9, "purple": 0.95, "sings": 0.7})
    first = choose_example(score)
    assert first == choose_example(score)
    assert first.replaced == "purple" and first.flagged and not first.false_flags
    assert first.checked == len(swap_candidates())


# ---------------------------------------------------------------------------------------------------------
# The record in the work directory


def _example() -> DemoExample:
    return choose_example(stub_scorer({"horse": 0.8}), [_swap(ORIGINAL, "file", "horse")])


def test_example_round_trips_and_is_tied_to_its_bundle(tmp_path: Path) -> None:
    path = tmp_path / EXAMPLE_JSON
    example = _example()
    save_example(path, example, "a" * 64)
    assert [p.name for p in tmp_path.iterdir()] == [EXAMPLE_JSON], "written atomically, no temporary left"
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["text"] == example.text and record["score"] == example.score
    assert record["flagged"] is True and record["false_flags"] == []
    assert load_example(path, "a" * 64) == example
    assert load_example(path, "b" * 64) is None, "another bundle: choose again"
    path.write_text("{broken", encoding="utf-8")
    assert load_example(path, "a" * 64) is None
    assert load_example(tmp_path / "missing.json", "a" * 64) is None


def test_example_saved_for_another_candidate_list_is_chosen_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / EXAMPLE_JSON
    save_example(path, _example(), "a" * 64)
    monkeypatch.setattr(demo, "EXAMPLE_SEED", 1)
    assert load_example(path, "a" * 64) is None


def test_serve_command_quotes_the_example() -> None:
    text = "Raise an exception if the horse does not exist."
    argv = shlex.split(serve_command(Path("/tmp/my demo/bundle"), text))
    assert argv == ["electra", "serve", "--model", "demo=/tmp/my demo/bundle", "--example", text]


# ---------------------------------------------------------------------------------------------------------
# With a real (tiny, random-weight) bundle, through the server's runtime


@pytest.fixture
def workdir(tmp_path: Path, serving_bundles: dict[str, Path]) -> DemoPaths:
    paths = DemoPaths(tmp_path / "demo")
    paths.root.mkdir()
    shutil.copytree(serving_bundles["detector"], paths.bundle)
    return paths


def test_bundle_scorer_gives_the_word_scores_detect_answers(workdir: DemoPaths) -> None:
    from litestar.testing import TestClient

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    texts = ["the cat sat on the mat.", "a quick brown fox jumps over the lazy dog in paris."]
    scored = bundle_scorer(workdir.bundle)(texts)
    settings = ServeSettings(models=(ModelSpec("demo", workdir.bundle),))
    with TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 30
        while client.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = client.post("/detect", json={"texts": texts, "level": "word"})
        assert r.status_code == 200, r.text
    for text, words, result in zip(texts, scored, r.json()["results"], strict=True):
        assert [(w, s, e) for w, s, e, _ in words] == [
            (t["text"], t["start"], t["end"]) for t in result["tokens"]
        ]
        assert [sc for *_, sc in words] == pytest.approx([t["score"] for t in result["tokens"]], abs=1e-6)
        assert all(text[s:e] == w for w, s, e, _ in words)


def test_example_stage_chooses_saves_then_reuses(
    workdir: DemoPaths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = demo._example_stage(workdir)
    err = capsys.readouterr().err
    assert (workdir.root / EXAMPLE_JSON).is_file()
    assert f'example: "{first.text}"' in err and "reusing" not in err
    assert first.checked == len(swap_candidates())
    assert first.text[first.start : first.end] == first.replaced

    def no_scoring(bundle: Path):
        raise AssertionError("the example was scored again")

    monkeypatch.setattr(demo, "bundle_scorer", no_scoring)
    assert demo._example_stage(workdir) == first
    err = capsys.readouterr().err
    assert f"reusing {workdir.root / EXAMPLE_JSON}" in err and f'example: "{first.text}"' in err

    # --fresh, or another bundle, chooses again (the same choice for the same model).
    monkeypatch.undo()
    assert demo._example_stage(workdir, fresh=True) == first
    with open(workdir.bundle / "model.onnx", "ab") as f:
        f.write(b"\0")  # a different file: its checksum no longer matches the record
    monkeypatch.setattr(demo, "bundle_scorer", no_scoring)
    with pytest.raises(AssertionError, match="scored again"):
        demo._example_stage(workdir)


def test_serve_demo_pre_fills_the_page_and_prints_a_curl_of_the_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from electra.serving.http import server

    seen = {}

    def fake_serve(settings, on_ready=None) -> None:
        seen["settings"] = settings
        on_ready()

    monkeypatch.setattr(server, "serve", fake_serve)
    text = "Raise an exception if the horse does not exist."
    assert demo.serve_demo(tmp_path / "bundle", "127.0.0.1", 8123, text) == 0
    assert seen["settings"].example == text and seen["settings"].port == 8123
    out = capsys.readouterr().out
    command = out[out.index("curl") :].split("\n\n")[0].replace("\\\n", " ")  # one command, two lines
    argv = shlex.split(command)
    assert argv[:3] == ["curl", "-s", "http://localhost:8123/detect"]
    assert json.loads(argv[argv.index("-d") + 1]) == {"text": text, "level": "word"}
    # Its answer pretty-printed, for a person to read.
    assert argv[argv.index("-d") + 2 :] == ["|", "python", "-m", "json.tool"]


def test_corpus_mb_help_says_how_big_the_corpus_is(capsys: pytest.CaptureFixture[str]) -> None:
    """--corpus-mb is a cap: its help gives the size of the whole corpus, which the default keeps."""
    from electra.cli.main import main
    from electra.training.data.demo_corpus import DEFAULT_MAX_BYTES, REFERENCE_CORPUS

    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    size = f"{REFERENCE_CORPUS.bytes / 1e6:.1f} MB"
    assert (
        f"--corpus-mb CORPUS_MB cut the demo corpus at this many MB (default: no cut, all {size} of" in shown
    )
    assert demo.DemoConfig().corpus_mb is None and REFERENCE_CORPUS.bytes < DEFAULT_MAX_BYTES
