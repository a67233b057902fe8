"""`electra export`: a discriminator (with its generator, if given), classifier or tagger to a fused ONNX
bundle."""

from __future__ import annotations

import argparse
import inspect
import json
import logging
from collections import Counter
from pathlib import Path

from electra.bundle import POOLINGS, PRECISIONS
from electra.cli.common import model_path
from electra.errors import ElectraError, InputError
from electra.files import CONFIG_JSON, DISCRIMINATOR_DIR, EVAL_RESULTS_JSON, GENERATOR_DIR, MODEL_ONNX
from electra.hub import LOCAL_OR_HUB, REVISION_HELP
from electra.onnx.export import export_bundle
from electra.onnx.torchscript import MAX_OPSET, MIN_OPSET

# The defaults shown in --help and used when an option is left out: export_bundle's (one source).
DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(export_bundle).parameters.items()
    if p.default is not inspect.Parameter.empty
}

log = logging.getLogger("electra.cli")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a discriminator or classifier to an ONNX bundle with fused attention",
        description="TorchScript ONNX export of the explicit attention path, ONNX Runtime's transformer "
        "optimizer (fused Attention in every layer, or the export fails), fp16 / int8 on request, and a "
        "parity check against PyTorch on real text. The bundle (model.onnx, tokenizer, config.json, "
        "bundle.json) appears only when complete.",
    )
    p.add_argument(
        "--model",
        required=True,
        help="a discriminator (a pre-training run directory RUN, or RUN/discriminator), a fine-tuned "
        "classifier or tagger: " + LOCAL_OR_HUB,
    )
    p.add_argument("--revision", help=REVISION_HELP)
    p.add_argument(
        "--generator",
        help="with a discriminator: its generator (masked LM) too, so the server can suggest what a flagged "
        "token should be (/detect's suggest); a run directory RUN (its generator/), RUN/generator, a Hugging "
        "Face directory or Hub id (e.g. google/electra-small-generator)",
    )
    p.add_argument("--generator-revision", help="with a Hub id for --generator: " + REVISION_HELP)
    p.add_argument("--out", type=Path, required=True, help="bundle directory")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=DEFAULTS["precision"],
        help="fp32, fp16 (GPU serving) or int8 (dynamic quantisation, CPU serving) (default: %(default)s)",
    )
    p.add_argument(
        "--opset",
        type=int,
        default=DEFAULTS["opset"],
        help=f"ONNX opset, {MIN_OPSET}-{MAX_OPSET} (default: %(default)s)",
    )
    p.add_argument(
        "--max-seq-len",
        type=int,
        help="longest input the bundle accepts (default: the model's max_position_embeddings)",
    )
    p.add_argument(
        "--pooling",
        choices=POOLINGS,
        default=DEFAULTS["pooling"],
        help="how the server's /embed makes a sentence vector of the last hidden state: cls (the [CLS] "
        "token's, what ELECTRA's classifier head reads) or mean (over the real tokens) "
        "(default: %(default)s)",
    )
    p.add_argument("--task", help="classifier: GLUE task whose dev set measures accuracy vs PyTorch")
    p.add_argument("--data-dir", type=Path, help="classifier: GLUE data for --task")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists (default: refuse to)")
    p.set_defaults(handler=run_export)


def _dev_set(args: argparse.Namespace) -> tuple[list, list[int]] | None:
    """The dev set named on the command line, or the one the classifier was fine-tuned with (if at hand)."""
    from electra.training.finetune.tasks import TASKS, read_glue

    task, data_dir = args.task, args.data_dir
    results = args.model / EVAL_RESULTS_JSON
    if task is None and results.is_file():
        try:
            cfg = json.loads(results.read_text(encoding="utf-8"))["config"]
            task, data_dir = cfg.get("task"), cfg.get("data_dir") and Path(cfg["data_dir"])
        except (OSError, KeyError, TypeError, AttributeError, UnicodeDecodeError, json.JSONDecodeError):
            return None  # not the file fine-tuning writes: no dev set to measure on, as without one
        # Only a GLUE classifier has a dev set here (a tagger's F1 is `electra evaluate`'s, bundle or not).
        if task not in TASKS or data_dir is None or not data_dir.exists():
            return None
    if task is None:
        return None
    if data_dir is None:
        raise InputError("--task needs --data-dir (the GLUE directory)")
    from electra.config import ElectraConfig

    if task not in TASKS:
        raise InputError(f"--task {task!r} is not one of {', '.join(TASKS)}")
    spec = TASKS[task]
    if spec.labels is None:
        return None  # regression: no accuracy to compare
    cfg = ElectraConfig.from_json_file(args.model / CONFIG_JSON)
    label2id = cfg.label2id or {}
    examples = read_glue(spec, data_dir, spec.dev_splits[0])
    # A model saves the labels' names (negative/positive); one saved before that, the files' own ("0"/"1").
    names = dict(zip(spec.labels, spec.names or spec.labels, strict=True))
    ids = [label2id.get(names.get(str(e.label), ""), label2id.get(str(e.label))) for e in examples]
    if any(i is None for i in ids):
        raise InputError(f"{args.model} was not fine-tuned on {task}: its labels are {sorted(label2id)}")
    return [(e.text, e.text_pair) for e in examples], [int(i) for i in ids]


def run_export(args: argparse.Namespace) -> int:
    import importlib.util

    missing = [m for m in ("torch", "onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        raise ElectraError(
            f"electra export needs {', '.join(missing)}: install both extras with pip install 'electra[all]'"
        )
    from electra.onnx.fusion import fused_summary

    # A Hub id becomes its snapshot in the Hugging Face cache; the stage takes local directories only.
    args.model = _in_run(model_path(args.model, args.revision), DISCRIMINATOR_DIR)
    generator = None
    if args.generator is not None:
        generator = _in_run(model_path(args.generator, args.generator_revision, "--generator"), GENERATOR_DIR)
    elif args.generator_revision is not None:
        raise InputError("--generator-revision goes with --generator")
    dev_set = _dev_set(args)
    meta = export_bundle(
        args.model,
        args.out,
        precision=args.precision,
        opset=args.opset,
        max_seq_len=args.max_seq_len,
        overwrite=args.overwrite,
        dev_set=dev_set,
        generator_dir=generator,
        pooling=args.pooling,
    )
    size = (args.out / MODEL_ONNX).stat().st_size / 1e6
    fused = fused_summary(meta["fused_operators"])
    print(f"wrote {args.out}: {meta['kind']} {meta['precision']}, {size:.1f} MB; fused: {fused}")
    log.info("parity with PyTorch: %s", _parity_line(meta["parity"]))
    log.info("hidden-state parity with PyTorch: %s", _parity_line(meta["embedding"]["parity"]))
    if meta.get("dev_accuracy") and dev_set is not None:
        print(f"  {_dev_line(meta['dev_accuracy'], dev_set[1])}")
    if meta.get("generator"):
        gen = meta["generator"]
        size = (args.out / GENERATOR_DIR / MODEL_ONNX).stat().st_size / 1e6
        top1 = gen["parity"]["agreement"]
        print(f"  with its generator: {size:.1f} MB, top-1 agreement with PyTorch {top1:.3f}")
        log.info("generator parity with PyTorch: %s", _parity_line(gen["parity"]))
    return 0


def _dev_line(dev: dict, labels: list[int]) -> str:
    """The dev accuracy the export measured (bundle.json's dev_accuracy), beside the majority-class
    baseline: the accuracy of answering the dev set's most frequent label to everything."""
    majority = Counter(labels).most_common(1)[0][1] / len(labels)
    return (
        f"dev accuracy on {dev['examples']:,} examples: {dev['accuracy_onnx']:.4f} exported, "
        f"{dev['accuracy_pytorch']:.4f} PyTorch ({dev['drop_points']:.2f} points lost, predictions agree "
        f"{dev['prediction_agreement']:.1%}); majority-class baseline {majority:.4f}"
    )


def _parity_line(parity: dict) -> str:
    line = (
        f"{parity['texts']} texts on {parity['provider']}, largest difference {parity['max_abs_diff']:.1e}, "
        f"mean {parity['mean_abs_diff']:.1e}"
    )
    if parity.get("agreement") is not None:
        line += f", {parity['compared']} agreeing {parity['agreement']:.1%}"
    return line


def _in_run(path: Path, sub: str) -> Path:
    """A pre-training run directory (or a Hub repository uploaded from one) stands for its `sub` model."""
    return path / sub if (path / sub / CONFIG_JSON).is_file() else path
