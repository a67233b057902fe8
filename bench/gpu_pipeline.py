"""A real run through every stage on the shared data: the Wikipedia sample to answers from a server.

    prepare    electra data prepare: the Wikipedia sample (WikiExtractor files) with BERT's uncased vocabulary
    pretrain   electra pretrain --stop-at HALF, then the same command with --resume to the end: the second
               leg must say it resumed from the first one's checkpoint, and metrics.jsonl must run on without
               a gap
    finetune   electra finetune --task sst2 on the first examples of SST-2's training set, one epoch
    export     electra export --precision fp16: the pre-trained discriminator and the SST-2 classifier
    serve      electra serve --device DEVICE with both bundles: /detect and /classify must answer 200 with
               well-formed results, on the device asked for

Each stage is a command with its own time limit (pre-training legs are stopped by SIGTERM, which checkpoints);
a stage whose input is missing is not run, with the reason. The results file is rewritten after every stage,
so a run stopped from outside keeps what it did. With --quick the same stages run at toy sizes (tiny model,
one corpus file, 200 SST-2 examples) for a CPU in a few minutes. --limit-scale X multiplies every stage's
limit (bench.gpu_suite passes its own: on a slow machine the suite's step and the stages in it stretch alike).

    python -m bench.gpu_pipeline --device cuda --work /tmp/pipeline --out bench/results/pipeline_cuda.json
    python -m bench.gpu_pipeline --device cpu --quick --work /tmp/pipeline --out /tmp/pipeline.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.benchlib import ROOT, SHARED_DATA, portable_path, result_header, run_limited, write_result
from electra.serving.process import ServerNotReady, free_port, serve_command, start_server

CORPUS = "corpus/enwiki-2015-wikiextractor/AA"
VOCAB = "models/bert-uncased-vocab/vocab.txt"
SST2 = "glue/SST-2"
DETECT_TEXT = "The chef cooked the river in the kitchen before dinner."
CLASSIFY_TEXTS = [
    "A gripping, beautifully acted and deeply moving film.",
    "A dull, lifeless and boring mess.",
]
# The served models' names: the pre-trained discriminator's bundle and the SST-2 classifier's.
MODELS = ("detect", "sst2")


@dataclass(frozen=True)
class Sizes:
    """How big each stage runs, and its time limit in seconds."""

    corpus_files: int | None  # None: every file
    val_fraction: float | None  # None: data prepare's default
    max_seq_len: int
    model: str
    batch_size: int
    steps: int
    train_examples: int
    limits: dict[str, float]


FULL = Sizes(
    corpus_files=None,
    val_fraction=None,
    max_seq_len=128,
    model="small",
    batch_size=128,
    steps=400,
    train_examples=4000,
    limits={"prepare": 25, "pretrain": 40, "finetune": 35, "export": 20, "serve": 25},
)
# The limits leave room for a loaded CI machine: the export of a classifier scores SST-2's dev set twice.
QUICK = Sizes(
    corpus_files=1,
    val_fraction=0.2,  # one file's 38 documents leave no validation split at the default
    max_seq_len=64,
    model="tiny",
    batch_size=16,
    steps=12,
    train_examples=200,
    limits={"prepare": 90, "pretrain": 150, "finetune": 150, "export": 180, "serve": 90},
)


class Pipeline:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.sizes = args, QUICK if args.quick else FULL
        self.work, self.shared = args.work, args.shared_data
        self.record: dict[str, Any] = {
            **result_header("gpu_pipeline"),
            "device_type": args.device,
            "quick": args.quick,
            "sizes": {k: v for k, v in vars(self.sizes).items() if k != "limits"},
            "command": " ".join(["python -m bench.gpu_pipeline", *sys.argv[1:]]),
            "stages": {},
        }

    # ------------------------------------------------------------------------------------------- stages

    def run(self) -> bool:
        missing = [p for p in (CORPUS, VOCAB, SST2) if not (self.shared / p).exists()]
        if missing:
            self.record["skipped"] = f"the shared data is not here: {', '.join(missing)} under <shared data>"
            self.save()
            return True
        for stage in (self.prepare, self.pretrain, self.finetune, self.export, self.serve):
            name = stage.__name__
            needs = {"pretrain": "prepare", "finetune": "pretrain", "export": "finetune", "serve": "export"}
            before = needs.get(name)
            if before and self.record["stages"][before]["status"] != "passed":
                self.record["stages"][name] = {"status": "not run", "reason": f"{before} did not pass"}
            else:
                self.record["stages"][name] = stage()
            self.save()
        return all(s["status"] == "passed" for s in self.record["stages"].values())

    def prepare(self) -> dict[str, Any]:
        files = sorted((self.shared / CORPUS).glob("wiki_*.gz"))[: self.sizes.corpus_files]
        val = [] if self.sizes.val_fraction is None else ["--val-fraction", str(self.sizes.val_fraction)]
        return self.electra(
            "prepare",
            ["data", "prepare", "--corpus", *map(str, files), "--tokenizer", str(self.shared / VOCAB)],
            ["--max-seq-len", str(self.sizes.max_seq_len), "--out", str(self.work / "data"), "--overwrite"],
            [*val, "--quiet"],
        )

    def pretrain(self) -> dict[str, Any]:
        s, run = self.sizes, self.work / "run"
        common = [
            "pretrain", "--data", str(self.work / "data"), "--out", str(run), "--device", self.args.device,
            "--size", s.model, "--batch-size", str(s.batch_size), "--steps", str(s.steps),
            "--eval-every", str(s.steps // 2), "--checkpoint-every", str(s.steps // 2),
            "--log-every", str(max(1, s.steps // 8)), "--quiet",
        ]  # fmt: skip
        first = self.electra("pretrain_leg1", common, ["--overwrite", "--stop-at", str(s.steps // 2)])
        second = self.electra("pretrain_leg2", common, ["--resume"])
        records = read_jsonl(run / "metrics.jsonl")
        train = [r for r in records if r["split"] == "train"]
        val = [r for r in records if r["split"] == "val"]
        steps = [r["step"] for r in train]
        resumed = f"resumed from {run / 'checkpoints'}" in second["log_tail"]
        checks = {
            "legs passed": first["status"] == second["status"] == "passed",
            "the second leg resumed from the first one's checkpoint": resumed,
            "the records run on without a gap or a repeat": steps == sorted(set(steps))
            and steps[-1:] == [s.steps],
            "a validation record at each --eval-every": [r["step"] for r in val] == [s.steps // 2, s.steps],
            "the models were exported": (run / "discriminator" / "config.json").is_file(),
        }
        return {
            "status": "passed" if all(checks.values()) else "failed",
            "checks": checks,
            "legs": [first, second],
            "train_records": train,
            "val_records": val,
        }

    def finetune(self) -> dict[str, Any]:
        result = self.electra(
            "finetune",
            [
                "finetune",
                "--task",
                "sst2",
                "--model",
                str(self.work / "run"),
                "--data-dir",
                str(self.shared / SST2),
            ],
            ["--out", str(self.work / "sst2"), "--epochs", "1", "--seeds", "1", "--device", self.args.device],
            ["--max-train-examples", str(self.sizes.train_examples), "--overwrite", "--quiet"],
        )
        results = self.work / "sst2" / "eval_results.json"
        if results.is_file():
            result["dev"] = json.loads(results.read_text())["median"]
        return result

    def export(self) -> dict[str, Any]:
        legs = {}
        for name, model in (("detect", self.work / "run"), ("sst2", self.work / "sst2")):
            legs[name] = self.electra(
                f"export_{name}",
                ["export", "--model", str(model), "--out", str(self.work / f"bundle-{name}")],
                ["--precision", "fp16", "--overwrite"],
            )
        passed = all(leg["status"] == "passed" for leg in legs.values())
        return {"status": "passed" if passed else "failed", "bundles": legs}

    def serve(self) -> dict[str, Any]:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        models = [f"{name}={self.work / f'bundle-{name}'}" for name in MODELS]
        # One worker: a GPU's default is several, each loading and warming every model, which this stage's
        # time limit is not set for (bench.serve_throughput's ours_workers4/8 serve with several).
        args = serve_command(
            "--model", models[0], "--model", models[1], "--device", self.args.device, "--port", str(port),
            "--workers", "1",
        )  # fmt: skip
        log = self.work / "logs" / "serve.log"
        start = time.monotonic()
        try:
            with start_server(args, url=url, log=log, ready_timeout=self.limit("serve")):
                ready_s = time.monotonic() - start
                answers = self.ask(url)
        except (ServerNotReady, OSError) as e:
            return {"status": "failed", "error": str(e)[-3000:]}
        # The results file names no path of this machine: the bundles' paths in the log as "<work>/...".
        text = log.read_text(encoding="utf-8", errors="replace").replace(str(self.work), "<work>")
        loaded = loaded_lines(text)
        checks = {
            "every answer is well formed": all(a["ok"] for a in answers),
            "every model on the device": on_device(loaded, MODELS, self.args.device),
        }
        return {
            "status": "passed" if all(checks.values()) else "failed",
            "checks": checks,
            "ready_s": round(ready_s, 2),
            "answers": answers,
            "loaded": loaded,
            "log_tail": text[-2000:],
        }

    # ----------------------------------------------------------------------------------------- plumbing

    def electra(self, name: str, *parts: list[str]) -> dict[str, Any]:
        cmd = [sys.executable, "-m", "electra", *(a for part in parts for a in part)]
        limit = self.limit(name.split("_")[0])
        result = run_limited(cmd, limit, self.work / "logs" / f"{name}.log")
        result["command"] = " ".join(
            ["electra", *(portable_path(a, self.work) if "/" in a else a for a in cmd[3:])]
        )
        result["limit_s"] = limit
        return result

    def ask(self, url: str) -> list[dict[str, Any]]:
        """One /detect and two /classify requests: status, latency, Server-Timing and whether the body has the
        shape its route promises."""
        out = [post(url, "/detect", {"text": DETECT_TEXT, "level": "word"}, detect_ok)]
        out += [post(url, "/classify", {"model": "sst2", "text": t}, classify_ok) for t in CLASSIFY_TEXTS]
        return out

    def limit(self, stage: str) -> float:
        return self.sizes.limits[stage] * self.args.limit_scale

    def save(self) -> None:
        write_result(self.record, self.args.out, self.args.out.stem)


def post(url: str, path: str, body: dict[str, Any], well_formed) -> dict[str, Any]:
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            answer = json.loads(r.read())
            status, timing = r.status, r.headers.get("Server-Timing")
    except (OSError, ValueError) as e:
        return {"path": path, "ok": False, "error": str(e)}
    return {
        "path": path,
        "status": status,
        "ok": status == 200 and well_formed(answer),
        "latency_ms": round((time.perf_counter() - start) * 1e3, 2),
        "server_timing": timing,
        "answer": answer,
    }


def detect_ok(answer: dict[str, Any]) -> bool:
    tokens = answer.get("results", [{}])[0].get("tokens", [])
    return bool(tokens) and all(0.0 <= t["score"] <= 1.0 for t in tokens)


def classify_ok(answer: dict[str, Any]) -> bool:
    result = answer.get("results", [{}])[0]
    scores = result.get("scores", {})
    return result.get("label") in scores and abs(sum(scores.values()) - 1.0) < 1e-3


def loaded_lines(log: str) -> list[str]:
    """The server log's lines that name a model it loaded and where it runs: "loaded NAME: PATH (KIND,
    PRECISION) on PROVIDERS" (electra.serving.http.server)."""
    return [line for line in log.splitlines() if re.search(r"\bloaded \S+: .* on \S", line)]


def on_device(loaded: list[str], models: tuple[str, ...], device: str) -> bool:
    """Whether each model has a load line and, on CUDA, runs on the CUDA provider. ONNX Runtime falls back
    to the CPU when its CUDA provider cannot load, and the server still answers: the answers alone cannot
    tell; a model with no line at all (the log's format changed) fails rather than passing by default."""
    for name in models:
        lines = [line for line in loaded if re.search(rf"\bloaded {re.escape(name)}: ", line)]
        if not lines:
            return False
        if device == "cuda" and not all("CUDAExecutionProvider" in line for line in lines):
            return False
    return True


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--quick", action="store_true", help="toy sizes, for a CPU")
    ap.add_argument(
        "--work", type=Path, required=True, help="scratch directory for data, runs, bundles, logs"
    )
    ap.add_argument("--shared-data", type=Path, default=SHARED_DATA, help="where the shared data lives")
    ap.add_argument("--limit-scale", type=float, default=1.0, help="multiply every stage's time limit")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.limit_scale <= 0:
        ap.error("--limit-scale must be positive")
    args.out = args.out or ROOT / "bench" / "results" / f"gpu_pipeline_{args.device}.json"
    args.work.mkdir(parents=True, exist_ok=True)
    passed = Pipeline(args).run()
    print(f"-> {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
