"""The on-disk format of a prepared pre-training dataset, and its reader.

    DIR/manifest.json             what is in the directory, with sizes and checksums of every array
    DIR/tokenizer/                the tokenizer the data was made with (pre-training reuses it)
    DIR/{train,val}/input_ids.bin     [N, max_seq_len] token ids (uint16 when the vocab has < 65536 entries)
    DIR/{train,val}/segment_ids.bin   [N, max_seq_len] uint8: 0 for [CLS] A [SEP] and padding, 1 for B [SEP]
    DIR/{train,val}/lengths.bin       [N] number of non-padding tokens

Raw little-endian arrays, memory-mapped by the reader: a data loader slices rows without reading the file.
The manifest is the only source of shapes, and the reader refuses any file whose size disagrees with it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from electra.errors import InputError
from electra.files import DATA_MANIFEST_JSON, DATA_TOKENIZER_DIR

FORMAT = "electra-pretraining-data"
FORMAT_VERSION = 1
SPLITS = ("train", "val")
ARRAYS = ("input_ids", "segment_ids", "lengths")


def ids_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.uint32)


class SplitWriter:
    """Appends chunks of examples to one split's array files, hashing as it goes."""

    def __init__(self, directory: Path, max_len: int, ids_dtype: np.dtype) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.max_len = max_len
        self.dtypes = {
            "input_ids": np.dtype(ids_dtype).newbyteorder("<"),
            "segment_ids": np.dtype(np.uint8),
            "lengths": np.dtype(np.uint16 if max_len < 65536 else np.uint32).newbyteorder("<"),
        }
        self.files = {name: open(directory / f"{name}.bin", "wb") for name in ARRAYS}  # noqa: SIM115
        self.hashes = {name: hashlib.sha256() for name in ARRAYS}
        self.examples = 0
        self.tokens = 0

    def append(self, input_ids: np.ndarray, segment_ids: np.ndarray, lengths: np.ndarray) -> None:
        for name, arr in (("input_ids", input_ids), ("segment_ids", segment_ids), ("lengths", lengths)):
            data = np.ascontiguousarray(arr, dtype=self.dtypes[name]).tobytes()
            self.files[name].write(data)
            self.hashes[name].update(data)
        self.examples += len(lengths)
        self.tokens += int(lengths.sum(dtype=np.int64))

    def close(self) -> dict[str, Any]:
        for f in self.files.values():
            f.close()
        return {
            "examples": self.examples,
            "tokens": self.tokens,
            "arrays": {
                name: {
                    "file": f"{self.directory.name}/{name}.bin",
                    "dtype": self.dtypes[name].str,
                    "shape": [self.examples, self.max_len] if name != "lengths" else [self.examples],
                    "sha256": self.hashes[name].hexdigest(),
                }
                for name in ARRAYS
            },
        }


@dataclass(frozen=True)
class SplitArrays:
    """One split's examples: input_ids and segment_ids [N, max_seq_len], lengths [N] (memory-mapped)."""

    input_ids: np.ndarray
    segment_ids: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)


class PretrainingData:
    """A prepared dataset directory, validated and memory-mapped."""

    def __init__(self, directory: Path, manifest: dict[str, Any], splits: dict[str, SplitArrays]) -> None:
        self.directory = directory
        self.manifest = manifest
        self.splits = splits

    @property
    def max_seq_len(self) -> int:
        return int(self.manifest["max_seq_len"])

    @property
    def tokenizer_dir(self) -> Path:
        return self.directory / DATA_TOKENIZER_DIR

    @property
    def train(self) -> SplitArrays:
        return self.splits["train"]

    @property
    def val(self) -> SplitArrays:
        return self.splits["val"]

    @classmethod
    def open(cls, directory: str | Path) -> PretrainingData:
        directory = Path(directory)
        fix = "re-run `electra data prepare` to rebuild it"
        if not directory.is_dir():
            raise InputError(
                f"data directory {directory} does not exist; create it with `electra data prepare`"
            )
        manifest_path = directory / DATA_MANIFEST_JSON
        if not manifest_path.is_file():
            raise InputError(
                f"{directory} has no {DATA_MANIFEST_JSON}, so it was not made by `electra data prepare`; "
                f"{fix}"
            )
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"{manifest_path} is unreadable or corrupt ({e}); {fix}") from e
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise InputError(f"{manifest_path} is not an electra pre-training data manifest; {fix}")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise InputError(
                f"{manifest_path} has format version {manifest.get('format_version')}, this electra reads "
                f"version {FORMAT_VERSION}; {fix}"
            )
        splits = {}
        try:
            for split in SPLITS:
                arrays = {}
                for name in ARRAYS:
                    spec = manifest["splits"][split]["arrays"][name]
                    arrays[name] = _open_array(directory, spec, fix)
                splits[split] = SplitArrays(**arrays)
        except (KeyError, TypeError) as e:
            raise InputError(f"{manifest_path} is missing field {e}; {fix}") from e
        except ValueError as e:  # a dtype or shape that is not one ("x" for a dimension)
            raise InputError(f"{manifest_path} describes an array wrongly ({e}); {fix}") from e
        wrong = _wrong_fields(manifest)
        if wrong:
            raise InputError(f"{manifest_path}: {', '.join(wrong)} missing or of the wrong type; {fix}")
        return cls(directory, manifest, splits)

    def verify_checksums(self) -> None:
        """Hash every array file and compare with the manifest (reads the whole dataset)."""
        for split in SPLITS:
            for name in ARRAYS:
                spec = self.manifest["splits"][split]["arrays"][name]
                path = self.directory / spec["file"]
                digest = hashlib.sha256()
                with open(path, "rb") as f:
                    while block := f.read(1 << 24):
                        digest.update(block)
                if digest.hexdigest() != spec["sha256"]:
                    raise InputError(
                        f"{path} does not match the checksum in {self.directory / DATA_MANIFEST_JSON}; "
                        "the data is corrupt: re-run `electra data prepare`"
                    )


# What readers of a manifest rely on (`electra data info`, the trainer): (path of keys, type).
_FIELDS: tuple[tuple[tuple[str, ...], type | tuple[type, ...]], ...] = (
    (("max_seq_len",), int),
    (("seed",), int),
    (("created",), str),
    (("tokenizer", "vocab_size"), int),
    (("tokenizer", "fingerprint"), str),
    (("tokenizer", "source"), str),
    (("counts", "documents"), int),
    (("counts", "sentences"), int),
    (("corpus", "files"), list),
)


def _wrong_fields(manifest: dict[str, Any]) -> list[str]:
    """The fields of `manifest` that are missing or not of their type, by dotted name."""
    wrong = []
    for keys, kind in _FIELDS:
        value: Any = manifest
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool):
            wrong.append(".".join(keys))
    return wrong


def _open_array(directory: Path, spec: dict[str, Any], fix: str) -> np.ndarray:
    path = directory / spec["file"]
    dtype = np.dtype(spec["dtype"])
    shape = tuple(int(s) for s in spec["shape"])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if not path.is_file():
        raise InputError(f"{path} is listed in the manifest but missing; {fix}")
    actual = path.stat().st_size
    if actual != expected:
        raise InputError(
            f"{path} has {actual} bytes but the manifest says {'x'.join(map(str, shape))} {dtype} "
            f"({expected} bytes): the manifest does not match its arrays; {fix}"
        )
    if expected == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)
