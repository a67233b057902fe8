"""The vocabularies the experiments compare: BERT's uncased WordPiece (30,522) as released, or one trained
on the pre-training corpus with `electra tokenizer train`'s trainer, named `cased-8192`, `uncased-16384`..."""

from __future__ import annotations

import re
from pathlib import Path

from experiments.lib.shared_data import BERT_VOCAB, WIKI

BERT = "bert-uncased"
_TRAINED = re.compile(r"(cased|uncased)-(\d+)")


def check_name(name: str) -> str:
    if name != BERT and not _TRAINED.fullmatch(name):
        raise ValueError(f"vocabulary {name!r}: expected {BERT} or cased-N / uncased-N (N the size)")
    return name


def tokenizer_path(name: str, work: Path) -> Path:
    """The tokenizer of vocabulary `name`: BERT's vocab.txt, or one trained into work/vocab/NAME once."""
    if check_name(name) == BERT:
        return BERT_VOCAB
    out = work / "vocab" / name
    if not (out / "tokenizer.json").is_file():
        from electra.training.data.tokenizer_train import train_tokenizer_dir

        match = _TRAINED.fullmatch(name)
        assert match is not None
        print(f"training the {name} vocabulary on {WIKI}", flush=True)
        cased = match.group(1) == "cased"
        train_tokenizer_dir([str(WIKI)], out, overwrite=True, vocab_size=int(match.group(2)), cased=cased)
    return out
