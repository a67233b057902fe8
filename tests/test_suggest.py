"""Suggestions: a detector exported with its generator (`electra export --generator`) proposes what each
flagged token should be on /detect (`suggest`). Checked against transformers' ElectraForMaskedLM on the same
masked inputs, through windows, batched and unbatched, with the edits' offsets exact; tiny real bundles, no
mocks."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from litestar.testing import TestClient
from msgspec import UNSET
from prometheus_client import REGISTRY

from electra.bundle import read_bundle
from electra.errors import InputError
from electra.files import BUNDLE_JSON, GENERATOR_DIR, MODEL_ONNX
from electra.serving.engine.encoded import Encoded
from electra.serving.engine.results import DetectResult, Suggestion, Token
from electra.serving.engine.suggest import ALONE_MAX, Target, apply_best, edit, plan
from electra.serving.engine.windows import Document, split
from electra.serving.http.app import create_app
from electra.serving.settings import ModelSpec, ServeSettings
from electra.tokenizer import load_tokenizer
from tests import test_hub
from tests.conftest import build_suggest_pair
from tests.test_hub import COMMIT_B, GOOGLE_CONFIG, add_snapshot, google_layout
from tests.test_serving import wait_ready

# The offline Hugging Face cache test_hub builds by hand, as a fixture here too.
hf_cache = test_hub.hf_cache

TEXTS = [
    "The cat sat on the mat, walking quickly.",
    "New York and Paris are cities; London is a city too.",
    "She loved the movie, he hated the book.",
]


@pytest.fixture(scope="module")
def client(suggest_bundle: Path, serving_bundles: dict[str, Path]) -> Iterator[TestClient]:
    models = (
        ModelSpec("pair", suggest_bundle),
        ModelSpec("plain", serving_bundles["detector"]),
        ModelSpec("sentiment", serving_bundles["sentiment"]),
    )
    app = create_app(ServeSettings(models=models, max_suggest=8, max_queue=64))
    with TestClient(app) as c:
        wait_ready(c)
        yield c


def detect(client: TestClient, **body: Any) -> dict[str, Any]:
    """/detect's answer; without a threshold, the median score of the first text's units, so that the
    random detector flags about half of them."""
    body.setdefault("model", "pair")
    if "threshold" not in body:
        first = body.get("text") or body["texts"][0]
        plain = client.post(
            "/detect", json={"model": body["model"], "text": first, "level": body.get("level", "token")}
        )
        body["threshold"] = float(np.median([t["score"] for t in plain.json()["results"][0]["tokens"]]))
    r = client.post("/detect", json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def masked_lm(suggest_bundle: Path) -> Any:
    """transformers' ElectraForMaskedLM on the generator the bundle was exported from, and its tokenizer."""
    from transformers import AutoTokenizer, ElectraForMaskedLM

    generator = suggest_bundle.parent / "run" / "generator"
    return ElectraForMaskedLM.from_pretrained(generator).eval(), AutoTokenizer.from_pretrained(generator)


def reference_top(masked_lm: Any, ids: list[int], positions: list[int], k: int, words: bool) -> list[list]:
    """transformers' top-k (token, probability) at `positions` of `ids`, special tokens left out (and
    continuation pieces with `words`), probabilities from the full softmax."""
    import torch

    model, tok = masked_lm
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, positions]
    probs = torch.softmax(logits.double(), -1)
    out = []
    for row in probs:
        ranked = [
            (tok.convert_ids_to_tokens(i), float(row[i])) for i in row.argsort(descending=True).tolist()
        ]
        kept = [
            (t, p)
            for t, p in ranked
            if t not in tok.all_special_tokens and not (words and t.startswith("##"))
        ]
        out.append(kept[:k])
    return out


# ----------------------------------------------------------------------------------------------------------
# Export
# ----------------------------------------------------------------------------------------------------------


def test_bundle_records_the_generator(suggest_bundle: Path) -> None:
    bundle = read_bundle(suggest_bundle)
    gen = bundle.generator
    assert gen is not None and bundle.kind == "discriminator"
    assert (suggest_bundle / GENERATOR_DIR / MODEL_ONNX).is_file()
    config = json.loads((suggest_bundle / GENERATOR_DIR / "config.json").read_text())
    assert config["architectures"] == ["ElectraForMaskedLM"] and config["hidden_size"] == gen.hidden_size
    assert gen.fused_operators["Attention"] == gen.num_hidden_layers  # fused in every layer
    assert gen.fused_operators["EmbedLayerNormalization"] == 1
    assert gen.parity.max_abs_diff < gen.parity.tolerance == 1e-4
    assert gen.parity.agreement == 1.0 and "masked" in gen.parity.compared
    assert gen.source.model_dir.endswith("generator") and len(gen.source.sha256) == 64
    assert gen.inputs == ["input_ids", "attention_mask", "token_type_ids", "masked_positions"]


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_cli_exports_a_run_with_its_generator(tmp_path: Path, precision: str) -> None:
    from electra.cli.main import main

    run = build_suggest_pair(tmp_path)
    out = tmp_path / f"bundle-{precision}"
    # The run directory stands for its discriminator and its generator.
    args = ["export", "--model", str(run), "--generator", str(run), "--out", str(out)]
    assert main([*args, "--precision", precision, "--max-seq-len", "32"]) == 0
    bundle = read_bundle(out)
    assert bundle.precision == precision and bundle.generator is not None
    assert bundle.generator.source.model_dir == str(run / "generator")
    assert bundle.generator.parity.agreement is not None and bundle.generator.parity.agreement >= 0.9
    # The quantised generator still loads and answers (int8 rewrote the tied embedding, see precision.py).
    app = create_app(ServeSettings(models=(ModelSpec("pair", out),)))
    with TestClient(app) as c:
        wait_ready(c)
        r = c.post("/detect", json={"text": TEXTS[0], "suggest": 2, "threshold": 0.0})
        assert r.status_code == 200, r.text
        assert all(len(t["suggestions"]) == 2 for t in r.json()["results"][0]["tokens"])


def test_export_refuses_what_cannot_pair(tmp_path: Path, serving_bundles: dict[str, Path]) -> None:
    from electra.onnx.export import export_bundle

    run = build_suggest_pair(tmp_path)
    disc, gen = run / "discriminator", run / "generator"
    with pytest.raises(InputError, match="not a generator"):
        export_bundle(disc, tmp_path / "a", generator_dir=disc)
    with pytest.raises(InputError, match="no such directory"):
        export_bundle(disc, tmp_path / "b", generator_dir=tmp_path / "missing")
    with pytest.raises(InputError, match="goes beside its discriminator"):
        export_bundle(gen, tmp_path / "c")
    # Another vocabulary: the generator would read other token ids.
    vocab = gen / "vocab.txt"
    vocab.write_text(vocab.read_text().replace("river", "lake"))
    (gen / "tokenizer.json").unlink()
    with pytest.raises(InputError, match="vocabulary differs"):
        export_bundle(disc, tmp_path / "d", generator_dir=gen)
    assert not any((tmp_path / name).exists() for name in "abcd")


def test_bundle_without_its_generator_file_is_refused(suggest_bundle: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(suggest_bundle, copy)
    (copy / GENERATOR_DIR / MODEL_ONNX).unlink()
    with pytest.raises(InputError, match=r"generator/model\.onnx is missing"):
        read_bundle(copy)
    # A bundle.json naming a generator on a classifier is not one this exporter writes.
    meta = json.loads((suggest_bundle / BUNDLE_JSON).read_text())
    meta["kind"], meta["labels"] = "classifier", {"0": "a", "1": "b"}
    (copy / BUNDLE_JSON).write_text(json.dumps(meta))
    with pytest.raises(InputError, match="a classifier has no generator"):
        read_bundle(copy)


# ----------------------------------------------------------------------------------------------------------
# /detect with suggest
# ----------------------------------------------------------------------------------------------------------


def masked_reference(
    masked_lm: Any, text: str, flagged: list[list[int]], k: int, words: bool
) -> list[list[tuple[str, float]]]:
    """What the generator proposes for each flagged unit (token indices of the encoding) of `text`: each
    unit masked alone, or with more than ALONE_MAX of them all at once; a word's pieces as one [MASK]."""
    _, tok = masked_lm
    ids = tok(text)["input_ids"]

    def masked(units: list[list[int]]) -> tuple[list[int], list[int]]:
        first = {unit[0]: unit for unit in units}
        out, positions, i = [], [], 0
        while i < len(ids):
            if i in first:
                positions.append(len(out))
                out.append(tok.mask_token_id)
                i = first[i][-1] + 1 if words else i + 1
            else:
                out.append(ids[i])
                i += 1
        return out, positions

    if len(flagged) > ALONE_MAX:
        return reference_top(masked_lm, *masked(flagged), k, words)
    return [reference_top(masked_lm, *masked([unit]), k, words)[0] for unit in flagged]


@pytest.mark.parametrize("level", ["token", "word"])
@pytest.mark.parametrize("every", [False, True], ids=["one-at-a-time", "all-flagged-at-once"])
def test_suggestions_are_the_generators_top_tokens(
    client: TestClient, masked_lm: Any, level: str, every: bool
) -> None:
    _, tok = masked_lm
    for text in TEXTS:
        # threshold 0 flags every unit: more than ALONE_MAX, so they are masked all at once.
        extra = {"threshold": 0.0} if every else {}
        (result,) = detect(client, text=text, suggest=4, level=level, **extra)["results"]
        enc = tok(text, return_offsets_mapping=True)
        units: dict[Any, list[int]] = {}
        for i, word in enumerate(enc.word_ids()):
            if word is not None:
                units.setdefault(word if level == "word" else i, []).append(i)
        assert len(units) == len(result["tokens"])
        flagged = [u for u, t in zip(units.values(), result["tokens"], strict=True) if t["replaced"]]
        if every:
            assert len(flagged) == len(units) > ALONE_MAX
        else:
            assert 0 < len(flagged) <= ALONE_MAX, "the threshold should flag some units of every text"
        expected = iter(masked_reference(masked_lm, text, flagged, 4, level == "word"))
        for t in result["tokens"]:
            if not t["replaced"]:
                assert "suggestions" not in t
                continue
            want = next(expected)
            assert [s["token"] for s in t["suggestions"]] == [w for w, _ in want]
            assert [s["score"] for s in t["suggestions"]] == pytest.approx([p for _, p in want], abs=1e-5)


def test_edits_apply_exactly(client: TestClient) -> None:
    for text in TEXTS:
        for level in ("token", "word"):
            (result,) = detect(client, text=text, suggest=3, level=level)["results"]
            best = []
            for t in result["tokens"]:
                for s in t.get("suggestions", []):
                    # The edit covers the unit, and only grows leftwards over the space a continuation takes.
                    assert s["end"] == t["end"] and s["start"] <= t["start"]
                    assert text[s["start"] : t["start"]].strip() == ""
                    applied = text[: s["start"]] + s["text"] + text[s["end"] :]
                    assert applied.startswith(text[: s["start"]]) and applied.endswith(text[s["end"] :])
                best += t.get("suggestions", [])[:1]
            expected = text
            for s in sorted(best, key=lambda s: -s["start"]):
                expected = expected[: s["start"]] + s["text"] + expected[s["end"] :]
            assert result["suggested_text"] == expected


def test_without_suggest_nothing_changes(client: TestClient) -> None:
    plain = detect(client, text=TEXTS[0])
    assert "suggested_text" not in plain["results"][0]
    assert all("suggestions" not in t for t in plain["results"][0]["tokens"])
    with_suggest = detect(client, text=TEXTS[0], suggest=1)
    for a, b in zip(plain["results"][0]["tokens"], with_suggest["results"][0]["tokens"], strict=True):
        b.pop("suggestions", None)
        assert a == b


def test_batched_suggestions_equal_single_requests(client: TestClient) -> None:
    together = detect(client, texts=TEXTS, suggest=3, level="word", threshold=0.6)["results"]
    assert any("suggestions" in t for r in together for t in r["tokens"])
    for text, result in zip(TEXTS, together, strict=True):
        (alone,) = detect(client, text=text, suggest=3, level="word", threshold=0.6)["results"]
        assert json.dumps(alone) == json.dumps(result)


def test_nothing_flagged_means_no_suggestions(client: TestClient) -> None:
    (result,) = detect(client, text=TEXTS[0], suggest=3, threshold=1.0)["results"]
    assert result["suggested_text"] == TEXTS[0]
    assert all("suggestions" not in t for t in result["tokens"])


@pytest.mark.parametrize("share", [0.08, 0.5], ids=["few-flags-alone", "many-flags-at-once"])
def test_long_documents_suggest_from_the_window_with_most_context(
    client: TestClient, masked_lm: Any, share: float
) -> None:
    _, tok = masked_lm
    text = " ".join(TEXTS * 6)  # about 200 tokens: several 64-token windows
    plain = detect(client, text=text, stride=16, threshold=0.5)["results"][0]["tokens"]
    threshold = float(np.quantile([t["score"] for t in plain], 1 - share))
    (result,) = detect(client, text=text, suggest=2, stride=16, threshold=threshold)["results"]
    assert result["windows"] > 2
    ids = tok(text)["input_ids"]
    content, span = len(ids) - 2, 62
    starts = [*range(0, content - span, span - 16), content - span]
    flagged = [i + 1 for i, t in enumerate(result["tokens"]) if t["replaced"]]
    assert flagged
    suggested = [t["suggestions"] for t in result["tokens"] if t["replaced"]]

    def context(s: int, c: int) -> int:
        before = c - s if s > 0 else content
        after = s + span - 1 - c if s + span < content else content
        return min(before, after)

    # Each token is predicted in the window where it has the most context, alone unless that window
    # owns more than ALONE_MAX flagged tokens.
    owner = {
        i: max((s for s in starts if s <= i - 1 < s + span), key=lambda s: (context(s, i - 1), -s))
        for i in flagged
    }
    owned = {s: sum(o == s for o in owner.values()) for s in starts}
    alone = {i: owned[owner[i]] <= ALONE_MAX for i in flagged}
    assert any(alone.values()) if share < 0.1 else not any(alone.values())
    for index, suggestions in zip(flagged, suggested, strict=True):
        s = owner[index]
        window = [ids[0], *ids[1 + s : 1 + s + span], ids[-1]]
        # Alone: only this token masked; else every token predicted together that the window holds.
        hidden = {index} if alone[index] else {i for i in flagged if not alone[i]}
        masked = [tok.mask_token_id if 1 + s + j in hidden else x for j, x in enumerate(window[1:-1])]
        (want,) = reference_top(masked_lm, [ids[0], *masked, ids[-1]], [index - s], 2, False)
        assert [x["token"] for x in suggestions] == [w for w, _ in want]
        assert [x["score"] for x in suggestions] == pytest.approx([p for _, p in want], abs=1e-5)


def test_truncate_suggests_in_the_first_window(client: TestClient) -> None:
    text = " ".join(TEXTS * 6)
    (result,) = detect(client, text=text, suggest=2, truncate=True)["results"]
    assert result["truncated"] and result["windows"] == 1
    assert all(len(t["suggestions"]) == 2 for t in result["tokens"] if t["replaced"])


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"model": "plain", "suggest": 2}, 400, "has no generator"),
        ({"model": "pair", "suggest": 0}, 400, "suggest"),
        ({"model": "pair", "suggest": -3}, 400, "suggest"),
        ({"model": "pair", "suggest": 2.5}, 400, "suggest"),
        ({"model": "pair", "suggest": True}, 400, "suggest"),
        ({"model": "pair", "suggest": [2]}, 400, "suggest"),
        ({"model": "pair", "suggest": "three"}, 400, "suggest"),
        ({"model": "pair", "suggest": 9}, 413, "--max-suggest"),
        ({"model": "pair", "suggest": 10**30}, 413, "--max-suggest"),
        ({"model": "sentiment", "suggest": 2}, 400, "is a classifier"),
    ],
)
def test_bad_suggest_requests_are_clear_4xx(client: TestClient, body: dict, status: int, says: str) -> None:
    r = client.post("/detect", json={"text": TEXTS[0], **body})
    assert r.status_code == status, r.text
    assert says in r.json()["detail"] + json.dumps(r.json().get("extra"))


def test_more_generator_inputs_than_the_queue_holds_is_413(suggest_bundle: Path) -> None:
    app = create_app(ServeSettings(models=(ModelSpec("pair", suggest_bundle),), max_queue=4))
    with TestClient(app) as c:
        wait_ready(c)
        scores = [t["score"] for t in detect(c, text=TEXTS[0], threshold=0.5)["results"][0]["tokens"]]
        sixth = sorted(scores)[-6]
        # Six flagged tokens, each predicted alone: six generator inputs for a queue of four.
        r = c.post("/detect", json={"model": "pair", "text": TEXTS[0], "suggest": 1, "threshold": sixth})
        assert r.status_code == 413 and "6 generator inputs" in r.json()["detail"], r.text
        assert "a higher threshold" in r.json()["detail"]
        # Four: fine.
        fourth = sorted(scores)[-4]
        r = c.post("/detect", json={"model": "pair", "text": TEXTS[0], "suggest": 1, "threshold": fourth})
        assert r.status_code == 200, r.text


def test_models_and_metrics_show_the_generator(client: TestClient) -> None:
    models = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert models["plain"]["generator"] is None
    gen = models["pair"]["generator"]
    assert gen["num_hidden_layers"] == 2 and gen["parity"]["agreement"] == 1.0

    def calls() -> float:
        return REGISTRY.get_sample_value("electra_inference_seconds_count", {"model": "pair/generator"}) or 0

    before = calls()
    detect(client, text=TEXTS[1], suggest=2)
    assert calls() == before + 1
    assert REGISTRY.get_sample_value("electra_inputs_processed_total", {"model": "pair/generator"}) >= 1
    timing = client.post("/detect", json={"model": "pair", "text": TEXTS[1], "suggest": 2, "threshold": 0})
    assert "model;dur=" in timing.headers["server-timing"]


# ----------------------------------------------------------------------------------------------------------
# The pieces: planning the generator's inputs, edits of the text
# ----------------------------------------------------------------------------------------------------------


def encoding(ids: list[int], words: list[int | None] | None = None) -> Encoded:
    n = len(ids)
    return Encoded(
        ids=np.asarray(ids, dtype=np.int64),
        type_ids=np.zeros(n, dtype=np.int64),
        offsets=[(0, 0)] * n,
        special=[1] + [0] * (n - 2) + [1],
        word_ids=words or [None, *range(n - 2), None],
        truncated=False,
    )


MASK = 4


def test_plan_masks_each_window_at_once_and_words_as_one_mask() -> None:
    full = encoding([2, *range(10, 30), 3])  # 20 content tokens
    doc = split(full, max_seq_len=10, stride=4)  # windows of 8: starts 0, 4, 8, 12
    assert doc.starts == [0, 4, 8, 12]
    targets = [Target(0, 3, 3), Target(1, 4, 4), Target(2, 11, 13), Target(3, 19, 19)]
    p = plan(doc, targets, MASK, 2, whole_words=True, alone_from=None)
    by_target = {t: (i, j) for i, answered in enumerate(p.answers) for j, t in enumerate(answered)}
    assert set(by_target) == {0, 1, 2, 3}
    # Tokens 3 and 4 (content 2, 3) have most context in the first window; the word 11-13 (content 10-12)
    # in the window starting at 8; token 19 (content 18) in the last.
    first = p.inputs[by_target[0][0]]
    assert first.ids.tolist() == [2, 10, 11, MASK, MASK, 14, 15, 16, 17, 3]
    assert first.masked == (3, 4) and first.top_k == 2 and first.whole_words
    word = p.inputs[by_target[2][0]]
    # Window 8..15 with the word's three pieces as one [MASK]; the target of window 0 is outside it.
    assert word.ids.tolist() == [2, 18, 19, MASK, 23, 24, 25, 3]
    assert word.masked == (3,)
    # The last window holds the word's last piece too: masked (the generator never sees a doubted token),
    # though the word is predicted in its own window.
    last = p.inputs[by_target[3][0]]
    assert last.ids.tolist() == [2, MASK, 23, 24, 25, 26, 27, MASK, 29, 3]
    assert last.masked == (7,)


def test_plan_predicts_long_runs_one_target_at_a_time() -> None:
    full = encoding([2, *range(10, 20), 3])
    doc = Document(full, [full], [0])
    targets = [Target(0, 2, 2), Target(1, 3, 3), Target(2, 4, 4), Target(3, 8, 8)]
    together = plan(doc, targets, MASK, 1, whole_words=False, alone_from=None)
    assert len(together.inputs) == 1 and together.answers == [[0, 1, 2, 3]]
    assert together.inputs[0].ids.tolist() == [2, 10, MASK, MASK, MASK, 14, 15, 16, MASK, 18, 19, 3]
    alone = plan(doc, targets, MASK, 1, whole_words=False, alone_from=3)
    assert alone.answers == [[3], [0], [1], [2]]
    assert alone.inputs[0].ids.tolist() == [2, 10, 11, 12, 13, 14, 15, 16, MASK, 18, 19, 3]
    assert alone.inputs[2].ids.tolist() == [2, 10, 11, MASK, 13, 14, 15, 16, 17, 18, 19, 3]
    # What the server does: every target alone, unless a window owns more than alone_max of them.
    assert plan(doc, targets, MASK, 1, whole_words=False).answers == [[0], [1], [2], [3]]
    capped = plan(doc, targets, MASK, 1, whole_words=False, alone_from=1, alone_max=3)
    assert (
        capped.answers == together.answers
        and capped.inputs[0].ids.tolist() == together.inputs[0].ids.tolist()
    )


@pytest.fixture(scope="module")
def tokenizer(suggest_bundle: Path) -> Any:
    return load_tokenizer(suggest_bundle)


def apply(tokenizer: Any, text: str, index: int, token: str, last: int | None = None) -> str:
    """`text` with `token` in place of its token `index` (..`last`), as a suggestion edits it."""
    from electra.serving.engine.encoded import from_encoding as _encoded
    from electra.serving.engine.postprocess import with_marks

    enc = _encoded(tokenizer.encode(text), False)
    target = Target(0, index, index if last is None else last)
    replacement, start, end = edit(text, with_marks(text, enc.offsets), enc, target, token, "##", True)
    return text[:start] + replacement + text[end:]


def test_edits_keep_words_and_pieces_apart(tokenizer: Any) -> None:
    # [CLS] the cat sat . [SEP]: a word for a word, in the case of the one it replaces.
    assert apply(tokenizer, "The Cat sat.", 2, "dog") == "The Dog sat."
    assert apply(tokenizer, "THE CAT SAT.", 2, "dog") == "THE DOG SAT."
    # A continuation proposed for a word joins the word before it.
    assert apply(tokenizer, "The Cat sat.", 3, "##s") == "The Cats."
    # ... and written as is when nothing comes before it.
    assert apply(tokenizer, "cat sat", 1, "##s") == "s sat"
    # A word proposed for a piece of a word starts a word of its own; punctuation needs no space.
    assert apply(tokenizer, "quickly now", 2, "fast") == "quick fast now"
    assert apply(tokenizer, "quickly now", 2, ",") == "quick, now"
    # A word in place of punctuation between two words is kept apart from both.
    assert apply(tokenizer, "mat,walking", 2, "fire") == "mat fire walking"
    # CJK characters are words of their own: no spaces needed around them.
    assert apply(tokenizer, "日本語", 2, "fire") == "日fire語"
    # A word-level edit replaces all the word's pieces.
    assert apply(tokenizer, "The lovers dog", 2, "river", last=4) == "The river dog"


def test_hub_ids_of_a_pair_export_offline_from_the_cache(hf_cache: Path, tmp_path: Path) -> None:
    """`electra export --model google/...-discriminator --generator google/...-generator`, offline, from a
    cache holding the two repositories' layouts (pytorch_model.bin, vocab.txt) at tiny dimensions."""
    import torch
    import transformers

    from electra.cli.main import main

    disc_id, gen_id = "google-test/electra-tiny-discriminator", "google-test/electra-tiny-generator"
    add_snapshot(hf_cache, disc_id, google_layout(tmp_path), COMMIT_B, ("main",))
    config = {**GOOGLE_CONFIG, "architectures": ["ElectraForMaskedLM"], "hidden_size": 16}
    config.update(num_attention_heads=1, intermediate_size=64)
    torch.manual_seed(1)
    saved = tmp_path / "generator"
    transformers.ElectraForMaskedLM(transformers.ElectraConfig(**config)).save_pretrained(
        saved, safe_serialization=False
    )
    files = google_layout(tmp_path)
    files.update(
        {
            "config.json": json.dumps(config).encode(),
            "pytorch_model.bin": (saved / "pytorch_model.bin").read_bytes(),
        }
    )
    add_snapshot(hf_cache, gen_id, files, COMMIT_B, ("main",))
    out = tmp_path / "bundle"
    assert main(["export", "--model", disc_id, "--generator", gen_id, "--out", str(out)]) == 0
    bundle = read_bundle(out)
    assert bundle.generator is not None and bundle.generator.hidden_size == 16
    assert bundle.generator.parity.max_abs_diff < 1e-4
    with TestClient(create_app(ServeSettings(models=(ModelSpec("pair", out),)))) as c:
        wait_ready(c)
        r = c.post("/detect", json={"text": "the movie was very good.", "suggest": 2, "threshold": 0})
        assert r.status_code == 200, r.text
        assert all(len(t["suggestions"]) == 2 for t in r.json()["results"][0]["tokens"])
    # A Hub id that is not in the cache, offline: one line naming it.
    assert main(["export", "--model", disc_id, "--generator", "google-test/nothing", "--out", str(out)]) == 2


def reference_plan(
    doc: Document, targets: list[Target], alone_from: int | None, alone_max: int | None
) -> list[tuple[list[int], list[int], list[int]]]:
    """The planner as first written, scanning every window for every target and the whole document for every
    input (and mended: a word that had room in no window after its first piece, at a small stride, was given
    no window and failed the request): per input, (its ids, its masked positions, the targets it answers)."""
    tokens, span = doc.full.length - 2, doc.span

    def owner(t: Target) -> int:
        best, best_context = 0, -(10**9)  # at first -1: a word with no room in any window had no owner
        for w, start in enumerate(doc.starts):
            if not start <= t.first - 1 < start + span:
                continue
            before = t.first - 1 - start if start > 0 else tokens
            after = start + span - 1 - (t.last - 1) if start + span < tokens else tokens
            if min(before, after) > best_context:
                best, best_context = w, min(before, after)
        return best

    def window_input(window: int, masked: list[int]) -> tuple[list[int], dict[int, int]]:
        ids = doc.full.ids.tolist()
        start, end = 1 + doc.starts[window], 1 + doc.starts[window] + span
        by_first = {max(targets[i].first, start): targets[i] for i in masked}
        out, first_mask, i = [ids[0]], {}, start
        while i < end:
            t = by_first.get(i)
            if t is None:
                out.append(ids[i])
                i += 1
                continue
            first_mask[t.first] = len(out)
            out.append(MASK)
            i = min(t.last, end - 1) + 1
        return [*out, ids[doc.full.length - 1]], first_mask

    owners = [owner(t) for t in targets]
    alone = [False] * len(targets)
    if alone_from is not None:
        run: list[int] = []
        for i in [*sorted(range(len(targets)), key=lambda i: targets[i].first), None]:
            if i is not None and run and targets[i].first == targets[run[-1]].last + 1:
                run.append(i)
                continue
            if len(run) >= alone_from:
                for j in run:
                    alone[j] = True
            run = [] if i is None else [i]
    if alone_max is not None:
        alone = [a and owners.count(owners[i]) <= alone_max for i, a in enumerate(alone)]
    out = []
    together = [i for i in range(len(targets)) if not alone[i]]
    for window in sorted({owners[i] for i in together}):
        answered = [i for i in together if owners[i] == window]
        start = doc.starts[window]
        masked = [i for i in together if targets[i].first - 1 < start + span and targets[i].last - 1 >= start]
        ids, first_mask = window_input(window, masked)
        out.append((ids, [first_mask[targets[i].first] for i in answered], answered))
    for i in range(len(targets)):
        if alone[i]:
            ids, first_mask = window_input(owners[i], [i])
            out.append((ids, [first_mask[targets[i].first]], [i]))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_plan_equals_the_planner_as_first_written(seed: int) -> None:
    """The planner finds each target's windows and each window's targets by bisection, and reads only a
    window's tokens per input (a long document's suggestions were quadratic in its length): the same inputs
    as the scanning planner, for documents of one window or many, words of one piece or several, every
    strategy."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 120))
    full = encoding([2, *rng.integers(10, 99, n).tolist(), 3])
    max_seq_len = int(rng.integers(6, 40))
    doc = split(full, max_seq_len, int(rng.integers(0, (max_seq_len - 2) // 2 + 1)))
    targets, i = [], 1
    while i <= n:  # disjoint units of 1-3 tokens, about half of them flagged
        last = min(n, i + int(rng.integers(0, 3)))
        if rng.random() < 0.5:
            targets.append(Target(len(targets), i, last))
        i = last + 1
    alone_from = [None, 1, 2, 3][int(rng.integers(4))]
    alone_max = [None, 1, 3, ALONE_MAX][int(rng.integers(4))]
    got = plan(doc, targets, MASK, 2, whole_words=True, alone_from=alone_from, alone_max=alone_max)
    expected = reference_plan(doc, targets, alone_from, alone_max)
    assert [(x.ids.tolist(), list(x.masked), a) for x, a in zip(got.inputs, got.answers, strict=True)] == [
        (ids, masked, answered) for ids, masked, answered in expected
    ]


@pytest.mark.parametrize("seed", range(20))
def test_the_best_suggestions_apply_as_one_edit_after_another(seed: int) -> None:
    """apply_best makes the text in one pass; applied one at a time, from the last edit back, the same."""
    rng = np.random.default_rng(seed)
    text = "".join(rng.choice(list("ab cd,é")) for _ in range(int(rng.integers(0, 60))))
    cuts = sorted(set(rng.integers(0, len(text) + 1, int(rng.integers(0, 12))).tolist()))
    tokens = []
    for start, end in itertools.pairwise(cuts):
        flagged = bool(rng.random() < 0.6)
        proposals = [Suggestion("x", 0.5, "".join(rng.choice(list("XY ")) for _ in range(3)), start, end)]
        tokens.append(Token(text[start:end], start, end, 0.9, flagged, proposals if flagged else UNSET))
    result = DetectResult(tokens=tokens, replaced_fraction=0.0, truncated=False)
    expected = text
    for t in reversed(tokens):
        if t.suggestions:
            expected = expected[: t.start] + t.suggestions[0].text + expected[t.end :]
    assert apply_best(text, result) == expected


def test_the_best_suggestions_of_a_long_text_apply_in_linear_time() -> None:
    """One copy of the text per edit made a 200,000-character text flagged throughout take minutes of CPU.
    Bound: 2 s of this thread's CPU, generous (tests/test_request_bounds.py)."""
    n = 100_000
    tokens = [
        Token("a", 2 * i, 2 * i + 1, 0.9, True, [Suggestion("b", 0.5, "b", 2 * i, 2 * i + 1)])
        for i in range(n)
    ]
    result = DetectResult(tokens=tokens, replaced_fraction=1.0, truncated=False)
    start = time.thread_time()
    assert apply_best("a " * n, result) == "b " * n
    assert time.thread_time() - start < 2.0
