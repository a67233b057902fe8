"""Each model's v2 tensors (its kind's, from the registry electra.serving.engine.kinds), told two ways: the
protocol's model metadata and Triton's model configuration (the `model_configuration` extension,
`GET /v2/models/{name}/config`).

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

from typing import TYPE_CHECKING, Any

from electra.serving.engine.kinds import EMBEDDER, SUGGESTION_OUTPUTS, Tensor, kind_of
from electra.serving.http.open_inference import ModelMetadata, TensorMetadata

if TYPE_CHECKING:
    from electra.serving.engine.runtime import ModelRunner
    from electra.serving.settings import ServeSettings

VERSION = "1"  # a bundle is one version of one model
PLATFORM = "electra-onnx"
# Wire datatype -> model_config.proto's DataType.
CONFIG_TYPES = {"BOOL": "TYPE_BOOL", "INT64": "TYPE_INT64", "FP32": "TYPE_FP32", "BYTES": "TYPE_STRING"}
__all__ = ["SUGGESTION_OUTPUTS", "VERSION", "classes", "config_of", "inputs", "metadata_of", "outputs"]


def inputs(runner: ModelRunner) -> list[Tensor]:
    """The model's v2 inputs: its kind's (electra.serving.engine.kinds)."""
    return list(kind_of(runner.kind).v2_inputs)


def outputs(runner: ModelRunner) -> list[Tensor]:
    """The model's v2 outputs: its kind's, for this model (its labels, its generator), and the embedder's
    `embeddings` when its bundle answers its hidden state (asked for in a request of their own)."""
    own = kind_of(runner.kind).v2_outputs(runner)
    if runner.bundle.embedding is None:
        return own
    names = {t.name for t in own}
    return own + [t for t in kind_of(EMBEDDER).v2_outputs(runner) if t.name not in names]


def classes(runner: ModelRunner) -> dict[str, list[str] | None]:
    """The outputs Triton's classification extension may return as top classes, with their labels: a
    classifier's probabilities. Per-token scores are not classes (their rows are padded past each text)."""
    return kind_of(runner.kind).v2_classes(runner)


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
