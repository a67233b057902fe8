"""The one WordPiece tokenizer shared by training, export and serving.

Only stdlib and `tokenizers` are imported here so the inference server never pulls in transformers. Every
tokenizer that enters the project goes through `load_tokenizer`, which normalises the many on-disk forms (a
`tokenizer.json`, a BERT `vocab.txt`, a Hugging Face model directory) into one `tokenizers.Tokenizer` with
the same behaviour as transformers' `BertTokenizerFast`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import AddedToken, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from electra.atomic import atomic_write_text
from electra.errors import ElectraError, InputError
from electra.files import SPECIAL_TOKENS_MAP_JSON, TOKENIZER_CONFIG_JSON, TOKENIZER_JSON, VOCAB_TXT

SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# BERT's limit: a longer pre-token becomes a single [UNK] instead of a long chain of pieces.
MAX_INPUT_CHARS_PER_WORD = 100
MODEL_MAX_LENGTH = 512

_HOW_TO_GET_ONE = (
    "train one with `electra tokenizer train` or point --tokenizer at a Hugging Face model directory"
)


@dataclass(frozen=True)
class SpecialIds:
    pad: int
    unk: int
    cls: int
    sep: int
    mask: int


# ----------------------------------------------------------------------------------------------------------
# Building
# ----------------------------------------------------------------------------------------------------------


def bert_normalizer(lowercase: bool, strip_accents: bool | None = None, handle_chinese_chars: bool = True):
    """BERT's normaliser; strip_accents=None means "strip accents exactly when lowercasing", as in BERT."""
    return normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=handle_chinese_chars,
        strip_accents=strip_accents,
        lowercase=lowercase,
    )


def bert_post_processor(cls_id: int, sep_id: int) -> processors.TemplateProcessing:
    return processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )


def configure_bert_pipeline(
    tokenizer: tokenizers.Tokenizer,
    lowercase: bool,
    strip_accents: bool | None = None,
    handle_chinese_chars: bool = True,
) -> None:
    """Everything around the WordPiece model, as transformers' BertConverter builds it.

    The post-processor needs the [CLS]/[SEP] ids, so the model's vocabulary must already be in place.
    """
    tokenizer.normalizer = bert_normalizer(lowercase, strip_accents, handle_chinese_chars)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    ids = special_ids(tokenizer)
    tokenizer.post_processor = bert_post_processor(ids.cls, ids.sep)


def _register_special_tokens(tokenizer: tokenizers.Tokenizer) -> None:
    """Make the special tokens "added tokens", as transformers does when it loads any tokenizer.

    Without this, "[MASK]" typed in the input text would be split into "[", "mask", "]" here but kept as one
    token by transformers, and the ids would differ. Only tokens already in the vocabulary are added, so no
    id changes.
    """
    already = {added.content for added in tokenizer.get_added_tokens_decoder().values()}
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    missing = [t for t in SPECIAL_TOKENS if t not in already and t in vocab]
    if missing:
        tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])


def _finish(tokenizer: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    # Padding and truncation are per-call decisions of the caller (batching, max length), never baked in.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


# ----------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------


def load_tokenizer(path: str | Path) -> tokenizers.Tokenizer:
    """Load a WordPiece tokenizer from a tokenizer.json, a vocab.txt, or a directory holding either."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist; {_HOW_TO_GET_ONE}")
    if path.is_dir():
        tokenizer, source = _load_dir(path)
    elif path.suffix.lower() == ".json":
        tokenizer, source = _load_tokenizer_json(path), path
    else:
        tokenizer, source = _load_vocab_txt(path, _vocab_file_options(path)), path
    _validate(tokenizer, source)
    _register_special_tokens(tokenizer)
    return _finish(tokenizer)


def _load_dir(directory: Path) -> tuple[tokenizers.Tokenizer, Path]:
    tokenizer_json = directory / TOKENIZER_JSON
    if tokenizer_json.is_file():
        tokenizer = _load_tokenizer_json(tokenizer_json)
        if (directory / TOKENIZER_CONFIG_JSON).is_file():
            _apply_config_to_normalizer(tokenizer, _config_options(directory, default_lowercase=True))
        return tokenizer, tokenizer_json
    vocab_txt = directory / VOCAB_TXT
    if vocab_txt.is_file():
        return _load_vocab_txt(vocab_txt, _config_options(directory, default_lowercase=True)), vocab_txt
    raise InputError(f"{directory} has no {TOKENIZER_JSON} or {VOCAB_TXT}; {_HOW_TO_GET_ONE}")


def _load_tokenizer_json(path: Path) -> tokenizers.Tokenizer:
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception for both I/O and parse errors
        reason = " ".join(str(e).split())
        raise InputError(
            f"{path} is not a readable tokenizer.json ({reason}); replace it: {_HOW_TO_GET_ONE}"
        ) from e
    if not isinstance(tokenizer.model, WordPiece):
        kind = type(tokenizer.model).__name__
        raise InputError(
            f"{path} uses a {kind} model but ELECTRA needs a WordPiece (BERT-style) tokenizer; "
            f"{_HOW_TO_GET_ONE}"
        )
    return tokenizer


def _apply_config_to_normalizer(tokenizer: tokenizers.Tokenizer, options: dict[str, Any]) -> None:
    """Let tokenizer_config.json override a BertNormalizer's settings, as transformers' Bert/Electra fast
    tokenizers do on load: a model directory whose two files disagree must tokenize as it does there."""
    if tokenizer.normalizer is None:
        return
    state = json.loads(tokenizer.normalizer.__getstate__())
    if state.get("type") != "BertNormalizer":
        return
    wanted = {
        "lowercase": options["lowercase"],
        "strip_accents": options["strip_accents"],
        "handle_chinese_chars": options["handle_chinese_chars"],
    }
    if any(state.get(key, value) != value for key, value in wanted.items()):
        tokenizer.normalizer = normalizers.BertNormalizer(clean_text=state.get("clean_text", True), **wanted)


def _read_vocab_lines(path: Path) -> list[str]:
    """One token per line, id = line number, exactly as transformers' BertTokenizer reads the file."""
    try:
        # Universal newlines, then a split on "\n" only: str.splitlines() would also split on \x1c, \x85 or
        # \u2028, which are legitimate token characters, and shift every later id.
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise InputError(f"{path} is not UTF-8 text; save the vocabulary as UTF-8, one token per line") from e
    except OSError as e:
        raise InputError(f"{path} cannot be read ({e.strerror}); check the path and its permissions") from e
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last token, it does not start an empty one
    if not any(line.strip() for line in lines):
        raise InputError(f"{path} is empty; a vocab.txt needs one token per line, or {_HOW_TO_GET_ONE}")
    return lines


def _vocab_from_lines(path: Path, lines: list[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for index, token in enumerate(lines):
        if token in vocab:
            # transformers would silently let the later line win and leave a hole in the ids; a hole makes the
            # file impossible to write back, so refuse it instead.
            raise InputError(
                f"{path} lists {token!r} twice (lines {vocab[token] + 1} and {index + 1}); "
                "remove the duplicate line"
            )
        vocab[token] = index
    return vocab


def _load_vocab_txt(path: Path, options: dict[str, Any]) -> tokenizers.Tokenizer:
    vocab = _vocab_from_lines(path, _read_vocab_lines(path))
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise InputError(
            f"{path} lacks the special token {missing[0]}; add the lines {', '.join(missing)} "
            f"or {_HOW_TO_GET_ONE}"
        )
    if options.get("lowercase") is None:
        options = {**options, "lowercase": _looks_uncased(vocab)}
    model = WordPiece(
        vocab,
        unk_token="[UNK]",
        max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
        continuing_subword_prefix="##",
    )
    tokenizer = tokenizers.Tokenizer(model)
    configure_bert_pipeline(tokenizer, **options)
    return tokenizer


def _looks_uncased(vocab: dict[str, int]) -> bool:
    """A vocabulary trained on lowercased text cannot contain a token that lowercasing would change.

    `str.isupper` is the wrong test: the uncased BERT vocab holds "ℝ", which is uppercase but has no lowercase
    form. Bracketed tokens ([CLS], [unused0]...) are never normalised, so they say nothing about casing.
    """
    return all(t == t.lower() for t in vocab if not (t.startswith("[") and t.endswith("]")))


def _vocab_file_options(vocab_file: Path) -> dict[str, Any]:
    """Options for a vocab.txt named directly: from its directory's tokenizer_config.json, else guessed."""
    return _config_options(vocab_file.parent, default_lowercase=None)


def _config_options(directory: Path, default_lowercase: bool | None) -> dict[str, Any]:
    config_path = directory / TOKENIZER_CONFIG_JSON
    config: dict[str, Any] = {}
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(
                f"{config_path} is not valid JSON ({e}); fix it, or delete it to use the BERT defaults"
            ) from e
        if not isinstance(config, dict):
            raise InputError(f"{config_path} must hold a JSON object; fix or delete it")
        if default_lowercase is None and "do_lower_case" not in config:
            default_lowercase = True  # a config without the key means transformers' default
    return {
        "lowercase": config.get("do_lower_case", default_lowercase),
        "strip_accents": config.get("strip_accents"),
        "handle_chinese_chars": config.get("tokenize_chinese_chars", True),
    }


def _validate(tokenizer: tokenizers.Tokenizer, source: Path) -> None:
    """Fail at load time, naming the file, rather than deep inside training or serving."""
    try:
        special_ids(tokenizer)
        vocab_tokens(tokenizer)
    except ElectraError as e:
        raise InputError(f"{source}: {e}") from e


# ----------------------------------------------------------------------------------------------------------
# Inspecting
# ----------------------------------------------------------------------------------------------------------


def special_ids(tokenizer: tokenizers.Tokenizer) -> SpecialIds:
    """Look the ids up: BERT's vocab has [PAD]=0 but [UNK]=100, ours has 0..4; never assume either."""
    ids: dict[str, int] = {}
    for token in SPECIAL_TOKENS:
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            raise InputError(
                f"the tokenizer has no {token} token (it needs all of {', '.join(SPECIAL_TOKENS)}); "
                f"{_HOW_TO_GET_ONE}"
            )
        ids[token] = token_id
    return SpecialIds(
        pad=ids["[PAD]"], unk=ids["[UNK]"], cls=ids["[CLS]"], sep=ids["[SEP]"], mask=ids["[MASK]"]
    )


def vocab_tokens(tokenizer: tokenizers.Tokenizer) -> list[str]:
    """All tokens in id order; ids must be 0..n-1 so the list index is the id (as in vocab.txt)."""
    by_id = {i: t for t, i in tokenizer.get_vocab(with_added_tokens=True).items()}
    tokens = [by_id.get(i) for i in range(len(by_id))]
    if None in tokens:
        hole = tokens.index(None)
        raise ElectraError(
            f"the tokenizer's ids are not contiguous (no token has id {hole}); "
            "re-create it with `electra tokenizer train`"
        )
    return tokens  # type: ignore[return-value]


def _normalizer_states(tokenizer: tokenizers.Tokenizer) -> list[dict[str, Any]]:
    """The normaliser's configuration, with Sequence normalisers flattened."""
    if tokenizer.normalizer is None:
        return []
    pending = [json.loads(tokenizer.normalizer.__getstate__())]
    flat: list[dict[str, Any]] = []
    while pending:
        state = pending.pop(0)
        if state.get("type") == "Sequence":
            pending[:0] = state.get("normalizers", [])
        else:
            flat.append(state)
    return flat


def is_lowercase(tokenizer: tokenizers.Tokenizer) -> bool:
    for state in _normalizer_states(tokenizer):
        kind = state.get("type")
        if kind == "Lowercase" or (kind == "BertNormalizer" and state.get("lowercase")):
            return True
    return False


def _strip_accents(tokenizer: tokenizers.Tokenizer) -> bool | None:
    """The strip_accents setting transformers must be told so it keeps our normaliser unchanged."""
    for state in _normalizer_states(tokenizer):
        if state.get("type") == "BertNormalizer":
            return state.get("strip_accents")
        if state.get("type") == "StripAccents":
            return True
    return None


def _handles_chinese_chars(tokenizer: tokenizers.Tokenizer) -> bool:
    for state in _normalizer_states(tokenizer):
        if state.get("type") == "BertNormalizer":
            return bool(state.get("handle_chinese_chars", True))
    return True


def tokenizer_fingerprint(tokenizer: tokenizers.Tokenizer) -> str:
    """Identifies what a model was trained with: the vocabulary and whether input is lowercased.

    Computed from behaviour-defining content rather than file bytes, so the same vocabulary gives the same
    fingerprint whether it came from tokenizer.json, vocab.txt or a model directory.
    """
    payload = "\n".join(vocab_tokens(tokenizer)) + f"\nlowercase={is_lowercase(tokenizer)}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------------------------------------
# Saving
# ----------------------------------------------------------------------------------------------------------


def save_tokenizer(tokenizer: tokenizers.Tokenizer, out_dir: str | Path) -> None:
    """Write the tokenizer into an existing directory in a form both this module and transformers load.

    tokenizer.json is what gets loaded back; vocab.txt and the configs make the directory a regular
    Hugging Face ELECTRA tokenizer directory (AutoTokenizer / ElectraTokenizerFast).
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise InputError(f"{out_dir} is not a directory; create it first or choose another output path")
    special_ids(tokenizer)  # refuse, before writing anything, what transformers could not use either
    tokens = vocab_tokens(tokenizer)
    bad = next((t for t in tokens if "\n" in t or "\r" in t), None)
    if bad is not None:
        raise ElectraError(f"the token {bad!r} contains a line break and cannot be written to {VOCAB_TXT}")

    atomic_write_text(out_dir / TOKENIZER_JSON, _finish(_copy(tokenizer)).to_str(pretty=True))
    atomic_write_text(out_dir / VOCAB_TXT, "".join(f"{t}\n" for t in tokens))
    atomic_write_text(out_dir / TOKENIZER_CONFIG_JSON, _json(_tokenizer_config(tokenizer)))
    atomic_write_text(out_dir / SPECIAL_TOKENS_MAP_JSON, _json(_special_tokens_map()))


def tokenizer_files(tokenizer: tokenizers.Tokenizer) -> dict[str, bytes]:
    """The files `save_tokenizer` writes, as bytes by name: for writers that place them inside their own
    atomic output directory (models, runs, bundles)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        save_tokenizer(tokenizer, Path(tmp))
        return {p.name: p.read_bytes() for p in Path(tmp).iterdir()}


def _copy(tokenizer: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    # Saving must not switch off padding/truncation on the caller's object.
    return tokenizers.Tokenizer.from_str(tokenizer.to_str())


def _special_tokens_map() -> dict[str, str]:
    return {
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    }


def _tokenizer_config(tokenizer: tokenizers.Tokenizer) -> dict[str, Any]:
    # ElectraTokenizerFast rebuilds the normaliser when these disagree with tokenizer.json, so they must
    # describe the normaliser exactly.
    return {
        "tokenizer_class": "ElectraTokenizer",
        "do_lower_case": is_lowercase(tokenizer),
        "strip_accents": _strip_accents(tokenizer),
        "tokenize_chinese_chars": _handles_chinese_chars(tokenizer),
        "model_max_length": MODEL_MAX_LENGTH,
        "clean_up_tokenization_spaces": True,
        **_special_tokens_map(),
    }


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
