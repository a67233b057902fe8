"""Token-classification tasks: CoNLL-2003 and custom tag sets, their files and their label ids.

A tagging task labels every word: named entities, personal data, grammatical errors. Tags are read in the
file's scheme and kept as IOB2 (electra.training.finetune.tagging_data), so the saved model's labels are
IOB2 whatever the input, the metrics are seqeval's strict IOB2 mode, and a served tagger groups entities by
their B-/I- prefixes as Hugging Face's pipeline does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from electra.errors import InputError
from electra.training.finetune.tag_metrics import MAIN_METRIC
from electra.training.finetune.tagging_data import (
    SCHEMES,
    TaggedSentence,
    check_known,
    normalize_scheme,
    read_tagged,
    tag_set,
)

CUSTOM_TAGS = "tags"


@dataclass(frozen=True)
class TaggingTask:
    """What TaggerTrainer and FinetuneTrainer's shared steps (epochs, best-seed choice, summary) read of a
    tagging task."""

    name: str
    labels: tuple[str, ...]  # IOB2 tags in id order, "O" first
    scheme: str  # the files' scheme, which predictions are written back in
    dev_splits: tuple[str, ...]  # evaluated after every epoch; the first one selects the best seed
    main_metric: str = MAIN_METRIC
    default_epochs: int = 3  # the official tagging tasks' (finetune/configure_finetuning.py)
    kind: str = "tagging"  # beside TaskSpec.kind: a tag per word piece, never a sequence's labels


@dataclass(frozen=True)
class TaggedCorpus:
    """A named tagging data set on disk: its split files (first name found wins), scheme and tag column."""

    name: str
    files: dict[str, tuple[str, ...]]
    scheme: str = "iob2"
    tag_column: int = -1


# CoNLL-2003 English as the usual copies ship it (train/dev/test.txt), or as the shared task distributed it
# (eng.train, eng.testa for dev, eng.testb for test). Test is evaluated every epoch too: it is reported,
# never used to choose (the best seed is the best on dev).
CORPORA: dict[str, TaggedCorpus] = {
    "conll2003": TaggedCorpus(
        "conll2003",
        {
            "train": ("train.txt", "eng.train"),
            "dev": ("dev.txt", "valid.txt", "eng.testa"),
            "test": ("test.txt", "eng.testb"),
        },
    ),
}
TAGGING_TASK_NAMES = (*CORPORA, CUSTOM_TAGS)


def is_tagging_task(name: str) -> bool:
    return name in TAGGING_TASK_NAMES


def corpus_file(corpus: TaggedCorpus, data_dir: Path | None, split: str) -> Path:
    """The file of `split` in `data_dir`; InputError naming what was looked for."""
    if data_dir is None:
        raise InputError(f"--task {corpus.name} needs --data-dir (the folder with its {split} file)")
    names = corpus.files[split]
    for name in names:
        if (data_dir / name).is_file():
            return data_dir / name
    raise InputError(f"--data-dir {data_dir} has no {corpus.name} {split} file ({' or '.join(names)})")


def check_scheme(scheme: str) -> str:
    """The scheme's canonical name ("iobes" is "bioes"); InputError for an unknown one."""
    try:
        return normalize_scheme(scheme)
    except ValueError:
        raise InputError(f"--tag-scheme {scheme!r} is not one of {', '.join(SCHEMES)}") from None


@dataclass(frozen=True)
class TaggingData:
    task: TaggingTask
    train: list[TaggedSentence]
    dev: dict[str, list[TaggedSentence]]


def load_tagging_data(
    name: str,
    *,
    data_dir: Path | None = None,
    train: Path | None = None,
    dev: Path | None = None,
    tag_column: int = -1,
    scheme: str = "iob2",
) -> TaggingData:
    """A tagging task's training sentences and labeled dev splits; its labels are the training set's tags.

    A dev tag the training set lacks is an error: the model could never predict it.
    """
    scheme = check_scheme(scheme)
    if name in CORPORA:
        corpus = CORPORA[name]
        paths = {split: corpus_file(corpus, data_dir, split) for split in corpus.files}
        scheme, tag_column = corpus.scheme, corpus.tag_column
    else:
        if train is None or dev is None:
            raise InputError(
                f"--task {CUSTOM_TAGS} needs --train FILE and --dev FILE (CoNLL columns or JSONL)"
            )
        paths = {"train": train, "dev": dev}
    read = {
        split: read_tagged(path, tag_column=tag_column, scheme=scheme, labeled=True)
        for split, path in paths.items()
    }
    labels = tag_set(read["train"])
    for split, sentences in read.items():
        if split != "train":
            check_known(sentences, labels, paths[split])
    dev_splits = tuple(split for split in read if split != "train")
    task = TaggingTask(name=name, labels=labels, scheme=scheme, dev_splits=dev_splits)
    return TaggingData(task, read["train"], {split: read[split] for split in dev_splits})


def task_for_labels(name: str, labels: tuple[str, ...], scheme: str) -> TaggingTask:
    """The task of a saved tagger (its labels from config.json's id2label)."""
    if name in CORPORA:
        corpus = CORPORA[name]
        return TaggingTask(name, labels, corpus.scheme, tuple(s for s in corpus.files if s != "train"))
    return TaggingTask(name, labels, check_scheme(scheme), ("dev",))
