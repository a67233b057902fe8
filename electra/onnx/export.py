"""Export a discriminator, classifier or tagger to a self-contained, fused ONNX bundle, and prove it still
agrees; a discriminator may take its generator along (generator/model.onnx, exported, fused, converted and
checked the same way).

The path, chosen because it is the one ONNX Runtime's transformer optimizer recognises for our graph:

1. electra.onnx.torchscript: `torch.onnx.export(..., dynamo=False)` of the model on its "math" attention path;
2. electra.onnx.fusion: ORT's transformer optimizer fuses every layer's attention, or the export fails;
3. electra.onnx.precision: fp16 or int8 from the fused graph;
4. electra.onnx.parity: the graph against the PyTorch model on real, padded text (and a classifier's dev set);

then the bundle directory (model.onnx, tokenizer, HF config.json, bundle.json: electra.bundle) is moved into
place atomically.
"""

from __future__ import annotations

import logging
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from electra.atomic import atomic_dir
from electra.bundle import (
    Bundle,
    DevAccuracy,
    Embedding,
    ExportSettings,
    Generator,
    Parity,
    Pooling,
    Precision,
    Source,
    Versions,
    write_bundle,
)
from electra.digest import file_sha256
from electra.errors import InputError
from electra.files import CONFIG_JSON, GENERATOR_DIR, MODEL_ONNX
from electra.onnx.fusion import (
    ATTENTION_MASK_FORMAT,
    OPT_LEVEL,
    OPTIMIZER,
    OPTIMIZER_MODEL_TYPE,
    USE_GPU,
    check_attention_fused,
    count_fused_operators,
    fused_operator_counts,
    fused_summary,
    optimize,
)
from electra.onnx.parity import (
    DEFAULT_PARITY_TEXTS,
    DevSet,
    check_parity,
    cpu_session,
    dev_accuracy,
    measure_generator_parity,
    measure_hidden_parity,
    measure_parity,
)
from electra.onnx.precision import quantization, write_precision
from electra.onnx.source import (
    SourceModel,
    bundle_config_text,
    check_arguments,
    check_dev_set,
    check_max_seq_len,
    check_pooling,
    load_generator,
    load_source,
)
from electra.onnx.torchscript import ATTENTION_IMPL, EXPORTER, export_torchscript

log = logging.getLogger("electra.export")


def export_bundle(
    model_dir: Path,
    out: Path,
    precision: Precision = "fp32",
    opset: int = 17,
    max_seq_len: int | None = None,
    overwrite: bool = False,
    parity_texts: list[str] | None = None,
    dev_set: DevSet | None = None,
    generator_dir: Path | None = None,
    pooling: Pooling = "cls",
) -> dict[str, Any]:
    """Export `model_dir` (a discriminator, classifier or tagger directory with its tokenizer) to a bundle at
    `out`; with `generator_dir`, a discriminator's generator goes into the same bundle (generator/).

    Returns the bundle.json content. Raises InputError for unusable input and ElectraError when the export
    itself fails (attention not fused, fp32 parity above 1e-4); in both cases nothing is left at `out`.
    parity_texts: texts for the parity batch (default: DEFAULT_PARITY_TEXTS, singles and pairs).
    dev_set: (examples, gold labels) for a classifier: accuracy of PyTorch vs the exported model is stored.
    pooling: how the server makes a sentence vector of the graph's last hidden state (bundle.json's
    `embedding`): "cls", the [CLS] position's (what ELECTRA's classifier head reads), or "mean" over the real
    tokens.
    """
    model_dir, out = Path(model_dir), Path(out)
    # Everything cheap is checked before loading anything, so a typo fails in milliseconds.
    check_arguments(model_dir, out, precision, opset, overwrite, parity_texts)
    check_pooling(pooling)
    if generator_dir is not None and Path(generator_dir).resolve() == out.resolve():
        raise InputError(f"{out} is the generator directory itself; choose another output directory")
    source = load_source(model_dir)
    seq_len = check_max_seq_len(max_seq_len, source.config)
    generator = None if generator_dir is None else load_generator(Path(generator_dir), source, seq_len)
    texts = list(DEFAULT_PARITY_TEXTS) if parity_texts is None else [(t, None) for t in parity_texts]
    if dev_set is not None:
        check_dev_set(dev_set, source.model)

    with atomic_dir(out, overwrite) as tmp, tempfile.TemporaryDirectory(prefix="electra-onnx-") as work:
        model_path = tmp / MODEL_ONNX
        counts = _build_graph(source, precision, opset, Path(work), model_path)
        session = cpu_session(model_path)
        compared = (source.model, session, source.tokenizer)
        parity = measure_parity(*compared, texts, seq_len, precision)
        check_parity(parity, precision, model_dir)
        hidden = measure_hidden_parity(*compared, texts, seq_len, precision)
        check_parity(hidden, precision, model_dir, "hidden states")
        embedding = Embedding(pooling=pooling, dimensions=source.config.hidden_size, parity=hidden)
        dev = dev_accuracy(*compared, dev_set, seq_len, precision) if dev_set else None
        described = None
        if generator is not None:
            (tmp / GENERATOR_DIR).mkdir()
            described = _export_generator(generator, precision, opset, seq_len, texts, Path(work), tmp)
        bundle = _describe(source, precision, opset, seq_len, counts, parity, dev, described, embedding)
        _write_files(tmp, source, bundle, generator)
    log.info(
        "exported %s (%s, %s) to %s; fused: %s", model_dir, bundle.kind, precision, out, fused_summary(counts)
    )
    if generator is not None and described is not None:
        log.info(
            "with the generator %s; fused: %s", generator.model_dir, fused_summary(described.fused_operators)
        )
    return bundle.to_dict()


def _export_generator(
    generator: SourceModel,
    precision: Precision,
    opset: int,
    seq_len: int,
    texts: list[tuple[str, str | None]],
    work: Path,
    bundle_dir: Path,
) -> Generator:
    """generator/model.onnx in the (temporary) bundle directory, fused, at `precision` and checked against
    PyTorch (fp32: within the discriminator's tolerance, or the export fails)."""
    work = work / GENERATOR_DIR
    work.mkdir()
    model_path = bundle_dir / GENERATOR_DIR / MODEL_ONNX
    counts = _build_graph(generator, precision, opset, work, model_path)
    session = cpu_session(model_path)
    model, tokenizer = generator.model, generator.tokenizer
    parity = measure_generator_parity(model, session, tokenizer, texts, seq_len, precision)
    check_parity(parity, precision, generator.model_dir)
    cfg = generator.config
    return Generator(
        vocab_size=cfg.vocab_size,
        num_hidden_layers=cfg.num_hidden_layers,
        hidden_size=cfg.hidden_size,
        num_attention_heads=cfg.num_attention_heads,
        fused_operators=counts,
        parity=parity,
        source=_source(generator),
    )


def _build_graph(
    source: SourceModel, precision: Precision, opset: int, work_dir: Path, model_path: Path
) -> dict[str, int]:
    """model.onnx: exported, fused and at `precision`, checked fused after each step; its operator counts."""
    raw_path = work_dir / "exported.onnx"
    layers = source.config.num_hidden_layers
    export_torchscript(source.model, raw_path, opset)
    fused = optimize(raw_path, source.config)
    check_attention_fused(fused_operator_counts(fused), layers, "after optimize_model", source.model_dir)
    write_precision(fused, precision, work_dir, model_path)
    counts = count_fused_operators(model_path)
    check_attention_fused(counts, layers, f"in the {precision} model", source.model_dir)
    return counts


def _describe(
    source: SourceModel,
    precision: Precision,
    opset: int,
    seq_len: int,
    counts: dict[str, int],
    parity: Parity,
    dev: DevAccuracy | None,
    generator: Generator | None = None,
    embedding: Embedding | None = None,
) -> Bundle:
    import onnx
    import onnxruntime
    import torch

    model, cfg = source.model, source.config
    classifier = model.kind == "classifier"
    labelled = model.kind in ("classifier", "tagger")
    return Bundle(
        kind=model.kind,
        labels={str(i): label for i, label in sorted((cfg.id2label or {}).items())} if labelled else None,
        problem_type=cfg.problem_type if classifier else None,
        label_thresholds=cfg.label_thresholds if classifier else None,
        max_seq_len=seq_len,
        precision=precision,
        opset=opset,
        type_vocab_size=cfg.type_vocab_size,
        num_hidden_layers=cfg.num_hidden_layers,
        hidden_size=cfg.hidden_size,
        num_attention_heads=cfg.num_attention_heads,
        fused_operators=counts,
        export=ExportSettings(
            exporter=EXPORTER,
            attention_impl=ATTENTION_IMPL,
            optimizer=OPTIMIZER,
            model_type=OPTIMIZER_MODEL_TYPE,
            opt_level=OPT_LEVEL,
            use_gpu=USE_GPU,
            attention_mask_format=ATTENTION_MASK_FORMAT,
            quantization=quantization(precision),
        ),
        parity=parity,
        dev_accuracy=dev,
        generator=generator,
        embedding=embedding,
        source=_source(source),
        versions=Versions(
            onnxruntime=str(onnxruntime.__version__), torch=str(torch.__version__), onnx=str(onnx.__version__)
        ),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _source(source: SourceModel) -> Source:
    return Source(
        model_dir=str(source.model_dir),
        weights_file=source.weights_file.name,
        sha256=file_sha256(source.weights_file),
    )


def _write_files(
    bundle_dir: Path, source: SourceModel, bundle: Bundle, generator: SourceModel | None
) -> None:
    """Everything but the graphs into the (temporary, atomically moved) bundle directory."""
    from electra.tokenizer import tokenizer_files

    for name, data in tokenizer_files(source.tokenizer).items():
        (bundle_dir / name).write_bytes(data)
    (bundle_dir / CONFIG_JSON).write_text(bundle_config_text(source.config_text), encoding="utf-8")
    if generator is not None:
        (bundle_dir / GENERATOR_DIR / CONFIG_JSON).write_text(generator.config_text, encoding="utf-8")
    write_bundle(bundle_dir, bundle)
