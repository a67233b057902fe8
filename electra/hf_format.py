"""Read and write the standard Hugging Face model directory: config.json + model.safetensors.

A directory written by `save_hf_dir` loads with transformers' `ElectraForPreTraining` / `ElectraForMaskedLM` /
`ElectraForSequenceClassification.from_pretrained` (a classifier with the "hf" head) with no missing or
unexpected weights, and `load_hf_dir`
reads what transformers' `save_pretrained` writes (model.safetensors, or a legacy pytorch_model.bin).

Tied weights: like transformers, the generator's output weight (`generator_lm_head.weight`, the same Parameter
as `electra.embeddings.word_embeddings.weight`) is not written; transformers re-ties it on load and so do we.
safetensors also refuses to store two names for one tensor, so omitting it is the only faithful option.

Classifier heads: config.json's "classifier_head" says which head a classifier has ("hf" or "linear", see
electra.model.ElectraClassifier); a file without it (transformers', or ours before the key existed) has the
"hf" head. transformers ignores the key. A "linear" directory also holds transformers' remote code for its
head (electra/modeling_electra_linear.py), named in config.json's auto_map, so transformers' Auto classes
and pipelines load it with trust_remote_code=True; without it, transformers' own
ElectraForSequenceClassification refuses the directory (a size mismatch on classifier.dense), never loading it
with a random head.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from electra.atomic import atomic_dir
from electra.config import ARCHITECTURES, ElectraConfig, parameters_at_least
from electra.errors import InputError
from electra.files import CONFIG_JSON, LINEAR_HEAD_CODE, MODEL_SAFETENSORS, PYTORCH_MODEL_BIN
from electra.linear_head import LINEAR_HEAD_AUTO_MAP, LINEAR_MODEL_TYPE
from electra.model import (
    CLASSIFIER_HEADS,
    ClassifierHead,
    ElectraClassifier,
    ElectraGenerator,
    ElectraHeadModel,
    Kind,
    build_model,
)

log = logging.getLogger(__name__)

TIED_KEY = "generator_lm_head.weight"
WORD_EMBEDDINGS_KEY = "electra.embeddings.word_embeddings.weight"
# Index buffers that older transformers releases stored with the weights.
BUFFER_KEYS = ("electra.embeddings.position_ids", "electra.embeddings.token_type_ids")
BACKBONE_PREFIX = "electra."
CLASSIFIER_HEAD_KEY = "classifier_head"
CLASSIFIER_PREFIX = "classifier."


@dataclass
class LoadReport:
    """What load_hf_dir did besides copying weights one for one.

    newly_initialized: model keys absent from the checkpoint (or, with config overrides, of a different head
        shape), left at their fresh HF-style init -- e.g. the classifier head when fine-tuning from a
        pre-trained discriminator. Only head keys can be here; a missing backbone weight is an error.
    unused: checkpoint keys the model has no place for (another head's weights).
    """

    kind: Kind
    source_architecture: str | None
    weights_file: Path
    newly_initialized: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)


def save_hf_dir(
    model: ElectraHeadModel,
    out_dir: str | Path,
    overwrite: bool = False,
    extra_files: dict[str, bytes] | None = None,
) -> Path:
    """Write config.json + model.safetensors (+ extra_files, e.g. tokenizer.json) as one atomic directory."""
    out = Path(out_dir)
    extra_files = extra_files or {}
    for name in extra_files:
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or name in (CONFIG_JSON, MODEL_SAFETENSORS):
            raise InputError(
                f"extra file name {name!r} must be a relative path inside {out}, not a model file"
            )
    state = model.state_dict()
    if isinstance(model, ElectraGenerator):
        state.pop(TIED_KEY)
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    dtype = next((v.dtype for v in tensors.values() if v.is_floating_point()), torch.float32)
    config = model.config.to_hf_dict(model.hf_architecture, dtype=str(dtype).removeprefix("torch."))
    if isinstance(model, ElectraClassifier):
        config[CLASSIFIER_HEAD_KEY] = model.head
        if model.head == "linear":
            config["auto_map"] = LINEAR_HEAD_AUTO_MAP
            config["model_type"] = LINEAR_MODEL_TYPE
            extra_files = {
                **extra_files,
                LINEAR_HEAD_CODE: Path(__file__).with_name(LINEAR_HEAD_CODE).read_bytes(),
            }
    with atomic_dir(out, overwrite) as tmp:
        (tmp / CONFIG_JSON).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        # transformers refuses a safetensors file whose metadata lacks format=pt.
        save_file(tensors, str(tmp / MODEL_SAFETENSORS), metadata={"format": "pt"})
        for name, data in extra_files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_bytes(data)
    return out


def load_hf_dir(
    path: str | Path, kind: Kind | None = None, head: ClassifierHead | None = None, **config_overrides: Any
) -> ElectraHeadModel:
    """Our model from a Hugging Face ELECTRA directory, in eval mode (as from_pretrained), fp32 parameters.

    kind: "discriminator" | "generator" | "classifier" | "tagger"; None infers it from config.json's
    `architectures`.
    head: a classifier's head, "hf" or "linear"; None takes config.json's "classifier_head" ("hf" without
    it). A head other than the file's is freshly initialised, like one whose shape the overrides change.
    config_overrides: ElectraConfig fields to change (e.g. num_labels=3, attn_impl="math"); a head whose
    shape they change is freshly initialised instead of loaded.
    Keys left at their fresh init are logged (warning); load_hf_dir_with_report returns them.
    """
    return load_hf_dir_with_report(path, kind, head, **config_overrides)[0]


def load_hf_dir_with_report(
    path: str | Path, kind: Kind | None = None, head: ClassifierHead | None = None, **config_overrides: Any
) -> tuple[ElectraHeadModel, LoadReport]:
    """load_hf_dir, also returning which keys were newly initialised and which were unused."""
    path = Path(path)
    cfg, kind, source_arch, file_head = _read_config(path, kind, config_overrides)
    weights_file, state = _read_weights(path)
    _check_size(cfg, state, weights_file)
    model = build_model(kind, cfg, head=head or file_head)
    report = LoadReport(kind=kind, source_architecture=source_arch, weights_file=weights_file)
    state = _normalize_keys(state)
    other_head = kind == "classifier" and head is not None and head != file_head
    if other_head:
        # Another head's weights never load into this one, even where a name and shape happen to agree.
        state = {k: v for k, v in state.items() if not k.startswith(CLASSIFIER_PREFIX)}
    missing, mismatched, unused = _match_weights(
        model, state, weights_file, path / CONFIG_JSON, bool(config_overrides) or other_head
    )
    model.eval()
    report.newly_initialized = sorted(missing + mismatched)
    report.unused = sorted(unused)
    if report.newly_initialized and not any(k.startswith(BACKBONE_PREFIX) for k in report.newly_initialized):
        # Only the task head is new (a discriminator loaded to fine-tune): what fine-tuning expects.
        log.info(
            "%s: the encoder loaded; the %s head is new, to be trained: %s",
            path,
            kind,
            ", ".join(report.newly_initialized),
        )
    elif report.newly_initialized:
        log.warning(
            "%s: loaded as %s; newly initialised (train before use): %s",
            path,
            kind,
            ", ".join(report.newly_initialized),
        )
    if report.unused:
        log.info("%s: unused checkpoint weights: %s", path, ", ".join(report.unused))
    return model, report


def _read_config(
    path: Path, kind: Kind | None, overrides: dict[str, Any]
) -> tuple[ElectraConfig, Kind, str | None, ClassifierHead]:
    """The model's config (with overrides), the model kind to load, the architecture config.json names and
    the classifier head it records."""
    if not path.is_dir():
        what = "not a directory" if path.exists() else "no such directory"
        raise InputError(f"{path}: {what} (pass a model directory, with config.json and its weights)")
    config_path = path / CONFIG_JSON
    if not config_path.is_file():
        raise InputError(
            f"{path}: no {CONFIG_JSON}; pass a directory saved by `save_pretrained` or this tool"
        )
    raw = _read_json(config_path)
    cfg = ElectraConfig.from_hf_dict(raw, source=config_path)
    archs = raw.get("architectures") or []
    source_arch = archs[0] if isinstance(archs, list) and archs else None
    if kind is None:
        if source_arch not in ARCHITECTURES:
            raise InputError(
                f"{config_path}: architecture {source_arch!r} does not say which head to load; "
                f"pass kind= one of discriminator, generator, classifier, tagger"
            )
        kind = cast(Kind, ARCHITECTURES[source_arch])
    if kind == "generator" and raw.get("tie_word_embeddings", True) is False:
        raise InputError(
            f"{config_path}: tie_word_embeddings is false; only tied ELECTRA generators are supported"
        )
    file_head = raw.get(CLASSIFIER_HEAD_KEY, "hf")
    if file_head not in CLASSIFIER_HEADS:
        raise InputError(
            f"{config_path}: {CLASSIFIER_HEAD_KEY} {file_head!r} is not one of "
            f"{', '.join(CLASSIFIER_HEADS)}; fix the file"
        )
    if overrides:
        cfg = cfg.replace(**overrides)
    return cfg, kind, source_arch, file_head


def _match_weights(
    model: ElectraHeadModel,
    state: dict[str, torch.Tensor],
    weights_file: Path,
    config_path: Path,
    head_may_change: bool,
) -> tuple[list[str], list[str], list[str]]:
    """Load what fits into `model`; (missing, mis-shaped, unused) keys. Any encoder mismatch is an error."""
    expected = {k: v.shape for k, v in model.state_dict().items()}
    if isinstance(model, ElectraGenerator):
        # The output weight is the word-embedding Parameter: loading that key loads both.
        expected.pop(TIED_KEY)
        state.pop(TIED_KEY, None)
    missing = [k for k in expected if k not in state]
    unused = [k for k in state if k not in expected]
    mismatched = [k for k in expected if k in state and tuple(state[k].shape) != tuple(expected[k])]
    for keys, what in ((missing, "misses"), (unused, "has unexpected"), (mismatched, "has mis-shaped")):
        backbone = [k for k in keys if k.startswith(BACKBONE_PREFIX)]
        if backbone:
            raise InputError(
                f"{weights_file}: {what} encoder weights ({_describe(backbone, state, expected)}); "
                f"the weights do not match {config_path}"
            )
    if mismatched and not head_may_change:
        raise InputError(
            f"{weights_file}: head weights do not match {config_path} "
            f"({_describe(mismatched, state, expected)}); fix config.json, or pass config overrides to "
            "re-initialise the head"
        )
    for k in mismatched + unused:
        del state[k]
    model.load_state_dict(state, strict=False)
    return missing, mismatched, unused


def _read_json(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e}); pass an ELECTRA config.json") from None
    if not isinstance(d, dict):
        raise InputError(f"{path}: expected a JSON object; pass an ELECTRA config.json")
    return d


def _check_size(cfg: ElectraConfig, state: dict[str, torch.Tensor], weights_file: Path) -> None:
    """Refuse a config.json that describes a model far larger than the weights it comes with, before the
    model is built: its sizes (vocab_size, hidden_size, ...) are whatever the file says, and building a model
    of them would allocate that much."""
    held = sum(t.numel() for t in state.values())
    needed = parameters_at_least(cfg)
    if needed > 2 * held + 10_000_000:
        raise InputError(
            f"{weights_file.parent / CONFIG_JSON} describes a model of at least {needed:,} parameters, but "
            f"{weights_file.name} holds {held:,}; the config does not match the weights (fix config.json)"
        )


def _read_weights(path: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    safetensors_file, pytorch_file = path / MODEL_SAFETENSORS, path / PYTORCH_MODEL_BIN
    if safetensors_file.is_file():
        try:
            return safetensors_file, load_file(str(safetensors_file), device="cpu")
        except (SafetensorError, OSError, ValueError) as e:
            raise InputError(
                f"{safetensors_file}: unreadable safetensors file ({e}); re-save the model"
            ) from None
    if pytorch_file.is_file():
        try:
            state = torch.load(pytorch_file, map_location="cpu", weights_only=True)
        except Exception as e:  # torch.load raises many types (pickle, zip, runtime) for a bad file
            raise InputError(
                f"{pytorch_file}: unreadable PyTorch checkpoint ({e}); re-save the model"
            ) from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise InputError(f"{pytorch_file}: not a state dict of tensors; re-save the model")
        return pytorch_file, state
    if any(path.glob("*.index.json")):
        raise InputError(f"{path}: sharded checkpoints are not supported; re-save with one weights file")
    raise InputError(
        f"{path}: no {MODEL_SAFETENSORS} or {PYTORCH_MODEL_BIN}; pass a complete model directory"
    )


def _normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # A bare ElectraModel checkpoint has no "electra." prefix (transformers' base_model_prefix).
    if not any(k.startswith(BACKBONE_PREFIX) for k in state):
        state = {BACKBONE_PREFIX + k: v for k, v in state.items()}
    return {k: v for k, v in state.items() if k not in BUFFER_KEYS}


def _describe(keys: list[str], state: dict[str, torch.Tensor], expected: dict[str, torch.Size]) -> str:
    parts = []
    for k in keys[:3]:
        if k in state and k in expected:
            parts.append(f"{k}: file {tuple(state[k].shape)} vs model {tuple(expected[k])}")
        else:
            parts.append(k)
    more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
    return ", ".join(parts) + more
