"""Hugging Face Hub ids wherever a model or tokenizer is taken (electra.hub, wired in at the CLI).

Never touches the network: every test builds a Hugging Face cache by hand, in the layout huggingface_hub
writes (`models--owner--name/{blobs,refs,snapshots}`), holding a tiny model laid out like the released Google
checkpoints (ElectraForPreTraining config.json, pytorch_model.bin, BERT uncased vocab.txt and
tokenizer_config.json, embedding_size == hidden_size), and runs with HF_HUB_OFFLINE=1. The online code path is
exercised with huggingface_hub's API replaced by fakes.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from electra import hub
from electra.cli.main import main
from electra.errors import InputError
from tests.conftest import ERROR_LINE

REPO = "google-test/electra-tiny-discriminator"
COMMIT_A = "a" * 40
COMMIT_B = "b" * 40
WORDS = ["good", "great", "fine", "bad", "awful", "poor", "the", "movie", "was", "plot", "and", "very"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = [*SPECIALS, ".", ",", "!", *WORDS, "##s", "##ly"]
# What the released checkpoints' config.json holds (google/electra-small-discriminator), at tiny dimensions.
GOOGLE_CONFIG = {
    "architectures": ["ElectraForPreTraining"],
    "attention_probs_dropout_prob": 0.1,
    "embedding_size": 32,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 32,
    "initializer_range": 0.02,
    "intermediate_size": 64,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 64,
    "model_type": "electra",
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "pad_token_id": 0,
    "type_vocab_size": 2,
    "vocab_size": len(VOCAB),
}


# ----------------------------------------------------------------------------------------------------------
# A Hugging Face cache built by hand
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hub cache under HF_HOME, offline: what a machine without network access sees."""
    home = tmp_path / "hf-home"
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = home / "hub"
    cache.mkdir(parents=True)
    assert hub.cache_dir() == cache
    return cache


def add_snapshot(
    cache: Path, repo_id: str, files: dict[str, bytes], commit: str, refs: tuple[str, ...]
) -> Path:
    """One commit of `repo_id` in the cache as huggingface_hub lays it out: content-addressed blobs (named by
    their sha256, as LFS files are), snapshots/<commit>/<path> relative symlinks to them, refs/<name> holding
    the commit hash."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo / "snapshots" / commit
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(*[".."] * (len(Path(name).parts) + 1), "blobs", blob.name))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)  # no newline: huggingface_hub reads the file as is
    return snapshot


def google_layout(tmp_path: Path, vocab: list[str] = VOCAB, seed: int = 0) -> dict[str, bytes]:
    """The files of a released ELECTRA discriminator repository (the ones we read), at tiny dimensions."""
    import torch
    import transformers

    out = tmp_path / f"google-layout-{seed}-{len(vocab)}"
    torch.manual_seed(seed)
    config = transformers.ElectraConfig(**{**GOOGLE_CONFIG, "vocab_size": len(vocab)})
    model = transformers.ElectraForPreTraining(config)
    model.save_pretrained(out, safe_serialization=False)  # pytorch_model.bin, as the Google repos have
    return {
        "config.json": json.dumps({**GOOGLE_CONFIG, "vocab_size": len(vocab)}, indent=2).encode(),
        "pytorch_model.bin": (out / "pytorch_model.bin").read_bytes(),
        "vocab.txt": ("\n".join(vocab) + "\n").encode(),
        "tokenizer_config.json": json.dumps({"do_lower_case": True, "model_max_length": 64}).encode(),
    }


@pytest.fixture
def cached_repo(hf_cache: Path, tmp_path: Path) -> Path:
    """REPO at COMMIT_B (main) in the cache; returns its snapshot directory."""
    return add_snapshot(hf_cache, REPO, google_layout(tmp_path), COMMIT_B, ("main",))


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert ERROR_LINE.match(err.rstrip("\n")) and err.count("\n") == 1, err
    return err


# ----------------------------------------------------------------------------------------------------------
# electra.hub on its own
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "is_id"),
    [
        ("google/electra-small-discriminator", True),
        ("bert-base-uncased", True),
        ("owner/name.v1", True),
        ("runs/small/discriminator", False),
        ("./model", False),
        ("/abs/model", False),
        ("~/model", False),
        ("vocab.txt", False),
        ("tok/tokenizer.json", False),
        ("owner--name", False),
        ("owner/../x", False),
        ("", False),
    ],
)
def test_what_counts_as_a_hub_id(ref: str, is_id: bool) -> None:
    assert hub.looks_like_hub_id(ref) is is_id


def test_cache_dir_follows_the_environment_read_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert hub.cache_dir() == Path.home() / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub.cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert hub.cache_dir() == tmp_path / "cache"


def test_only_the_files_we_read_are_fetched() -> None:
    google = [
        ".gitattributes",
        "README.md",
        "config.json",
        "flax_model.msgpack",
        "model.safetensors",
        "onnx/model.onnx",
        "pytorch_model.bin",
        "tf_model.h5",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    assert hub.wanted_files(google, "model") == [
        "config.json",
        "model.safetensors",  # preferred over pytorch_model.bin: one weights file, never both
        "tokenizer.json",
        "vocab.txt",
        "tokenizer_config.json",
    ]
    assert hub.wanted_files(google, "tokenizer") == ["tokenizer.json", "vocab.txt", "tokenizer_config.json"]
    assert (
        hub.wanted_files([f for f in google if f != "model.safetensors"], "model")[1] == "pytorch_model.bin"
    )
    run = ["discriminator/config.json", "discriminator/model.safetensors", "discriminator/vocab.txt"]
    run += ["generator/config.json", "generator/model.safetensors", "checkpoints/step-10/model.pt"]
    assert hub.wanted_files(run, "model") == run[:5]
    assert hub.wanted_files(["tf_model.h5", "config.json"], "model") == []


def test_a_local_path_is_returned_as_it_is(tmp_path: Path) -> None:
    assert hub.resolve(tmp_path) == tmp_path
    assert hub.resolve(str(tmp_path)) == tmp_path
    missing = tmp_path / "nothing"
    assert hub.resolve(missing) == missing  # the stage reports it, as before
    with pytest.raises(InputError, match="local path"):
        hub.resolve(tmp_path, revision="main")


# ----------------------------------------------------------------------------------------------------------
# The commands, on a cached Google-layout repository
# ----------------------------------------------------------------------------------------------------------


def test_export_a_hub_id_to_a_fused_bundle_that_serves(cached_repo: Path, tmp_path: Path, capsys) -> None:
    from litestar.testing import TestClient

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    bundle = tmp_path / "bundle"
    assert main(["export", "--model", REPO, "--out", str(bundle)]) == 0, capsys.readouterr().err
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["kind"] == "discriminator"
    assert meta["fused_operators"]["Attention"] == GOOGLE_CONFIG["num_hidden_layers"]
    assert meta["parity"]["max_abs_diff"] < 1e-4

    app = create_app(ServeSettings(models=(ModelSpec("detector", bundle),)))
    with TestClient(app) as client:
        deadline = time.monotonic() + 30
        while client.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.02)
        text = "The movie was very GOOD, the plot awful!"
        r = client.post("/detect", json={"text": text})
        assert r.status_code == 200, r.text
    tokens = r.json()["results"][0]["tokens"]
    assert [t["text"] for t in tokens] == [
        "The",
        "movie",
        "was",
        "very",
        "GOOD",
        ",",
        "the",
        "plot",
        "awful",
        "!",
    ]
    assert all(text[t["start"] : t["end"]] == t["text"] and 0 <= t["score"] <= 1 for t in tokens)


def test_tokenizer_show_takes_a_hub_id(cached_repo: Path, capsys) -> None:
    assert main(["tokenizer", "show", "--tokenizer", REPO, "Good movies!"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == ["[CLS]", "good", "movie", "##s", "!", "[SEP]"]


def test_data_prepare_takes_a_hub_tokenizer(cached_repo: Path, tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus.txt"
    rng = random.Random(0)
    docs = [" ".join(rng.choices(WORDS, k=12)) + " ." for _ in range(40)]
    corpus.write_text("\n\n".join(docs) + "\n")
    out = tmp_path / "data"
    args = ["data", "prepare", "--corpus", str(corpus), "--tokenizer", REPO, "--max-seq-len", "16"]
    assert main([*args, "--out", str(out), "--workers", "1", "--quiet"]) == 0, capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tokenizer"]["vocab_size"] == len(VOCAB)


def test_finetune_evaluate_predict_take_a_hub_id(cached_repo: Path, tmp_path: Path, capsys) -> None:
    import csv

    rng = random.Random(1)

    def write(path: Path, n: int) -> Path:
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            for _ in range(n):
                label = rng.choice(["pos", "neg"])
                cue = rng.choice(["good", "great"] if label == "pos" else ["bad", "awful"])
                w.writerow([f"the movie was {cue} .", label])
        return path

    train, dev = write(tmp_path / "train.csv", 64), write(tmp_path / "dev.csv", 16)
    out = tmp_path / "clf"
    args = ["finetune", "--task", "custom", "--train", str(train), "--dev", str(dev), "--model", REPO]
    args += ["--out", str(out), "--epochs", "1", "--quiet", "--device", "cpu"]
    assert main(args) == 0, capsys.readouterr().err
    assert json.loads((out / "eval_results.json").read_text())["selected_seed"] == 1
    capsys.readouterr()
    # A fine-tuned classifier pushed to the Hub is taken the same way by evaluate and predict.
    clf_files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    add_snapshot(hub.cache_dir(), "me/electra-tiny-sentiment", clf_files, COMMIT_A, ("main",))
    evaluate = ["evaluate", "--task", "custom", "--model", "me/electra-tiny-sentiment", "--dev", str(dev)]
    assert main([*evaluate, "--json", "--device", "cpu"]) == 0, capsys.readouterr().err
    assert 0 <= json.loads(capsys.readouterr().out)["dev"]["accuracy"] <= 1
    predict = ["predict", "--task", "custom", "--model", "me/electra-tiny-sentiment", "--input", str(dev)]
    assert main([*predict, "--device", "cpu"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 17


def test_revision_selects_a_snapshot(hf_cache: Path, tmp_path: Path, capsys) -> None:
    # Commit A (tag v1) has a different vocabulary order than commit B (main): the ids tell them apart.
    old_vocab = [*SPECIALS, "good", *[w for w in VOCAB if w not in SPECIALS and w != "good"]]
    add_snapshot(hf_cache, REPO, google_layout(tmp_path, old_vocab), COMMIT_A, ("v1",))
    add_snapshot(hf_cache, REPO, google_layout(tmp_path), COMMIT_B, ("main",))

    def id_of_good(*extra: str) -> int:
        assert main(["tokenizer", "show", "--tokenizer", REPO, *extra, "good"]) == 0
        return int(capsys.readouterr().out.splitlines()[1].split()[0])

    assert id_of_good() == VOCAB.index("good")
    assert id_of_good("--revision", "main") == VOCAB.index("good")
    assert id_of_good("--revision", "v1") == old_vocab.index("good")
    assert id_of_good("--revision", COMMIT_A) == old_vocab.index("good")
    assert hub.resolve(REPO, "v1") == hf_cache / f"models--{REPO.replace('/', '--')}" / "snapshots" / COMMIT_A

    assert main(["tokenizer", "show", "--tokenizer", REPO, "--revision", "v2", "good"]) == 2
    err = one_line_error(capsys)
    assert REPO in err and "v2" in err and "HF_HUB_OFFLINE=1" in err


@pytest.mark.parametrize(
    "command",
    [
        ["export", "--model", "{id}", "--out", "{tmp}/bundle"],
        ["finetune", "--task", "sst2", "--model", "{id}", "--out", "{tmp}/clf", "--data-dir", "{tmp}"],
        ["evaluate", "--task", "sst2", "--model", "{id}", "--data-dir", "{tmp}"],
        ["predict", "--task", "sst2", "--model", "{id}", "--input", "{tmp}/test.tsv"],
        ["pretrain", "--data", "{tmp}", "--out", "{tmp}/run", "--init", "{id}"],
        ["data", "prepare", "--tokenizer", "{id}", "--out", "{tmp}/data"],
        ["tokenizer", "show", "--tokenizer", "{id}", "text"],
    ],
    ids=lambda c: " ".join(c[:2]) if c[0] in ("data", "tokenizer") else c[0],
)
def test_an_id_not_in_the_cache_offline_is_one_line(
    hf_cache: Path, tmp_path: Path, capsys, command: list[str]
) -> None:
    args = [a.format(id="google/electra-small-discriminator", tmp=tmp_path) for a in command]
    assert main(args) == 2
    err = one_line_error(capsys)
    assert "google/electra-small-discriminator" in err and "not in the Hugging Face cache" in err
    assert "HF_HUB_OFFLINE=1" in err and "network" in err


def test_an_incomplete_cached_snapshot_is_one_line(hf_cache: Path, tmp_path: Path, capsys) -> None:
    files = google_layout(tmp_path)
    add_snapshot(hf_cache, REPO, {"config.json": files["config.json"]}, COMMIT_B, ("main",))
    assert main(["export", "--model", REPO, "--out", str(tmp_path / "bundle")]) == 2
    err = one_line_error(capsys)
    assert REPO in err and "lacks" in err and "pytorch_model.bin" in err
    assert not (tmp_path / "bundle").exists()


def test_local_paths_still_work_and_missing_ones_error_as_before(
    cached_repo: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["tokenizer", "show", "--tokenizer", str(cached_repo), "good"]) == 0
    assert "good" in capsys.readouterr().out
    # A directory that exists wins over a Hub id of the same spelling.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "google-test").mkdir()
    (tmp_path / "google-test" / "electra-tiny-discriminator").symlink_to(cached_repo)
    assert main(["tokenizer", "show", "--tokenizer", REPO, "good"]) == 0
    capsys.readouterr()

    missing = tmp_path / "nothing"
    assert main(["tokenizer", "show", "--tokenizer", str(missing), "good"]) == 2
    assert f"{missing} does not exist" in one_line_error(capsys)
    args = ["finetune", "--task", "sst2", "--model", str(missing), "--out", str(tmp_path / "o")]
    assert main([*args, "--data-dir", str(tmp_path)]) == 2
    assert f"--model {missing}: no such directory" in one_line_error(capsys)
    assert main(["export", "--model", "./nothing", "--out", str(tmp_path / "b")]) == 2
    assert "nothing" in one_line_error(capsys)
    assert main(["tokenizer", "show", "--tokenizer", str(cached_repo), "--revision", "v1", "x"]) == 2
    assert "--revision" in one_line_error(capsys)


# ----------------------------------------------------------------------------------------------------------
# The online path, with huggingface_hub's API replaced by fakes (no network)
# ----------------------------------------------------------------------------------------------------------


class _Sibling:
    def __init__(self, name: str) -> None:
        self.rfilename = name


class _Info:
    def __init__(self, files: list[str]) -> None:
        self.siblings = [_Sibling(f) for f in files]


@pytest.fixture
def online(hf_cache: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """HF_HUB_OFFLINE unset; HfApi.model_info and snapshot_download are fakes that record their calls."""
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    calls: dict[str, Any] = {"files": ["config.json", "pytorch_model.bin", "tf_model.h5", "vocab.txt"]}

    def model_info(self, repo_id: str, revision: str | None = None, **kw: Any) -> _Info:
        if "error" in calls:
            raise calls["error"]
        return _Info(calls["files"])

    real_snapshot_download = huggingface_hub.snapshot_download

    def snapshot_download(repo_id: str, **kw: Any) -> str:
        if kw.get("local_files_only"):
            return real_snapshot_download(repo_id, **kw)
        calls["snapshot_download"] = kw
        folder = hf_cache / "fake-snapshot"
        folder.mkdir(exist_ok=True)
        for name in kw.get("allow_patterns") or []:
            (folder / name).write_text("{}")
        return str(folder)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_online_download_asks_for_our_files_into_our_cache(online: dict[str, Any], hf_cache: Path) -> None:
    folder = hub.resolve(REPO, "v1")
    kw = online["snapshot_download"]
    assert kw["allow_patterns"] == ["config.json", "pytorch_model.bin", "vocab.txt"]
    assert kw["revision"] == "v1" and Path(kw["cache_dir"]) == hf_cache
    assert (folder / "pytorch_model.bin").is_file()
    online["files"] = ["config.json", "tf_model.h5", "vocab.txt"]
    with pytest.raises(
        InputError, match=r"has no config\.json with model\.safetensors or pytorch_model\.bin"
    ):
        hub.resolve(REPO)


def _http_error(cls: type, status: int) -> Exception:
    import requests

    response = requests.Response()
    response.status_code = status
    response.url = f"https://huggingface.co/api/models/{REPO}"
    return cls(f"{status} Client Error.\n\nmore detail on a second line", response=response)


@pytest.mark.parametrize(
    ("error", "needles"),
    [
        ("RepositoryNotFoundError", ("neither a local path nor a Hugging Face Hub repository", "HF_TOKEN")),
        ("GatedRepoError", ("gated", f"https://huggingface.co/{REPO}", "HF_TOKEN")),
        ("RevisionNotFoundError", ("--revision v9 does not exist", "branches, tags or commit hashes")),
        ("HfHubHTTPError", ("failed (500 Client Error.)", "try again later")),
    ],
)
def test_hub_errors_are_one_line_naming_the_id(
    online: dict[str, Any], capsys, error: str, needles: tuple[str, ...]
) -> None:
    import huggingface_hub.errors

    status = 500 if error == "HfHubHTTPError" else 404
    online["error"] = _http_error(getattr(huggingface_hub.errors, error), status)
    assert main(["tokenizer", "show", "--tokenizer", REPO, "--revision", "v9", "x"]) == 2
    err = one_line_error(capsys)
    assert REPO in err and all(n in err for n in needles), err


def test_no_network_falls_back_to_the_cache(
    online: dict[str, Any], hf_cache: Path, tmp_path: Path, capsys
) -> None:
    import requests

    online["error"] = requests.ConnectionError("no route to host")
    assert main(["tokenizer", "show", "--tokenizer", REPO, "x"]) == 2
    err = one_line_error(capsys)
    assert "not in the Hugging Face cache" in err and "could not be reached" in err
    add_snapshot(hf_cache, REPO, google_layout(tmp_path), COMMIT_B, ("main",))
    assert main(["tokenizer", "show", "--tokenizer", REPO, "good"]) == 0
    assert "good" in capsys.readouterr().out
    assert "snapshot_download" not in online  # found in the cache, nothing downloaded


def _bert_uncased_vocab() -> list[str]:
    """The BERT uncased vocabulary the released models use: the shared copy when there is one, else one of the
    same size with BERT's special-token ids ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103)."""
    from tests.conftest import shared_path

    shared = shared_path("models/bert-uncased-vocab/vocab.txt")
    if shared.is_file():
        return shared.read_text(encoding="utf-8").splitlines()
    vocab = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [
        *WORDS,
        ".",
        ",",
        "!",
        *"abcdefghijklmnopqrstuvwxyz",
        *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"),
    ]
    vocab += [f"word{i}" for i in range(30522 - len(vocab))]
    return vocab


@pytest.mark.slow
def test_the_released_small_checkpoint_id_exports_and_serves(hf_cache: Path, tmp_path: Path, capsys) -> None:
    """`electra export --model google/electra-small-discriminator` offline, from a cache holding that
    repository's layout at its real size (ELECTRA-Small: 12 layers, hidden 256, embeddings 128 projected,
    30,522 word pieces; random weights), makes a fused bundle that serves /detect."""
    import torch
    import transformers
    from litestar.testing import TestClient

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    repo_id = "google/electra-small-discriminator"
    vocab = _bert_uncased_vocab()
    config = transformers.ElectraConfig(vocab_size=len(vocab))  # transformers' defaults are ELECTRA-Small's
    torch.manual_seed(0)
    saved = tmp_path / "small"
    transformers.ElectraForPreTraining(config).save_pretrained(saved, safe_serialization=False)
    hf_config = {**config.to_diff_dict(), "architectures": ["ElectraForPreTraining"], "model_type": "electra"}
    files = {
        "config.json": json.dumps(hf_config).encode(),
        "pytorch_model.bin": (saved / "pytorch_model.bin").read_bytes(),
        "vocab.txt": ("\n".join(vocab) + "\n").encode(),
        "tokenizer_config.json": json.dumps({"do_lower_case": True, "model_max_length": 512}).encode(),
    }
    add_snapshot(hf_cache, repo_id, files, COMMIT_B, ("main",))

    bundle = tmp_path / "bundle"
    assert main(["export", "--model", repo_id, "--out", str(bundle)]) == 0, capsys.readouterr().err
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["kind"] == "discriminator" and meta["hidden_size"] == 256
    assert (
        meta["fused_operators"]["Attention"] == 12 and meta["fused_operators"]["EmbedLayerNormalization"] == 1
    )
    assert meta["parity"]["max_abs_diff"] < 1e-4

    with TestClient(create_app(ServeSettings(models=(ModelSpec("detector", bundle),)))) as client:
        deadline = time.monotonic() + 60
        while client.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.05)
        text = "The chef cooked the river."
        r = client.post("/detect", json={"text": text, "level": "word"})
        assert r.status_code == 200, r.text
    tokens = r.json()["results"][0]["tokens"]
    assert [t["text"] for t in tokens] == ["The", "chef", "cooked", "the", "river", "."]
    assert all(text[t["start"] : t["end"]] == t["text"] for t in tokens)


def test_a_released_cross_encoder_id_exports_and_reranks_as_sentence_transformers_does(
    hf_cache: Path, tmp_path: Path, capsys
) -> None:
    # cross-encoder/ms-marco-electra-base as sentence-transformers publishes it: transformers'
    # ElectraForSequenceClassification with one output, pytorch_model.bin and a BERT vocabulary; tiny here.
    import torch
    import transformers
    from litestar.testing import TestClient
    from sentence_transformers import CrossEncoder

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    repo_id = "cross-encoder/ms-marco-electra-base"
    out = tmp_path / "ce-layout"
    torch.manual_seed(4)
    config = {
        **GOOGLE_CONFIG,
        "vocab_size": len(VOCAB),
        "num_labels": 1,
        "architectures": ["ElectraForSequenceClassification"],
    }
    model = transformers.ElectraForSequenceClassification(transformers.ElectraConfig(**config))
    model.save_pretrained(out, safe_serialization=False)
    files = {
        "config.json": (out / "config.json").read_bytes(),
        "pytorch_model.bin": (out / "pytorch_model.bin").read_bytes(),
        "vocab.txt": ("\n".join(VOCAB) + "\n").encode(),
        "tokenizer_config.json": json.dumps({"do_lower_case": True, "model_max_length": 64}).encode(),
    }
    snapshot = add_snapshot(hf_cache, repo_id, files, COMMIT_A, ("main",))
    bundle = tmp_path / "reranker"
    assert main(["export", "--model", repo_id, "--out", str(bundle)]) == 0, capsys.readouterr().err
    query, texts = "the movie", ["the movie was great .", "bad .", "the plot was awful ."]
    expected = CrossEncoder(str(snapshot), device="cpu").predict([(query, t) for t in texts])
    with TestClient(create_app(ServeSettings(models=(ModelSpec("ce", bundle),)))) as client:
        while client.get("/health/ready").status_code != 200:
            pass
        ranks = client.post("/rerank", json={"query": query, "texts": texts}).json()
    assert [r["index"] for r in ranks] == sorted(range(3), key=lambda i: -float(expected[i]))
    got = {r["index"]: r["score"] for r in ranks}
    assert [got[i] for i in range(3)] == pytest.approx([float(x) for x in expected], abs=1e-4)
