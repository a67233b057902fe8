"""Hugging Face Hub ids wherever a model or tokenizer is taken (`--model`, `--init`, `--tokenizer`).

`resolve(ref)` turns a reference into a local directory: an existing local path is returned as it is; a Hub id
(`owner/name` or `name`) is fetched with huggingface_hub into its cache (HF_HOME / HF_HUB_CACHE, HF_TOKEN,
HF_HUB_OFFLINE, its own progress bars), downloading only the files this tool reads: config.json, one weights
file (model.safetensors, else pytorch_model.bin) and the tokenizer files, never TensorFlow, Flax or ONNX
weights. The stages keep taking local paths; the CLI resolves at its boundary. Every failure of the Hub
(offline and not cached, no such repository, gated, bad revision, HTTP error) is one InputError line naming
the id and what to do.

The environment is read at call time (huggingface_hub reads its constants once, at import), and the cache
directory is passed to huggingface_hub explicitly.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from electra.errors import InputError
from electra.files import (
    CONFIG_JSON,
    DISCRIMINATOR_DIR,
    GENERATOR_DIR,
    MODEL_SAFETENSORS,
    PYTORCH_MODEL_BIN,
    SPECIAL_TOKENS_MAP_JSON,
    TOKENIZER_CONFIG_JSON,
    TOKENIZER_JSON,
    VOCAB_TXT,
)

What = Literal["model", "tokenizer"]

EXAMPLE_ID = "google/electra-small-discriminator"
# The help text of every option that takes a model or a tokenizer.
LOCAL_OR_HUB = f"a local directory or a Hugging Face Hub id (e.g. {EXAMPLE_ID})"
REVISION_HELP = (
    "with a Hub id: the branch, tag or commit hash to use (default: main); the Hub cache (HF_HOME), "
    "HF_TOKEN and HF_HUB_OFFLINE=1 apply"
)

TOKENIZER_FILES = (TOKENIZER_JSON, VOCAB_TXT, TOKENIZER_CONFIG_JSON, SPECIAL_TOKENS_MAP_JSON)
WEIGHTS_FILES = (MODEL_SAFETENSORS, PYTORCH_MODEL_BIN)  # in order of preference: one is downloaded
# A model repository may also be the --out of `electra pretrain` uploaded as is.
MODEL_FOLDERS = ("", f"{DISCRIMINATOR_DIR}/", f"{GENERATOR_DIR}/")

# huggingface_hub's rule for repo ids (utils.validate_repo_id), plus: no file suffix that names a local file.
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_FILE_SUFFIXES = (".json", ".txt", ".bin", ".safetensors", ".onnx", ".h5", ".csv", ".tsv", ".jsonl", ".gz")
_TRUE = {"1", "ON", "YES", "TRUE"}


def looks_like_hub_id(ref: str) -> bool:
    """Whether `ref` can be a Hub repository id (`owner/name` or `name`) rather than only a local path."""
    return (
        len(ref) <= 96
        and bool(_REPO_ID.match(ref))
        and "--" not in ref
        and ".." not in ref
        and not ref.endswith((".", ".git"))
        and not ref.lower().endswith(_FILE_SUFFIXES)
    )


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as huggingface_hub understands it, read now."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in _TRUE


def cache_dir() -> Path:
    """The Hub cache as huggingface_hub computes it (HF_HUB_CACHE, else HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub), read now rather than at its import."""

    def expand(p: str) -> Path:
        return Path(os.path.expandvars(os.path.expanduser(p)))

    if os.environ.get("HF_HUB_CACHE"):
        return expand(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return expand(os.environ["HUGGINGFACE_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return expand(os.environ["HF_HOME"]) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return expand(xdg) / "huggingface" / "hub"


def resolve(ref: str | Path, revision: str | None = None, *, what: What = "model") -> Path:
    """A local directory (or file) for `ref`: the path itself when it exists, else the Hub snapshot of the id.

    A missing path that cannot be a Hub id is returned as it is, so the stage reports it as before.
    `what` picks the files fetched: "model" (config, weights and tokenizer) or "tokenizer" (its files only).
    """
    path = Path(ref).expanduser()
    text = str(ref)
    if path.exists():
        if revision is not None:
            raise InputError(
                f"--revision {revision} applies to Hugging Face Hub ids, but {text} is a local path; "
                "drop --revision"
            )
        return path
    if not looks_like_hub_id(text):
        if revision is not None:
            raise InputError(f"--revision {revision} needs a Hugging Face Hub id, and {text} is not one")
        return path
    return _snapshot(text, revision, what)


def _snapshot(repo_id: str, revision: str | None, what: What) -> Path:
    try:
        import huggingface_hub  # noqa: F401  (imported here: only a Hub id needs it)
    except ImportError:
        raise InputError(
            f"{repo_id} is not a local path, and reading Hugging Face Hub ids needs huggingface_hub: "
            "pip install huggingface_hub, or pass a local directory"
        ) from None
    cache = cache_dir()
    try:
        folder, downloaded = _fetch(repo_id, revision, what, cache)
    except (OSError, ValueError) as e:  # huggingface_hub's errors: HTTP (requests, OSError), validation
        raise _hub_error(e, repo_id, revision, cache) from e
    _check_complete(folder, repo_id, revision, what, downloaded, cache)
    return folder


def _fetch(repo_id: str, revision: str | None, what: What, cache: Path) -> tuple[Path, bool]:
    """(snapshot folder, whether it was just fetched from the Hub rather than found in the cache)."""
    from huggingface_hub import HfApi, snapshot_download

    if not offline():
        try:
            info = HfApi().model_info(repo_id, revision=revision)
        except _network_errors():
            info = None  # no network: the cache may still have it
        if info is not None:
            files = [s.rfilename for s in info.siblings or []]
            patterns = wanted_files(files, what)
            if not patterns:
                raise InputError(_not_electra(repo_id, revision, what))
            folder = snapshot_download(repo_id, revision=revision, cache_dir=cache, allow_patterns=patterns)
            return Path(folder), True
    folder = snapshot_download(repo_id, revision=revision, cache_dir=cache, local_files_only=True)
    return Path(folder), False


def _network_errors() -> tuple[type[BaseException], ...]:
    """What huggingface_hub raises when the Hub cannot be reached: requests' (before 1.0) or httpx's."""
    from huggingface_hub.errors import OfflineModeIsEnabled

    errors: list[type[BaseException]] = [OfflineModeIsEnabled]
    try:
        import requests

        errors += [requests.ConnectionError, requests.Timeout]
    except ImportError:  # pragma: no cover - huggingface_hub >= 1.0 uses httpx
        pass
    try:
        import httpx

        errors.append(httpx.TransportError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


def wanted_files(files: list[str], what: What) -> list[str]:
    """The files of a repository this tool reads: per folder (the root, discriminator/, generator/) the
    config and one weights file (safetensors preferred) for a model, and the tokenizer files."""
    present = set(files)
    wanted: list[str] = []
    for folder in MODEL_FOLDERS:
        tokenizer = [folder + f for f in TOKENIZER_FILES if folder + f in present]
        if what == "tokenizer":
            wanted += tokenizer
            continue
        weights = next((folder + f for f in WEIGHTS_FILES if folder + f in present), None)
        if folder + CONFIG_JSON in present and weights is not None:
            wanted += [folder + CONFIG_JSON, weights, *tokenizer]
    return wanted


def _check_complete(
    folder: Path, repo_id: str, revision: str | None, what: What, downloaded: bool, cache: Path
) -> None:
    """A cached snapshot may hold only some files (e.g. another tool fetched just config.json)."""
    roots = [folder / f for f in MODEL_FOLDERS] if what == "model" else [folder]
    if what == "model":
        ok = any((d / CONFIG_JSON).is_file() and any((d / w).is_file() for w in WEIGHTS_FILES) for d in roots)
    else:
        ok = any((folder / f).is_file() for f in (TOKENIZER_JSON, VOCAB_TXT))
    if ok:
        return
    if downloaded:
        raise InputError(_not_electra(repo_id, revision, what))
    need = (
        f"{CONFIG_JSON} and {MODEL_SAFETENSORS} or {PYTORCH_MODEL_BIN}"
        if what == "model"
        else (f"{TOKENIZER_JSON} or {VOCAB_TXT}")
    )
    raise InputError(
        f"the cached copy of {_named(repo_id, revision)} in {cache} lacks {need}; download it with network "
        "access (unset HF_HUB_OFFLINE), or pass a local directory"
    )


def _named(repo_id: str, revision: str | None) -> str:
    return repo_id if revision is None else f"{repo_id} (revision {revision})"


def _not_electra(repo_id: str, revision: str | None, what: What) -> str:
    if what == "tokenizer":
        return (
            f"Hugging Face Hub repository {_named(repo_id, revision)} has no {TOKENIZER_JSON} or "
            f"{VOCAB_TXT}; pass a repository or directory with a BERT-style WordPiece tokenizer"
        )
    return (
        f"Hugging Face Hub repository {_named(repo_id, revision)} has no {CONFIG_JSON} with "
        f"{MODEL_SAFETENSORS} or {PYTORCH_MODEL_BIN} (PyTorch weights); pass an ELECTRA model repository "
        f"such as {EXAMPLE_ID}, or a local directory"
    )


def _hub_error(e: Exception, repo_id: str, revision: str | None, cache: Path) -> InputError:
    """One line for a huggingface_hub failure: what went wrong with which id, and what to do."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    named = _named(repo_id, revision)
    if isinstance(e, LocalEntryNotFoundError):
        why = "with HF_HUB_OFFLINE=1 set" if offline() else "and the Hub could not be reached (no network?)"
        return InputError(
            f"{named} is not a local path, and not in the Hugging Face cache ({cache}) {why}; "
            "download it once with network access, or pass a local directory"
        )
    if isinstance(e, GatedRepoError):
        return InputError(
            f"{repo_id} is a gated Hugging Face Hub repository: accept its conditions on "
            f"https://huggingface.co/{repo_id}, then set HF_TOKEN (or run `hf auth login`)"
        )
    if isinstance(e, RepositoryNotFoundError):
        return InputError(
            f"{repo_id} is neither a local path nor a Hugging Face Hub repository (or it is private: set "
            "HF_TOKEN or run `hf auth login`); check the spelling"
        )
    if isinstance(e, RevisionNotFoundError):
        return InputError(
            f"--revision {revision} does not exist in {repo_id}; pass one of its branches, tags or commit "
            "hashes"
        )
    if isinstance(e, HfHubHTTPError):
        status = getattr(e.response, "status_code", None)
        if status == 401:
            return InputError(
                f"the Hugging Face Hub refused the token for {repo_id} (401); check HF_TOKEN or run "
                "`hf auth login`"
            )
        return InputError(
            f"downloading {named} from the Hugging Face Hub failed ({_first_line(e)}); try again later, or "
            "pass a local directory"
        )
    if isinstance(e, HFValidationError):
        return InputError(f"{repo_id} is neither a local path nor a valid Hugging Face Hub id")
    if isinstance(e, OSError):
        return InputError(
            f"downloading {named} from the Hugging Face Hub into {cache} failed ({_first_line(e)}); check "
            "the network and the cache directory (HF_HOME), or pass a local directory"
        )
    return InputError(f"downloading {named} from the Hugging Face Hub failed ({_first_line(e)})")


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
