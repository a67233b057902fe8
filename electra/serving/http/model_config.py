"""What each model's v2 tensors are, told two ways: the protocol's model metadata and Triton's model
configuration (the `model_configuration` extension, `GET /v2/models/{name}/config`).

Every tensor is batch-first: n texts in, n rows out. The configuration says so as Triton does, with
`max_batch_size` (the server's --max-texts) and each tensor's `dims` after the batch dimension; the metadata
gives the whole shape, -1 for the batch. Triton's perf_analyzer, which sizes its requests from these, reads
`max_batch_size` and `optional` from the configuration and the shapes from the metadata, skipping the first
dimension when max_batch_size > 0, so the two must agree. A text is one element of its
row: inputs are [n, 1], as Triton declares a scalar per batch item (`dims: [1]` with `reshape: {shape: []}`,
since perf_analyzer sends nothing for an empty shape); [n] is read the same. Specification:
triton-inference-server/server `docs/protocol/extension_model_configuration.md`, the message `ModelConfig`
of `model_config.proto`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from electra.serving.http.open_inference import ModelMetadata, TensorMetadata

if TYPE_CHECKING:
    from electra.serving.engine.runtime import ModelRunner
    from electra.serving.settings import ServeSettings

VERSION = "1"  # a bundle is one version of one model
PLATFORM = "electra-onnx"
# Wire datatype -> model_config.proto's DataType.
CONFIG_TYPES = {"BOOL": "TYPE_BOOL", "INT64": "TYPE_INT64", "FP32": "TYPE_FP32", "BYTES": "TYPE_STRING"}
TOKENS = -1  # a per-token dimension: as long as the longest text of the request


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str
    dims: tuple[int, ...]  # after the batch dimension
    optional: bool = False
    reshape: tuple[int, ...] | None = None  # the shape the model reads, when not dims


def _per_token(name: str, datatype: str) -> Tensor:
    return Tensor(name, datatype, (TOKENS,))


def _per_text(name: str, datatype: str) -> Tensor:
    return Tensor(name, datatype, ())


_OFFSETS = [_per_token("starts", "INT64"), _per_token("ends", "INT64"), _per_token("tokens", "BYTES")]
_PER_TEXT = [_per_text("lengths", "INT64"), _per_text("windows", "INT64"), _per_text("truncated", "BOOL")]
DETECTOR_OUTPUTS = [_per_token("scores", "FP32"), _per_token("replaced", "BOOL"), *_OFFSETS, *_PER_TEXT]
SUGGESTIONS = -1  # a per-suggestion dimension: the request's `suggest`


def _per_suggestion(name: str, datatype: str) -> Tensor:
    return Tensor(name, datatype, (TOKENS, SUGGESTIONS))


# A detector with a generator, answered when the request sends `suggest` (electra.serving.http.protocols).
SUGGESTION_OUTPUTS = [
    _per_suggestion("suggestions", "BYTES"),
    _per_suggestion("suggestion_scores", "FP32"),
    _per_suggestion("suggestion_texts", "BYTES"),
    _per_suggestion("suggestion_starts", "INT64"),
    _per_suggestion("suggestion_ends", "INT64"),
    _per_text("suggested_text", "BYTES"),
]
TAGGER_OUTPUTS = [_per_token("labels", "BYTES"), _per_token("scores", "FP32"), *_OFFSETS, *_PER_TEXT]


def inputs(runner: ModelRunner) -> list[Tensor]:
    texts = [Tensor("text", "BYTES", (1,), reshape=())]
    if runner.kind == "classifier":
        texts.append(Tensor("text_pair", "BYTES", (1,), optional=True, reshape=()))
    return texts


def outputs(runner: ModelRunner) -> list[Tensor]:
    if runner.kind == "discriminator":
        return DETECTOR_OUTPUTS + (SUGGESTION_OUTPUTS if runner.generator is not None else [])
    if runner.kind == "tagger":
        return TAGGER_OUTPUTS
    if runner.regression:
        return [_per_text("score", "FP32"), _per_text("truncated", "BOOL")]
    return [
        Tensor("probabilities", "FP32", (len(runner.labels),)),
        _per_text("label", "BYTES"),
        _per_text("truncated", "BOOL"),
    ]


def classes(runner: ModelRunner) -> dict[str, list[str] | None]:
    """The outputs Triton's classification extension may return as top classes, with their labels: a
    classifier's probabilities. Per-token scores are not classes (their rows are padded past each text)."""
    if runner.kind == "classifier" and not runner.regression:
        return {"probabilities": list(runner.labels)}
    return {}


def metadata_of(runner: ModelRunner) -> ModelMetadata:
    def shaped(tensors: list[Tensor]) -> list[TensorMetadata]:
        return [TensorMetadata(t.name, t.datatype, [-1, *t.dims]) for t in tensors]

    return ModelMetadata(runner.name, [VERSION], PLATFORM, shaped(inputs(runner)), shaped(outputs(runner)))


def config_of(runner: ModelRunner, settings: ServeSettings) -> dict[str, Any]:
    """Triton's ModelConfig of `runner` as JSON (proto field names, as Triton's HTTP endpoint answers)."""

    def tensor(t: Tensor, is_input: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"name": t.name, "data_type": CONFIG_TYPES[t.datatype], "dims": list(t.dims)}
        if t.reshape is not None:
            out["reshape"] = {"shape": list(t.reshape)}
        if is_input:
            out["optional"] = t.optional
        return out

    gpu = settings.device == "cuda"
    return {
        "name": runner.name,
        "platform": PLATFORM,
        "max_batch_size": settings.max_texts,
        "input": [tensor(t, True) for t in inputs(runner)],
        "output": [tensor(t, False) for t in outputs(runner)],
        # Requests are batched together server-side (engine.batcher), waiting at most this long.
        "dynamic_batching": {"max_queue_delay_microseconds": round(settings.max_wait_ms * 1000)},
        "instance_group": [{"name": runner.name, "kind": "KIND_GPU" if gpu else "KIND_CPU", "count": 1}],
        "model_transaction_policy": {"decoupled": False},
        "version_policy": {"specific": {"versions": [int(VERSION)]}},
    }
