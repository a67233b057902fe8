"""Replaced-token detection on held-out English (WikiText-2), for a pre-trained discriminator.

Two measures, both ROC AUC (1.0 perfect, 0.5 chance):

* `generator_auc`: 15% of the tokens masked and filled by the run's own generator, as in pre-training; every
  real token of the held-out text scored (needs the generator next to the discriminator);
* `swap_auc`: one word per sentence swapped for another word of the same kind (same part of speech, from a
  lexicon built from CoNLL-2003's tags), as the demo checks on docstrings; every word scored (the maximum over
  its pieces, as `/detect` with "level": "word" does), the swapped word the positive. Also `swap_detected`
  (the swapped word scores at least 0.5), `swap_clean` (... and no other word does) and `swap_top1` (the
  swapped word scores highest in its sentence).

WikiText-2 articles whose title is also an article of the pre-training corpus are left out. The command is
experiments/heldout_detection.py.
"""

from __future__ import annotations

import gzip
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from electra.atomic import atomic_write_text
from experiments.lib.shared_data import CONLL_TRAIN, WIKITEXT
from experiments.lib.shared_data import WIKI as WIKI_ARTICLES

WIKI = WIKI_ARTICLES.parent

# Penn Treebank tags whose words are swapped for one another: a noun for a noun, a past-tense verb for one...
SWAP_TAGS = ("NN", "NNS", "VB", "VBD", "VBG", "VBN", "VBZ", "JJ", "RB")
_TITLE = re.compile(r'<doc [^>]*title="([^"]*)"')
_WORD = re.compile(r"[A-Za-z]+")
# WikiText's tokenization, undone: " @-@ " is a hyphen inside a word, " @,@ " a digit group separator, ...
_DETOK = [
    (re.compile(r" @([-,.])@ "), r"\1"),
    (re.compile(r" ([.,;:!?%)\]}])"), r"\1"),
    (re.compile(r"([(\[{$]) "), r"\1"),
    (re.compile(r" (n't|'s|'re|'ve|'m|'ll|'d)\b"), r"\1"),
    (re.compile(r'" (.*?) "'), r'"\1"'),
]


def detokenize(line: str) -> str:
    for pattern, repl in _DETOK:
        line = pattern.sub(repl, line)
    return line.strip()


def wikitext_articles(path: Path) -> list[tuple[str, list[str]]]:
    """(title, paragraphs) of each article of a WikiText file, paragraphs detokenized, headings dropped."""
    articles: list[tuple[str, list[str]]] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line:
                continue
            if line.startswith("= ") and line.endswith(" =") and not line.startswith("= ="):
                articles.append((line.strip("= ").strip(), []))
            elif not line.startswith("=") and articles:
                articles[-1][1].append(detokenize(line))
    return articles


def corpus_titles(wiki_dir: Path = WIKI) -> set[str]:
    titles: set[str] = set()
    for path in sorted(wiki_dir.glob("*/*.gz")):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            titles.update(m.group(1) for line in f for m in [_TITLE.search(line)] if m)
    return titles


def heldout_paragraphs(splits: tuple[str, ...] = ("valid", "test")) -> list[str]:
    """WikiText-2 paragraphs, without their sentences that hold an <unk>, from articles the pre-training
    corpus does not have."""
    seen = corpus_titles()
    out = []
    for split in splits:
        for title, paragraphs in wikitext_articles(WIKITEXT / f"{split}.txt.gz"):
            if title in seen:
                continue
            for p in paragraphs:
                kept = [s for s in split_sentences(p) if "<unk>" not in s]
                if kept:
                    out.append(" ".join(kept))
    return out


def split_sentences(paragraph: str) -> list[str]:
    return re.split(r"(?<=[.!?])\s+(?=[A-Z\"])", paragraph)


def sentences(paragraphs: list[str], min_words: int = 8, max_words: int = 40) -> list[str]:
    out = []
    for p in paragraphs:
        for s in split_sentences(p):
            n = len(s.split())
            if min_words <= n <= max_words and s[-1:] in ".!?":
                out.append(s)
    return out


def pos_lexicon(path: Path = CONLL_TRAIN, min_count: int = 3, min_share: float = 0.9) -> dict[str, str]:
    """Lower-case word -> its tag, for words CoNLL-2003 tags one way (min_share of min_count or more uses)."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isalpha() and parts[0] != "-DOCSTART-":
            counts[parts[0].lower()][parts[1]] += 1
    lexicon = {}
    for word, tags in counts.items():
        tag, n = tags.most_common(1)[0]
        total = sum(tags.values())
        if total >= min_count and n / total >= min_share and tag in SWAP_TAGS and len(word) > 2:
            lexicon[word] = tag
    return lexicon


@dataclass(frozen=True)
class Swap:
    text: str
    start: int  # text[start:end] is the swapped-in word
    end: int


def make_swaps(sents: list[str], lexicon: dict[str, str], limit: int, seed: int = 0) -> list[Swap]:
    """One same-kind swap in each of up to `limit` sentences (the same list for a seed on every machine)."""
    pools: dict[str, list[str]] = defaultdict(list)
    for word, tag in sorted(lexicon.items()):
        pools[tag].append(word)
    rng = random.Random(seed)
    order = list(range(len(sents)))
    rng.shuffle(order)
    swaps = []
    for i in order:
        sent = sents[i]
        matches = list(_WORD.finditer(sent))
        present = {m.group().lower() for m in matches}
        eligible = [
            (j, m)
            for j, m in enumerate(matches)
            if m.group().lower() in lexicon and not m.group()[0].isupper()
        ]
        if not eligible:
            continue
        j, m = rng.choice(eligible)
        article = matches[j - 1].group().lower() if j else ""
        options = [
            w
            for w in pools[lexicon[m.group().lower()]]
            if w not in present and (article not in ("a", "an") or (article == "an") == (w[0] in "aeiou"))
        ]
        new = rng.choice(options)
        swaps.append(Swap(sent[: m.start()] + new + sent[m.end() :], m.start(), m.start() + len(new)))
        if len(swaps) == limit:
            break
    return swaps


def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a positive scores above a negative), ties counted half (Mann-Whitney U)."""
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    scores = np.concatenate([pos, neg])
    ranks = np.empty(len(scores))
    order = np.argsort(scores, kind="mergesort")
    ranks[order] = np.arange(1, len(scores) + 1)
    # Average ranks over ties.
    sorted_scores = scores[order]
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    for f, c in zip(first, counts, strict=True):
        if c > 1:
            ranks[order[f : f + c]] = f + (c + 1) / 2
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return float(u / (len(pos) * len(neg)))


def word_scores(
    model: Any, tok: Any, texts: list[str], batch_size: int = 64
) -> list[list[tuple[int, int, float]]]:
    """(start, end, replaced probability) of each word of each text: the maximum over its pieces."""
    import torch

    from electra.padding import pad_rows

    out = []
    model.eval()
    for lo in range(0, len(texts), batch_size):
        encs = tok.encode_batch(texts[lo : lo + batch_size])
        arrays = pad_rows([e.ids for e in encs], [e.type_ids for e in encs], 0)
        batch = {k: torch.from_numpy(v) for k, v in arrays.items()}
        with torch.no_grad():
            probs = torch.sigmoid(model(**batch)).numpy()
        for e, p in zip(encs, probs, strict=True):
            words: dict[int, tuple[int, int, float]] = {}
            for i, (wid, (s, t)) in enumerate(zip(e.word_ids, e.offsets, strict=True)):
                if wid is None or t <= s:
                    continue
                ws, _, score = words.get(wid, (s, t, 0.0))
                words[wid] = (min(ws, s), t, max(score, float(p[i])))
            out.append(list(words.values()))
    return out


def swap_detection(disc_dir: Path, swaps: list[Swap], threshold: float = 0.5) -> dict[str, float]:
    from electra.hf_format import load_hf_dir
    from electra.tokenizer import load_tokenizer

    model = load_hf_dir(disc_dir, kind="discriminator")
    tok = load_tokenizer(disc_dir)
    pos, neg = [], []
    detected = clean = top1 = 0
    for swap, words in zip(swaps, word_scores(model, tok, [s.text for s in swaps]), strict=True):
        hit = [sc for s, t, sc in words if s < swap.end and swap.start < t]
        other = [sc for s, t, sc in words if not (s < swap.end and swap.start < t)]
        if not hit:
            continue
        pos.append(max(hit))
        neg.extend(other)
        detected += max(hit) >= threshold
        clean += max(hit) >= threshold and all(sc < threshold for sc in other)
        top1 += max(hit) > max(other, default=0.0)
    n = len(pos)
    return {
        "swap_auc": roc_auc(np.array(pos), np.array(neg)),
        "swap_detected": detected / n,
        "swap_clean": clean / n,
        "swap_top1": top1 / n,
        "swap_sentences": n,
    }


def generator_detection(
    run_dir: Path, data_dir: Path, batches: int = 40, batch_size: int = 32
) -> dict[str, float]:
    """AUC of the discriminator on held-out data corrupted by the run's own generator, as in pre-training."""
    import torch

    from electra.hf_format import load_hf_dir
    from electra.training.data.dataset import PretrainingData
    from electra.training.pretrain.diagnostics.detection_auc import (
        BINS,
        auc_from_histograms,
        logit_histograms,
    )
    from electra.training.pretrain.objective import ObjectiveConfig, electra_step
    from electra.training.pretrain.state.loader import load_rows
    from electra.training.pretrain.trainer import data_tokenizer

    disc = load_hf_dir(run_dir / "discriminator", kind="discriminator")
    gen = load_hf_dir(run_dir / "generator", kind="generator")
    data = PretrainingData.open(data_dir)
    _, specials = data_tokenizer(data)
    split = data.train
    hist = torch.zeros(2, BINS)
    replaced = tokens = 0.0
    with torch.no_grad():
        for b in range(batches):
            lo = b * batch_size
            if lo >= len(split):
                break
            batch = load_rows(split, np.arange(lo, min(lo + batch_size, len(split))), "cpu")
            rng = torch.Generator().manual_seed(1000 + b)
            out = electra_step(gen, disc, batch, specials, ObjectiveConfig(), rng)
            hist += logit_histograms(out.disc_logits, out.disc_labels)
            replaced += float(out.stats["replaced_actual_pos"])
            tokens += float(out.stats["num_tokens"])
    return {"generator_auc": auc_from_histograms(hist), "generator_replaced_fraction": replaced / tokens}


def write_heldout_corpus(path: Path) -> Path:
    """The held-out paragraphs as a text corpus (a blank line between paragraphs), for `data prepare`."""
    atomic_write_text(path, "\n\n".join(heldout_paragraphs()) + "\n")
    return path


def prepare_heldout(work: Path, tokenizer: Path) -> Path:
    """The held-out text prepared as pre-training data with `tokenizer` (reused when already there)."""
    from electra.training.data.prepare import PrepareConfig, prepare_dataset

    out = work / "wikitext2-data"
    if not (out / "manifest.json").is_file():
        corpus = write_heldout_corpus(work / "wikitext2-heldout.txt")
        prepare_dataset(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(tokenizer),
                out=out,
                max_seq_len=128,
                val_fraction=0.0,
                workers=1,
                progress=False,
            )
        )
    return out


def detection(run_dir: Path, work: Path, swaps: int = 2000) -> dict[str, float]:
    """Both measures for a run directory (discriminator/ and generator/): the swaps, and the generator's
    replacements on the held-out text prepared with the run's tokenizer under `work` (one per vocabulary)."""
    disc = run_dir / "discriminator"
    result = swap_detection(disc, make_swaps(sentences(heldout_paragraphs()), pos_lexicon(), swaps))
    result.update(generator_detection(run_dir, prepare_heldout(work, disc)))
    return result
