"""Step 4 of an export: the exported graph against the PyTorch model it came from.

Both run on the CPU (ORT's CPU provider; the model as loaded, fp32) on the right-padded batches the server
builds: a parity batch of real text of mixed lengths (fp32 must agree within FP32_TOLERANCE or the export
fails), and for a classifier the accuracy of both on its GLUE dev set. An encoder's last hidden state (what
the server pools into sentence vectors) is compared on the same batch at every real token, within the same
tolerance. A generator is compared on the same batch with every fourth real token masked, at those
positions. A tagger's entity F1 on its dev set
is `electra evaluate`'s, on the PyTorch model and on a bundle alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from electra.bundle import (
    HIDDEN_OUTPUT,
    INPUT_NAMES,
    MASKED_POSITIONS,
    OUTPUT_NAME,
    DevAccuracy,
    Parity,
    Precision,
)
from electra.errors import ElectraError
from electra.onnx import one_line

if TYPE_CHECKING:
    import numpy as np
    import tokenizers

    from electra.config import ElectraConfig
    from electra.model import ElectraHeadModel

log = logging.getLogger(__name__)

# A text and its optional pair (the second segment).
TextPair = tuple[str, str | None]
# Examples and their gold label ids.
DevSet = tuple[list[TextPair], list[int]]

FP32_TOLERANCE = 1e-4
PROVIDER = "CPUExecutionProvider"
DEV_BATCH_SIZE = 32
GENERATOR_MASK_EVERY = 4
INT8_ACCURACY_DROP_TARGET = 1.0  # points

# Mixed lengths (one word to ~40 tokens), single texts and pairs, punctuation, numbers and casing: what the
# parity batch needs to exercise padding, token types and truncation-free long rows.
DEFAULT_PARITY_TEXTS: tuple[TextPair, ...] = (
    ("Hi.", None),
    ("The quick brown fox jumps over the lazy dog.", None),
    ("Is this a question?", "Yes, and this is its answer."),
    ("ELECTRA trains a discriminator to detect replaced tokens instead of predicting masked ones.", None),
    ("I loved this movie; the acting was superb and the story kept me hooked until the very end.", None),
    ("Terrible service. We waited an hour and the food was cold.", None),
    ("A man is playing a guitar on stage.", "Someone is performing music."),
    ("Prices rose 3.5% in March, the fastest increase since 2019, according to official figures.", None),
    ("Why?", None),
    ("The cat sat on the mat.", "The dog slept on the rug."),
    ("Colourless green ideas sleep furiously.", None),
    ("Please send the report by Friday, or call me if anything is unclear.", None),
    (
        "Where was the treaty signed?",
        "The treaty was signed in Paris in 1783 after years of negotiation between the delegations.",
    ),
    ("It's not bad at all - actually, it's rather good!", None),
    (
        "The committee, having considered all of the evidence presented over the course of three long days "
        "of hearings, concluded that no further action was required at this time.",
        None,
    ),
    ("Book a table for two at eight tonight.", "Reserve dinner for a pair this evening."),
)

# What `agreement` compares, by prediction kind.
_COMPARED = {
    "discriminator": "replaced flags (logit > 0) over real tokens",
    "tagger": "argmax label of every real token",
    "single_label": "argmax label",
    "multi_label": "labels with logit > 0",
    "regression": "none (regression)",
    "generator": f"top-1 token at the masked positions (every {GENERATOR_MASK_EVERY}th real token masked)",
    "hidden": f"{HIDDEN_OUTPUT} at every real token; agreement: [CLS] vectors with cosine similarity > 0.999",
}
# Two [CLS] vectors agree when they point the same way this closely (fp16 and int8 keep well above it).
HIDDEN_AGREEMENT_COSINE = 0.999


def cpu_session(path: Path) -> Any:
    """An ORT session on the CPU provider, taking no more threads than torch is allowed."""
    import onnxruntime
    import torch

    options = onnxruntime.SessionOptions()
    # ORT ignores OMP_NUM_THREADS; follow torch's thread budget so an export takes no more cores than asked.
    options.intra_op_num_threads = torch.get_num_threads()
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=[PROVIDER])
    except Exception as e:
        raise ElectraError(f"onnxruntime cannot load the exported {path.name}: {one_line(e)}") from e


def encode_batch(
    tokenizer: tokenizers.Tokenizer, examples: Sequence[TextPair], max_seq_len: int, pair_types: bool = True
) -> dict[str, np.ndarray]:
    """Right-padded int64 model inputs for `examples`, truncated to max_seq_len (the server's encoding)."""
    import tokenizers as tk

    from electra.padding import pad_rows
    from electra.tokenizer import special_ids

    # Truncation is per call: set it on a copy, never on the caller's tokenizer.
    tok = tk.Tokenizer.from_str(tokenizer.to_str())
    tok.no_padding()
    tok.enable_truncation(max_length=max_seq_len)
    inputs = [a if b is None else (a, b) for a, b in examples]
    if not pair_types:
        # A model with one token type cannot embed segment 1: feed pairs as one joined text instead.
        inputs = [a if b is None else f"{a} {b}" for a, b in examples]
    encodings = tok.encode_batch(inputs)
    return pad_rows([e.ids for e in encodings], [e.type_ids for e in encodings], special_ids(tok).pad)


def prediction_kind(cfg: ElectraConfig) -> str:
    """A classifier's predictions: single_label (argmax), multi_label (logit > 0) or regression."""
    if cfg.problem_type == "regression" or cfg.num_labels == 1:
        return "regression"
    if cfg.problem_type == "multi_label_classification":
        return "multi_label"
    return "single_label"


def measure_parity(
    model: ElectraHeadModel,
    session: Any,
    tokenizer: tokenizers.Tokenizer,
    texts: Sequence[TextPair],
    max_seq_len: int,
    precision: Precision,
) -> Parity:
    """Logit differences and prediction agreement on one padded batch of `texts`.

    ElectraError when the shapes differ or the exported graph's logits are not finite: the export is broken.
    """

    batch = encode_batch(tokenizer, texts, max_seq_len, pair_types=model.config.type_vocab_size > 1)
    reference, exported = _run_both(model, session, batch)
    _check_outputs(reference, exported, precision, "logits")
    if model.kind in ("discriminator", "tagger"):
        # Positions past a row's length are padding: their logits are never read, so they are not compared.
        real = batch["attention_mask"].astype(bool)
        reference, exported = reference[real], exported[real]
        kind = model.kind
    else:
        kind = prediction_kind(model.config)
    ref_pred, onnx_pred = _predictions(kind, reference), _predictions(kind, exported)
    agreement = None if ref_pred is None else float((ref_pred == onnx_pred).mean())
    return _parity(texts, batch, reference, exported, agreement, kind, precision)


def measure_generator_parity(
    model: ElectraHeadModel,
    session: Any,
    tokenizer: tokenizers.Tokenizer,
    texts: Sequence[TextPair],
    max_seq_len: int,
    precision: Precision,
) -> Parity:
    """A generator's logits at masked positions, PyTorch against the exported graph, on the parity batch with
    every GENERATOR_MASK_EVERY-th real token (a different phase per row) replaced by [MASK].

    ElectraError when the shapes differ or the exported graph's logits are not finite.
    """
    import numpy as np
    import torch

    from electra.tokenizer import special_ids

    batch = encode_batch(tokenizer, texts, max_seq_len, pair_types=model.config.type_vocab_size > 1)
    ids = batch["input_ids"]
    specials = special_ids(tokenizer)
    real = (batch["attention_mask"] == 1) & ~np.isin(ids, [specials.cls, specials.sep, specials.pad])
    rows, cols = np.nonzero(real)
    every = GENERATOR_MASK_EVERY
    chosen = np.concatenate(
        [np.flatnonzero(rows == r)[r % every :: every] for r in range(ids.shape[0])]
    ).astype(np.int64)
    ids[rows[chosen], cols[chosen]] = specials.mask
    flat = (rows[chosen] * ids.shape[1] + cols[chosen]).astype(np.int64)
    with torch.no_grad():
        tensors = [torch.from_numpy(batch[name]) for name in INPUT_NAMES]
        reference = model(*tensors, masked_positions=torch.from_numpy(flat)).float().numpy()
    feeds = {**{name: batch[name] for name in INPUT_NAMES}, MASKED_POSITIONS: flat}
    exported = session.run([OUTPUT_NAME], feeds)[0]
    _check_outputs(reference, exported, precision, "generator logits")
    agreement = float((reference.argmax(-1) == exported.argmax(-1)).mean())
    return _parity(texts, batch, reference, exported, agreement, "generator", precision)


def measure_hidden_parity(
    model: ElectraHeadModel,
    session: Any,
    tokenizer: tokenizers.Tokenizer,
    texts: Sequence[TextPair],
    max_seq_len: int,
    precision: Precision,
) -> Parity:
    """The last hidden state (HIDDEN_OUTPUT) at real tokens, PyTorch's backbone against the exported graph's,
    on the parity batch; agreement: the share of rows whose [CLS] vectors point the same way.

    ElectraError when the shapes differ or the graph's hidden state is not finite."""
    import numpy as np
    import torch

    from electra.onnx.torchscript import with_hidden_state

    batch = encode_batch(tokenizer, texts, max_seq_len, pair_types=model.config.type_vocab_size > 1)
    with torch.no_grad():
        _, hidden = with_hidden_state(model)(*(torch.from_numpy(batch[name]) for name in INPUT_NAMES))
    reference = hidden.float().numpy()
    exported = session.run([HIDDEN_OUTPUT], {name: batch[name] for name in INPUT_NAMES})[0]
    _check_outputs(reference, exported, precision, "hidden state")
    a, b = reference[:, 0], exported[:, 0]
    cosine = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    # Positions past a row's length are padding, never pooled: not compared.
    real = batch["attention_mask"].astype(bool)
    reference, exported = reference[real], exported[real]
    agreement = float((cosine > HIDDEN_AGREEMENT_COSINE).mean())
    return _parity(texts, batch, reference, exported, agreement, "hidden", precision)


def _check_outputs(reference: Any, exported: Any, precision: Precision, what: str) -> None:
    """ElectraError when the exported graph's `what` (logits, generator logits, hidden state) have another
    shape than PyTorch's or are not finite."""
    import numpy as np

    if reference.shape != exported.shape:
        raise ElectraError(
            f"ONNX {what} are {exported.shape}, PyTorch's {reference.shape}; the export is broken"
        )
    if not np.isfinite(exported).all():
        raise ElectraError(
            f"the {precision} ONNX model produced non-finite {what} on the parity batch; it is unusable"
        )


def _parity(
    texts: Sequence[TextPair],
    batch: dict[str, Any],
    reference: Any,
    exported: Any,
    agreement: float | None,
    compared: str,
    precision: Precision,
) -> Parity:
    """The record of one comparison: `reference` and `exported` are the values compared (already cut to the
    positions that count), `batch` the padded parity batch they came from."""
    import numpy as np

    diff = np.abs(reference - exported)
    return Parity(
        texts=len(texts),
        batch_shape=list(batch["input_ids"].shape),
        real_tokens=int(batch["attention_mask"].sum()),
        max_abs_diff=float(diff.max()),
        mean_abs_diff=float(diff.mean()),
        agreement=agreement,
        compared=_COMPARED[compared],
        tolerance=FP32_TOLERANCE if precision == "fp32" else None,
        provider=PROVIDER,
    )


def check_parity(parity: Parity, precision: Precision, model_dir: Path, what: str = "logits") -> None:
    """ElectraError when an fp32 export's `what` (its logits, or its hidden state) are FP32_TOLERANCE or more
    off PyTorch's."""
    if precision == "fp32" and not parity.max_abs_diff < FP32_TOLERANCE:
        raise ElectraError(
            f"{model_dir}: fp32 ONNX {what} differ from PyTorch by {parity.max_abs_diff:.3g} "
            f"(limit {FP32_TOLERANCE:g}) on the parity batch; the export is wrong, not exported"
        )


def dev_accuracy(
    model: ElectraHeadModel,
    session: Any,
    tokenizer: tokenizers.Tokenizer,
    dev_set: DevSet,
    max_seq_len: int,
    precision: Precision,
) -> DevAccuracy:
    """Accuracy of PyTorch and of the exported graph on a single-label classifier's dev set."""
    import numpy as np

    examples, labels = dev_set
    gold = np.asarray(labels)
    torch_pred, onnx_pred = [], []
    for start in range(0, len(examples), DEV_BATCH_SIZE):
        chunk = examples[start : start + DEV_BATCH_SIZE]
        batch = encode_batch(tokenizer, chunk, max_seq_len, pair_types=model.config.type_vocab_size > 1)
        reference, exported = _run_both(model, session, batch)
        torch_pred.append(reference.argmax(-1))
        onnx_pred.append(exported.argmax(-1))
    acc_torch = float((np.concatenate(torch_pred) == gold).mean())
    acc_onnx = float((np.concatenate(onnx_pred) == gold).mean())
    drop = 100.0 * (acc_torch - acc_onnx)
    if precision == "int8" and drop > INT8_ACCURACY_DROP_TARGET:
        log.warning(
            "int8 export loses %.2f accuracy points on the dev set (target <= %.1f)",
            drop,
            INT8_ACCURACY_DROP_TARGET,
        )
    return DevAccuracy(
        examples=len(examples),
        accuracy_pytorch=acc_torch,
        accuracy_onnx=acc_onnx,
        drop_points=drop,
        prediction_agreement=float((np.concatenate(torch_pred) == np.concatenate(onnx_pred)).mean()),
    )


def _run_both(model: ElectraHeadModel, session: Any, batch: dict[str, np.ndarray]) -> tuple[Any, Any]:
    import torch

    with torch.no_grad():
        reference = model(*(torch.from_numpy(batch[name]) for name in INPUT_NAMES)).float().numpy()
    onnx_logits = session.run([OUTPUT_NAME], {name: batch[name] for name in INPUT_NAMES})[0]
    return reference, onnx_logits


def _predictions(kind: str, logits: np.ndarray) -> np.ndarray | None:
    if kind in ("single_label", "tagger"):
        return logits.argmax(-1)
    if kind in ("multi_label", "discriminator"):
        return logits > 0
    return None
