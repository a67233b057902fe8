"""`electra evaluate` and `electra predict` for a fine-tuned tagger (a token-classification directory)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from electra.errors import InputError
from electra.tokenizer import special_ids
from electra.training.device import resolve_device
from electra.training.finetune.encoding import max_len_for
from electra.training.finetune.model_dir import load_model_tokenizer, load_trained
from electra.training.finetune.tag_encoding import encode_sentences, eval_max_len, word_tags
from electra.training.finetune.tag_metrics import require_seqeval, tag_metrics
from electra.training.finetune.tag_trainer import gold_tags, predict_token_logits
from electra.training.finetune.tagging_data import TaggedSentence, check_known, read_tagged, write_predictions
from electra.training.finetune.tagging_tasks import CORPORA, TaggingTask, corpus_file, task_for_labels


@dataclass
class Tagger:
    """A fine-tuned tagger ready to run."""

    model: nn.Module
    tokenizer: Any
    pad_id: int
    device: torch.device
    task: TaggingTask

    def predict(self, sentences: list[TaggedSentence], max_seq_len: int) -> list[list[str]]:
        """Each word's IOB2 tag (fp32 on any device)."""
        max_seq_len = max_len_for(max_seq_len, self.model.config.max_position_embeddings)
        limit = eval_max_len(self.model.config.max_position_embeddings, max_seq_len)
        data = encode_sentences(self.tokenizer, sentences, None, limit)
        logits = predict_token_logits(self.model, data, self.pad_id, self.device, nullcontext())
        return word_tags(logits, data, self.task.labels)


def load_tagger(model_dir: Path, task: str, scheme: str, device: str | None) -> Tagger:
    """The output directory of `electra finetune --task conll2003` (or `tags`) on `device`."""
    model = load_trained(model_dir, "tagger")
    tok = load_model_tokenizer(model_dir)
    labels = tuple(model.config.id2label[i] for i in range(model.config.num_labels))
    torch_device = resolve_device(device)
    return Tagger(
        model.to(torch_device), tok, special_ids(tok).pad, torch_device, task_for_labels(task, labels, scheme)
    )


def evaluate_tagger(
    model_dir: Path,
    task: str,
    *,
    data_dir: Path | None = None,
    dev: Path | None = None,
    tag_column: int = -1,
    scheme: str = "iob2",
    max_seq_len: int = 128,
    device: str | None = None,
) -> dict[str, dict[str, float]]:
    """seqeval metrics by split: a corpus's dev and test files in `data_dir`, or "dev" for the file `dev`."""
    require_seqeval()
    tagger = load_tagger(model_dir, task, scheme, device)
    if task in CORPORA:
        corpus = CORPORA[task]
        paths = {split: corpus_file(corpus, data_dir, split) for split in tagger.task.dev_splits}
        tag_column = corpus.tag_column
    elif dev is None:
        raise InputError(f"--task {task} needs --dev FILE to evaluate on")
    else:
        paths = {"dev": dev}
    results = {}
    for split, path in paths.items():
        sentences = read_tagged(path, tag_column=tag_column, scheme=tagger.task.scheme, labeled=True)
        check_known(sentences, tagger.task.labels, path)
        results[split] = tag_metrics(gold_tags(sentences), tagger.predict(sentences, max_seq_len))
    return results


def predict_tags(
    model_dir: Path,
    task: str,
    input_file: Path,
    out: Path,
    *,
    scheme: str = "iob2",
    max_seq_len: int = 128,
    device: str | None = None,
) -> int:
    """Tags for every word of `input_file` (CoNLL columns, word first, or JSONL), written to `out` in the
    input's form and the task's scheme; returns the number of sentences."""
    tagger = load_tagger(model_dir, task, scheme, device)
    sentences = read_tagged(input_file, scheme=tagger.task.scheme, labeled=False)
    write_predictions(out, sentences, tagger.predict(sentences, max_seq_len), tagger.task.scheme)
    return len(sentences)
