"""Where the public data the experiments read lives: beside the repository, never inside it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
WIKI = SHARED / "corpus" / "enwiki-2015-wikiextractor" / "AA"
WIKITEXT = SHARED / "corpus" / "wikitext-2"
BERT_VOCAB = SHARED / "models" / "bert-uncased-vocab" / "vocab.txt"
GLUE = SHARED / "glue"
CONLL = SHARED / "ner" / "conll2003"
CONLL_TRAIN = CONLL / "train.txt"


def missing(*paths: Path) -> list[Path]:
    """Those of `paths` that are absent: an experiment skips, saying which, rather than fail."""
    return [p for p in paths if not p.exists()]
