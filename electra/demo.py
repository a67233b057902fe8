"""The main job, end to end on the embedded demo corpus, with no download and no input (`electra demo`).

Every stage writes into the work directory and is skipped when its output is already there and valid, so a
second run picks up where the first stopped (an interrupted pre-training resumes from its checkpoint). Stages:
demo corpus -> tokenizer -> packed pre-training data -> a few minutes of pre-training (tiny model, CPU) ->
fused ONNX bundle -> an example the model is checked on -> the server on it, with a ready-to-paste curl for
/detect on that example.

The example: the demo model is trained on Python docstrings, so it is shown a docstring-like sentence with one
word swapped for another of the same kind (a noun for a noun, ...). `swap_candidates` makes every such swap of
a fixed list of sentences written for this (none of them is in the demo corpus), `choose_example` scores
them with the bundle through the server's own runtime and picks the one whose swapped word the model flags
most clearly with no original word flagged, and says plainly when the model flags none. The choice is
deterministic for a bundle and saved in the work directory (example.json) with its scores.

It sits above every stage (like the CLI), so it may import all of them; nothing imports it but the CLI.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from electra.errors import InputError
from electra.files import (
    CHECKPOINTS_DIR,
    CONFIG_JSON,
    DISCRIMINATOR_DIR,
    MODEL_SAFETENSORS,
    PYTORCH_MODEL_BIN,
)
from electra.logs import say
from electra.serving.engine.results import DEFAULT_THRESHOLD
from electra.threads import use_free_cores

# The demo model: ELECTRA's tiny preset, batch 32, lr 5e-4 with a 10% warm-up. On 2 CPU cores, on the 2.6 MB
# corpus of the pinned PyTorch docstrings, 600 steps took about 3.3 minutes and the whole demo 3 min 45 s; the
# discriminator ended above the all-original baseline (0.891 vs 0.853) and flagged the swapped word in 204 to
# 214 of the 368 example swaps (two runs: the tokenizer trainer breaks ties in hash-map order, runs differ).
DEMO_SIZE = "tiny"
DEMO_LR = 5e-4
DEMO_BATCH = 32
DEMO_MODEL_NAME = "demo"
STAGES = 7
EXAMPLE_JSON = "example.json"
EXAMPLE_FORMAT = "electra-demo-example"
EXAMPLE_VERSION = 1
# What /detect calls replaced by default ("replaced": score >= threshold).
EXAMPLE_THRESHOLD = DEFAULT_THRESHOLD  # /detect's
EXAMPLE_SEED = 0
# Replacements tried per swappable word of each sentence.
EXAMPLE_SWAPS_PER_WORD = 4

# Docstring-like sentences in the style of the demo corpus (written for the demo: none of them is in the
# corpus, so the model has not seen them). No quotes or apostrophes: the printed curl stays a plain -d '...'.
EXAMPLE_SENTENCES: tuple[str, ...] = (
    "Raise an exception if the file does not exist.",
    "Returns a new tensor with the same data but a different shape.",
    "Open the file in binary mode and return a stream of bytes.",
    "Close the socket and release all of its resources.",
    "Return a sorted list of the keys in the dictionary.",
    "Computes the gradient of the loss with respect to every parameter.",
    "Load the model weights from the given checkpoint directory.",
    "Split the string into a list of words separated by whitespace.",
    "Moves all parameters and buffers of the module to the given device.",
    "The default value is used when no argument is passed.",
    "Read the configuration file and return a dictionary of options.",
    "Wait until the thread has finished and return its result.",
    "Create a temporary directory that is removed when the context exits.",
    "Convert the input array to a tensor of the requested type.",
    "Append an item to the end of the queue.",
    "Returns the number of elements in the tensor.",
    "Write the buffer to disk and flush the underlying stream.",
    "Set the random seed so that every run produces the same numbers.",
    "This function is called once for every batch of training data.",
    "Print a short summary of the model to the standard output.",
)
# The words a swap may replace, by kind (part of speech and form, so a swapped sentence stays grammatical and
# only its meaning gives the swap away); a word is replaced by another of its kind: words of the domain and
# everyday words alike.
SWAP_WORDS: dict[str, tuple[str, ...]] = {
    "noun": (
        "tensor", "file", "socket", "dictionary", "gradient", "loss", "model", "checkpoint", "directory",
        "string", "module", "device", "value", "thread", "result", "context", "array", "type", "item",
        "queue", "buffer", "disk", "stream", "seed", "batch", "summary", "shape", "list", "function",
        "argument", "output", "river", "garden", "kitchen", "banana", "horse", "castle", "guitar", "sandwich",
        "mountain", "pillow", "umbrella", "elephant", "bicycle", "forest", "piano", "carrot",
    ),
    "nouns": (
        "resources", "keys", "words", "parameters", "buffers", "options", "elements", "numbers", "weights",
        "bytes", "apples", "birds", "flowers", "shoes", "clouds", "songs", "tomatoes", "horses", "cookies",
    ),
    "verb": (
        "raise", "open", "close", "release", "return", "load", "split", "read", "wait", "create", "convert",
        "append", "write", "flush", "set", "print", "exist", "paint", "cook", "sing", "bake", "dance", "swim",
        "sneeze", "whistle", "knit",
    ),
    "verbs": (
        "returns", "computes", "moves", "exits", "produces", "sings", "dances", "paints", "bakes", "swims",
    ),
    "adj": (
        "new", "same", "different", "binary", "sorted", "given", "default", "temporary", "input", "requested",
        "underlying", "random", "short", "standard", "purple", "hungry", "happy", "sleepy", "delicious",
        "wooden", "angry", "fluffy", "noisy", "juicy",
    ),
}  # fmt: skip


@dataclass
class DemoConfig:
    workdir: Path = Path("electra-demo")
    vocab_size: int = 16384
    max_seq_len: int = 128
    corpus_mb: int | None = None  # a cap on the corpus; None: all the docstrings (2.6 MB from torch 2.13.0)
    steps: int = 600
    fresh: bool = False
    workers: int = 1
    progress: bool = False


@dataclass
class DemoPaths:
    """Where each stage's output lives inside the work directory."""

    root: Path

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    @property
    def tokenizer(self) -> Path:
        return self.root / "tokenizer"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def run(self) -> Path:
        return self.root / "pretrain"

    @property
    def discriminator(self) -> Path:
        return self.run / DISCRIMINATOR_DIR

    @property
    def bundle(self) -> Path:
        return self.root / "bundle"


@dataclass(frozen=True)
class DemoBuild:
    bundle: Path
    example: DemoExample


def build_demo(cfg: DemoConfig) -> DemoBuild:
    """Stages 1-6: the bundle, and the example it was checked on."""
    paths = DemoPaths(Path(cfg.workdir))
    if paths.root.exists() and not paths.root.is_dir():
        raise InputError(f"--workdir {paths.root} exists and is not a directory")
    start = time.perf_counter()
    _stage(1, "demo corpus")
    corpus = _corpus(paths, cfg)
    _stage(2, "tokenizer")
    _tokenizer(paths, corpus, cfg)
    _stage(3, "pre-training data")
    max_seq_len = _data(paths, corpus, cfg)
    _stage(4, f"pre-training ({DEMO_SIZE} model, {cfg.steps} steps)")
    retrained = _pretrain_stage(paths, cfg)
    _stage(5, "fused ONNX bundle")
    _bundle(paths, max_seq_len, reuse=not retrained)
    _stage(6, "an example: a docstring-like sentence with one word swapped, checked with the model")
    example = _example_stage(paths, fresh=cfg.fresh)
    _say(f"built in {time.perf_counter() - start:.0f} s")
    return DemoBuild(paths.bundle, example)


def check_can_serve_demo(host: str, port: int) -> None:
    """The serve extra installed and the port free, checked before the minutes of building: InputError."""
    try:
        from electra.serving.http.server import check_can_serve
    except ImportError as e:
        raise InputError(
            f"serving needs the serve extra ({e.name} is missing): pip install -e '.[serve]', "
            "or pass --no-serve"
        ) from None
    check_can_serve(host, port)


def serve_demo(bundle: Path, host: str, port: int, example: str) -> int:
    """Stage 7: serve the bundle until Ctrl-C / SIGTERM, printing a curl on `example` once it is ready."""
    _stage(7, f"serving on http://{host}:{port}")
    try:
        from electra.serving.http.server import serve
        from electra.serving.settings import ModelSpec, ServeSettings
    except ImportError as e:
        raise InputError(
            f"serving needs the serve extra ({e.name} is missing): pip install -e '.[serve]'"
        ) from None

    shown = "localhost" if host in ("0.0.0.0", "::", "127.0.0.1") else host
    url = f"http://{shown}:{port}"
    body = json.dumps({"text": example, "level": "word"})

    def ready() -> None:
        print(
            f"\nelectra demo is serving {url}  (Ctrl-C stops it)\n"
            f"  open {url}/ in a browser, or try:\n\n"
            f"  curl -s {url}/detect -H 'Content-Type: application/json' -d {shlex.quote(body)} \\\n"
            "    | python -m json.tool\n\n"
            f"  API docs: {url}/schema   metrics: {url}/metrics\n",
            flush=True,
        )

    settings = ServeSettings(
        models=(ModelSpec(DEMO_MODEL_NAME, bundle),), host=host, port=port, example=example
    )
    serve(settings, on_ready=ready)
    return 0


def serve_command(bundle: Path, example: str) -> str:
    """The `electra serve` command line that serves the demo bundle with the page pre-filled like the demo."""
    model = shlex.quote(f"{DEMO_MODEL_NAME}={bundle}")
    return f"electra serve --model {model} --example {shlex.quote(example)}"


# ---------------------------------------------------------------------------------------------------------
# The example


@dataclass(frozen=True)
class Swap:
    """One candidate: `text` is `original` with `replaced` (at text[start:end]) swapped in for `word`."""

    text: str
    original: str
    word: str  # the original word
    replaced: str  # the word swapped in
    start: int
    end: int


# (word text, start, end, replaced score) for each word of a text, as /detect answers with "level": "word".
WordScores = list[tuple[str, int, int, float]]
Scorer = Callable[[list[str]], list[WordScores]]

_WORD_RE = re.compile(r"[A-Za-z]+")


def swap_candidates(
    sentences: Sequence[str] = EXAMPLE_SENTENCES,
    words: dict[str, tuple[str, ...]] = SWAP_WORDS,
    seed: int = EXAMPLE_SEED,
    per_word: int = EXAMPLE_SWAPS_PER_WORD,
) -> list[Swap]:
    """Every sentence with one of its swappable words replaced by another word of the same kind, `per_word`
    replacements per word drawn with `seed`: the same list on every machine. After "a" or "an" the
    replacement keeps the article right; a word already in the sentence is never put in."""
    kind_of = {word: kind for kind, members in words.items() for word in members}
    rng = random.Random(f"electra-demo-example-{seed}")
    swaps: list[Swap] = []
    for sentence in sentences:
        matches = list(_WORD_RE.finditer(sentence))
        present = {m.group().lower() for m in matches}
        for i, m in enumerate(matches):
            word = m.group()
            kind = kind_of.get(word.lower())
            if kind is None:
                continue
            article = matches[i - 1].group().lower() if i else ""
            options = [
                w
                for w in words[kind]
                if w not in present and (article not in ("a", "an") or (article == "an") == (w[0] in "aeiou"))
            ]
            for new in rng.sample(options, min(per_word, len(options))):
                new = new.capitalize() if word[0].isupper() else new
                text = sentence[: m.start()] + new + sentence[m.end() :]
                swaps.append(Swap(text, sentence, word, new, m.start(), m.start() + len(new)))
    return swaps


@dataclass(frozen=True)
class DemoExample:
    """The example the demo shows, with what the model made of it."""

    text: str
    original: str
    word: str  # the original word
    replaced: str  # the word swapped in
    start: int  # text[start:end] is the swapped-in word
    end: int
    score: float  # the model's replaced score for the swapped-in word
    words: list[tuple[str, int, int, float]]  # every word of `text`: text, start, end, replaced score
    checked: int  # swapped sentences scored
    detected: int  # ... in which the swapped word is flagged
    clean: int  # ... and no original word is
    threshold: float = EXAMPLE_THRESHOLD

    @property
    def flagged(self) -> bool:
        """Whether the model flags the swapped word."""
        return self.score >= self.threshold

    @property
    def originals(self) -> list[tuple[str, float]]:
        """The original words (all but the swapped one) with their scores."""
        return [(w, sc) for w, start, end, sc in self.words if not (start < self.end and self.start < end)]

    @property
    def false_flags(self) -> list[tuple[str, float]]:
        """Original words the model flags."""
        return [(w, sc) for w, sc in self.originals if sc >= self.threshold]

    def report(self) -> list[str]:
        """What the demo says about it (one line each)."""
        top = max(self.originals, key=lambda ws: ws[1], default=("", 0.0))
        lines = [
            f"swapped one word in {self.checked} docstring-like sentences the model has not seen: it flags "
            f"the swapped word in {self.detected} of them (in {self.clean} with no original word flagged "
            "besides)",
            f'example: "{self.text}"',
        ]
        swap = f'"{self.word}" swapped for "{self.replaced}": replaced score {self.score:.2f}'
        if self.flagged and not self.false_flags:
            lines.append(f'  {swap} (flagged); no original word flagged (highest: "{top[0]}" {top[1]:.2f})')
        elif self.flagged:
            flags = ", ".join(f'"{w}" {sc:.2f}' for w, sc in self.false_flags)
            lines.append(f"  {swap} (flagged); original words flagged too: {flags}")
        else:
            lines.append(
                f"  {swap}, NOT flagged (threshold {self.threshold}): the demo model failed this check, "
                "it flags no swapped word in these sentences; pre-train it longer "
                "(electra demo --fresh --steps 2000)"
            )
        return lines


def _example_key(swap: Swap, words: WordScores, threshold: float) -> tuple[bool, int, float]:
    """Sort key, best first: the swapped word flagged, fewest original words flagged, widest margin between
    the swapped word's score and the highest original word's."""
    score = _swapped_score(swap, words)
    others = [sc for _, start, end, sc in words if not _overlaps(start, end, swap)]
    false_flags = sum(sc >= threshold for sc in others)
    return (score < threshold, false_flags, -(score - max(others, default=0.0)))


def _overlaps(start: int, end: int, swap: Swap) -> bool:
    return start < swap.end and swap.start < end


def _swapped_score(swap: Swap, words: WordScores) -> float:
    return max((sc for _, start, end, sc in words if _overlaps(start, end, swap)), default=0.0)


def choose_example(
    scorer: Scorer, swaps: Sequence[Swap] | None = None, threshold: float = EXAMPLE_THRESHOLD
) -> DemoExample:
    """Score every swap and pick the best (see `_example_key`; the first in order among equals)."""
    swaps = list(swap_candidates() if swaps is None else swaps)
    if not swaps:
        raise ValueError("no swapped sentences to choose from")
    scored = scorer([swap.text for swap in swaps])
    keys = [_example_key(swap, words, threshold) for swap, words in zip(swaps, scored, strict=True)]
    best = min(range(len(swaps)), key=lambda i: keys[i])
    swap, words = swaps[best], scored[best]
    return DemoExample(
        text=swap.text,
        original=swap.original,
        word=swap.word,
        replaced=swap.replaced,
        start=swap.start,
        end=swap.end,
        score=_swapped_score(swap, words),
        words=list(words),
        checked=len(swaps),
        detected=sum(not key[0] for key in keys),
        clean=sum(not key[0] and key[1] == 0 for key in keys),
        threshold=threshold,
    )


def bundle_scorer(bundle: Path, batch_size: int = 32) -> Scorer:
    """Word-level replaced scores from a discriminator bundle, through the server's own inference core (as
    /detect with truncate=true scores them), without a server."""
    from electra.serving.engine.local import local_inference, run
    from electra.serving.engine.requests import Detect
    from electra.serving.engine.runtime import ModelRunner

    runner = ModelRunner(DEMO_MODEL_NAME, bundle)
    core = local_inference({runner.name: runner})

    async def detect(texts: list[str]) -> list[WordScores]:
        out: list[WordScores] = []
        for i in range(0, len(texts), batch_size):
            request = Detect(texts[i : i + batch_size], EXAMPLE_THRESHOLD, "word", truncate=True)
            _, results = await core.detect(request, runner)
            out += [[(t.text, t.start, t.end, t.score) for t in r.tokens] for r in results]
        return out

    return lambda texts: run(detect(texts))


def _candidates_fingerprint() -> str:
    spec = [EXAMPLE_SENTENCES, SWAP_WORDS, EXAMPLE_SEED, EXAMPLE_SWAPS_PER_WORD, EXAMPLE_THRESHOLD]
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _bundle_fingerprint(bundle: Path) -> str:
    from electra.files import MODEL_ONNX

    return hashlib.sha256((bundle / MODEL_ONNX).read_bytes()).hexdigest()


def save_example(path: Path, example: DemoExample, bundle_sha256: str) -> None:
    from electra.atomic import atomic_write_text

    record = {
        "format": EXAMPLE_FORMAT,
        "version": EXAMPLE_VERSION,
        "bundle_sha256": bundle_sha256,
        "candidates_sha256": _candidates_fingerprint(),
        **dataclasses.asdict(example),
        "flagged": example.flagged,
        "false_flags": example.false_flags,
    }
    atomic_write_text(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def load_example(path: Path, bundle_sha256: str) -> DemoExample | None:
    """The saved example, or None when it is missing, unreadable, or for another bundle or candidate list."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if (
            record.get("format") != EXAMPLE_FORMAT
            or record.get("version") != EXAMPLE_VERSION
            or record.get("bundle_sha256") != bundle_sha256
            or record.get("candidates_sha256") != _candidates_fingerprint()
        ):
            return None
        fields = {f.name for f in dataclasses.fields(DemoExample)}
        example = DemoExample(**{k: v for k, v in record.items() if k in fields})
        words = [(str(w), int(start), int(end), float(sc)) for w, start, end, sc in example.words]
        return dataclasses.replace(example, words=words)
    except (OSError, ValueError, TypeError, AttributeError):
        return None


# Two fresh builds on one machine differ a little, and nothing we pass the trainer can stop it.
NOT_BIT_FOR_BIT = (
    "a fresh build can give slightly different figures and another example: the tokenizers library's trainer "
    "breaks ties between equally frequent merges in hash-map order (huggingface/tokenizers#1794)"
)


def _example_stage(paths: DemoPaths, fresh: bool = False) -> DemoExample:
    path = paths.root / EXAMPLE_JSON
    bundle_sha256 = _bundle_fingerprint(paths.bundle)
    example = None if fresh else load_example(path, bundle_sha256)
    if example is not None:
        _say(f"reusing {path}")
    else:
        example = choose_example(bundle_scorer(paths.bundle))
        save_example(path, example, bundle_sha256)
    for line in example.report():
        _say(line)
    _say(NOT_BIT_FOR_BIT)
    return example


def _corpus(paths: DemoPaths, cfg: DemoConfig) -> Path:
    from electra.training.data.demo_corpus import DEFAULT_MAX_BYTES, cached_demo_corpus

    if cfg.fresh and paths.corpus.exists():
        shutil.rmtree(paths.corpus)
    max_bytes = DEFAULT_MAX_BYTES if cfg.corpus_mb is None else cfg.corpus_mb * 1_000_000
    return cached_demo_corpus(paths.corpus, progress=cfg.progress, max_bytes=max_bytes)


def _tokenizer(paths: DemoPaths, corpus: Path, cfg: DemoConfig) -> None:
    from electra.atomic import atomic_dir
    from electra.tokenizer import load_tokenizer, save_tokenizer
    from electra.training.data.corpus import iter_corpus_lines
    from electra.training.data.tokenizer_train import train_tokenizer, vocabulary_line

    if not cfg.fresh and _valid(lambda: load_tokenizer(paths.tokenizer)):
        _say(f"reusing {paths.tokenizer}")
        return
    tok = train_tokenizer(iter_corpus_lines([corpus]), vocab_size=cfg.vocab_size, show_progress=cfg.progress)
    with atomic_dir(paths.tokenizer, overwrite=True) as tmp:
        save_tokenizer(tok, tmp)
    _say(f"wrote {paths.tokenizer}: {vocabulary_line(tok.get_vocab_size(), cfg.vocab_size)}")


def _data(paths: DemoPaths, corpus: Path, cfg: DemoConfig) -> int:
    """Prepare (or reuse) the packed data; returns its maximum sequence length."""
    from electra.training.data.dataset import PretrainingData
    from electra.training.data.prepare import PrepareConfig, prepare_dataset

    if not cfg.fresh and _valid(lambda: PretrainingData.open(paths.data)):
        _say(f"reusing {paths.data}")
    else:
        summary = prepare_dataset(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(paths.tokenizer),
                out=paths.data,
                max_seq_len=cfg.max_seq_len,
                workers=cfg.workers,
                overwrite=True,
                progress=cfg.progress,
            )
        )
        for line in summary.report_lines():
            _say(line)
    data = PretrainingData.open(paths.data)
    _say(f"data: {len(data.train):,} training examples of {data.max_seq_len} tokens in {paths.data}")
    return data.max_seq_len


def _pretrain_stage(paths: DemoPaths, cfg: DemoConfig) -> bool:
    """Pre-train unless a finished discriminator is there; True when it (re)trained."""
    from electra.training.pretrain.trainer import PretrainConfig, pretrain

    if not cfg.fresh and _valid(lambda: _check_discriminator(paths.discriminator)):
        _say(f"reusing {paths.discriminator}")
        return False
    resume = not cfg.fresh and (paths.run / CHECKPOINTS_DIR).is_dir()
    use_free_cores("pre-training", "electra.demo")
    result = pretrain(
        PretrainConfig(
            data=paths.data,
            out=paths.run,
            size=DEMO_SIZE,
            steps=cfg.steps,
            batch_size=DEMO_BATCH,
            lr=DEMO_LR,
            eval_every=max(1, cfg.steps // 4),
            checkpoint_every=max(1, cfg.steps // 4),
            keep_checkpoints=1,
            resume=resume,
            overwrite=not resume,
            device="cpu",
            progress=cfg.progress,
        )
    )
    if result["stopped"]:
        raise InputError(f"pre-training stopped at step {result['step']}; run `electra demo` again to resume")
    last = result.get("last") or {}
    if last:
        _say(
            f"pre-trained {cfg.steps} steps: discriminator accuracy {last.get('disc_accuracy', 0):.3f} "
            f"(all-original baseline {last.get('all_original_accuracy', 0):.3f}), replaced-token recall "
            f"{last.get('disc_recall') or 0:.3f}"
        )
    return True


def _bundle(paths: DemoPaths, max_seq_len: int, reuse: bool) -> None:
    from electra.bundle import read_bundle
    from electra.onnx.export import export_bundle

    if reuse and _valid(lambda: read_bundle(paths.bundle)):
        _say(f"reusing {paths.bundle}")
        return
    meta = export_bundle(
        paths.discriminator, paths.bundle, precision="fp32", max_seq_len=max_seq_len, overwrite=True
    )
    _say(f"wrote {paths.bundle}: {meta['fused_operators']['Attention']} fused Attention layers")


def _check_discriminator(path: Path) -> None:
    from electra.config import ElectraConfig

    if not (path / MODEL_SAFETENSORS).is_file() and not (path / PYTORCH_MODEL_BIN).is_file():
        raise FileNotFoundError(path)
    ElectraConfig.from_json_file(path / CONFIG_JSON)


def _valid(open_fn: Callable[[], object]) -> bool:
    """Whether a stage's output opens; any failure means "build it again"."""
    try:
        open_fn()
    except Exception:
        return False
    return True


def _stage(n: int, title: str) -> None:
    _say(f"[{n}/{STAGES}] {title}")


def _say(message: str) -> None:
    say("electra.demo", message)
