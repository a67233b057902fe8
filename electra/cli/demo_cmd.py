"""`electra demo`: the main job, end to end on the embedded demo corpus, with no download and no input.

Every stage writes into --workdir and is skipped when its output is already there and valid, so a second
run picks up where the first stopped (an interrupted pre-training resumes from its checkpoint). Stages: demo
corpus -> tokenizer -> packed pre-training data -> a few minutes of pre-training (tiny model, CPU) -> fused
ONNX bundle -> `electra serve` on it, with a ready-to-paste curl for /detect.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from electra.cli.common import add_progress_flag, default_workers, demo_corpus, positive_int, show_progress
from electra.errors import InputError

# The demo model: ELECTRA's tiny preset, batch 32, lr 5e-4 with a 10% warm-up. On 2 CPU cores 400 steps took
# 2.5 minutes (the whole demo 3.7) and put the discriminator above the all-original baseline (0.873 vs 0.853);
# 600 steps keep the whole demo near 5 minutes, well inside the 10 the main job may take.
DEMO_SIZE = "tiny"
DEMO_STEPS = 600
DEMO_LR = 5e-4
DEMO_BATCH = 32
DEMO_MODEL_NAME = "demo"
CURL_TEXT = "The chef cooked a delicious meal for the guests and then painted the river blue."


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the whole pipeline on the embedded demo corpus, then serve the model (no download needed)",
        description="Build the demo corpus (docstrings of the installed Python modules), train a tokenizer "
        "on it, prepare pre-training data, pre-train a tiny ELECTRA for a few minutes, export it to a fused "
        "ONNX bundle and serve it (POST /detect, the page at /), all in --workdir. Finished stages are "
        "reused; --no-serve stops after the bundle.",
    )
    p.add_argument("--workdir", type=Path, default=Path("electra-demo"), help="where to put everything")
    p.add_argument(
        "--vocab-size", type=positive_int, default=16384, help="tokenizer vocabulary (default 16384)"
    )
    p.add_argument("--max-seq-len", type=int, default=128, help="tokens per example (default 128)")
    p.add_argument(
        "--corpus-mb", type=positive_int, default=20, help="size of the demo corpus in MB (default 20)"
    )
    p.add_argument(
        "--steps", type=positive_int, default=DEMO_STEPS, help=f"pre-training steps (default {DEMO_STEPS})"
    )
    p.add_argument("--fresh", action="store_true", help="rebuild every stage even if its output exists")
    p.add_argument("--no-serve", action="store_true", help="stop after exporting the bundle")
    p.add_argument("--host", default="127.0.0.1", help="where to serve (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
    add_progress_flag(p)
    p.set_defaults(handler=demo)


def _stage(n: int, total: int, title: str) -> None:
    print(f"[{n}/{total}] {title}", file=sys.stderr, flush=True)


def demo(args: argparse.Namespace) -> int:
    from electra.atomic import atomic_dir
    from electra.cli.data_cmd import report
    from electra.tokenizer import load_tokenizer, save_tokenizer
    from electra.training.data.corpus import iter_corpus_lines
    from electra.training.data.dataset import PretrainingData
    from electra.training.data.prepare import PrepareConfig, prepare_dataset
    from electra.training.data.tokenizer_train import train_tokenizer

    work: Path = args.workdir
    progress = show_progress(args)
    total = 6
    start = time.perf_counter()
    if work.exists() and not work.is_dir():
        raise InputError(f"--workdir {work} exists and is not a directory")

    _stage(1, total, "demo corpus")
    if args.fresh and (work / "corpus").exists():
        shutil.rmtree(work / "corpus")
    corpus = demo_corpus(cache=work / "corpus", progress=progress, max_bytes=args.corpus_mb * 1_000_000)

    _stage(2, total, "tokenizer")
    tok_dir = work / "tokenizer"
    if _valid(lambda: load_tokenizer(tok_dir)) and not args.fresh:
        print(f"reusing {tok_dir}", file=sys.stderr)
    else:
        tok = train_tokenizer(iter_corpus_lines([corpus]), vocab_size=args.vocab_size, show_progress=progress)
        with atomic_dir(tok_dir, overwrite=True) as tmp:
            save_tokenizer(tok, tmp)
        print(f"wrote {tok_dir}: vocabulary of {tok.get_vocab_size():,}", file=sys.stderr)

    _stage(3, total, "pre-training data")
    data_dir = work / "data"
    if _valid(lambda: PretrainingData.open(data_dir)) and not args.fresh:
        print(f"reusing {data_dir}", file=sys.stderr)
    else:
        summary = prepare_dataset(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(tok_dir),
                out=data_dir,
                max_seq_len=args.max_seq_len,
                workers=default_workers(),
                overwrite=True,
                progress=progress,
            )
        )
        report(summary)
    data = PretrainingData.open(data_dir)
    print(
        f"data: {len(data.train):,} training examples of {data.max_seq_len} tokens in {data_dir}",
        file=sys.stderr,
    )

    _stage(4, total, f"pre-training ({DEMO_SIZE} model, {args.steps} steps)")
    run_dir = work / "pretrain"
    disc_dir = run_dir / "discriminator"
    retrained = not (_valid(lambda: _load_discriminator(disc_dir)) and not args.fresh)
    if not retrained:
        print(f"reusing {disc_dir}", file=sys.stderr)
    else:
        _pretrain(data_dir, run_dir, args.steps, fresh=args.fresh, progress=progress)

    _stage(5, total, "fused ONNX bundle")
    bundle = work / "bundle"
    if _valid(lambda: _load_bundle(bundle)) and not retrained:
        print(f"reusing {bundle}", file=sys.stderr)
    else:
        from electra.onnx.export import export_bundle

        meta = export_bundle(disc_dir, bundle, precision="fp32", max_seq_len=data.max_seq_len, overwrite=True)
        print(
            f"wrote {bundle}: {meta['fused_operators']['Attention']} fused Attention layers", file=sys.stderr
        )
    print(f"built in {time.perf_counter() - start:.0f} s", file=sys.stderr)

    if args.no_serve:
        print(f"bundle ready: {bundle}\n  serve it:  electra serve --model {DEMO_MODEL_NAME}={bundle}")
        return 0
    _stage(6, total, f"serving on http://{args.host}:{args.port}")
    return _serve(bundle, args.host, args.port)


def _load_discriminator(path: Path) -> None:
    from electra.config import ElectraConfig

    if not (path / "model.safetensors").is_file() and not (path / "pytorch_model.bin").is_file():
        raise FileNotFoundError(path)
    ElectraConfig.from_json_file(path / "config.json")


def _load_bundle(path: Path) -> None:
    from electra.onnx.export import load_bundle_metadata

    load_bundle_metadata(path)


def _pretrain(data_dir: Path, run_dir: Path, steps: int, fresh: bool, progress: bool) -> None:
    from electra.training.pretrain.trainer import PretrainConfig, pretrain

    resume = not fresh and (run_dir / "checkpoints").is_dir()
    result = pretrain(
        PretrainConfig(
            data=data_dir,
            out=run_dir,
            size=DEMO_SIZE,
            steps=steps,
            batch_size=DEMO_BATCH,
            lr=DEMO_LR,
            eval_every=max(1, steps // 4),
            checkpoint_every=max(1, steps // 4),
            keep_checkpoints=1,
            resume=resume,
            overwrite=not resume,
            device="cpu",
            progress=progress,
        )
    )
    if result["stopped"]:
        raise InputError(f"pre-training stopped at step {result['step']}; run `electra demo` again to resume")
    last = result.get("last") or {}
    if last:
        print(
            f"pre-trained {steps} steps: discriminator accuracy {last.get('disc_accuracy', 0):.3f} "
            f"(all-original baseline {last.get('all_original_accuracy', 0):.3f}), replaced-token recall "
            f"{last.get('disc_recall') or 0:.3f}",
            file=sys.stderr,
        )


def _serve(bundle: Path, host: str, port: int) -> int:
    try:
        from electra.serving.server import serve
        from electra.serving.settings import ModelSpec, ServeSettings
    except ImportError as e:
        raise InputError(
            f"serving needs the serve extra ({e.name} is missing): pip install -e '.[serve]'"
        ) from None

    shown = "localhost" if host in ("0.0.0.0", "::", "127.0.0.1") else host
    url = f"http://{shown}:{port}"
    body = json.dumps({"text": CURL_TEXT, "level": "word"})

    def ready() -> None:
        print(
            f"\nelectra demo is serving {url}  (Ctrl-C stops it)\n"
            f"  open {url}/ in a browser, or try:\n\n"
            f"  curl -s {url}/detect -H 'Content-Type: application/json' -d '{body}'\n\n"
            f"  API docs: {url}/schema   metrics: {url}/metrics\n",
            flush=True,
        )

    serve(ServeSettings(models=(ModelSpec(DEMO_MODEL_NAME, bundle),), host=host, port=port), on_ready=ready)
    return 0


def _valid(open_fn) -> bool:
    try:
        open_fn()
    except Exception:
        return False
    return True
