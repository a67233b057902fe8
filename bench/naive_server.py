"""The naive baseline for bench/serve_throughput.py: the server a user would write around `transformers`.

Each request handler calls Hugging Face `transformers` on PyTorch eager directly, one request at a time, with
no batching across requests: `ElectraForPreTraining` + the fast tokenizer (offsets from
`return_offsets_mapping`, sigmoid of the logits) for /detect, `pipeline("text-classification")` for
/classify, and sentence-transformers' `SentenceTransformer.encode` (the detector's encoder with the pooling
`--pooling` names, [CLS] by default as `electra export` writes it) for /embed, in text-embeddings-inference's
shape (`inputs` one text or many, `normalize` default true). Handlers are sync Litestar handlers run in
Litestar's thread pool (`sync_to_thread=True`), the usual way to call blocking model code from an async
framework.

It is meant to be honest and typical, not slow on purpose: models are loaded once at startup, in eval mode,
under `torch.inference_mode`, with the tokenizer truncating to the same `--max-length` as the ONNX bundle
so both servers do the same work per text. Request and response JSON follow docs/serving.md for the
fields the benchmark uses (token-level detection only; "level" and "model" are accepted and ignored).

    python -m bench.naive_server --detector MODEL_DIR --classifier MODEL_DIR --port 8001

MODEL_DIR is a Hugging Face directory (config.json + model.safetensors + tokenizer), e.g. one written by
`electra.hf_format.save_hf_dir` + `electra.tokenizer.save_tokenizer`; never a hub name (nothing is
downloaded).
"""

from __future__ import annotations

import argparse
import math
import threading
from pathlib import Path
from typing import Annotated, Any

from litestar import Litestar, get, post
from litestar.enums import RequestEncodingType
from litestar.exceptions import HTTPException
from litestar.params import Body
from litestar.status_codes import HTTP_200_OK

DEFAULT_THRESHOLD = 0.5
# An explicit body marker: Litestar deprecates a bare `data` kwarg; Body(...) works on every 2.x release.
JsonObject = Annotated[dict[str, Any], Body(media_type=RequestEncodingType.JSON)]


class NaiveModels:
    """The two models and their tokenizers, loaded once; `lock` lets one request at a time use them.

    The lock is what makes this "one request at a time": without it, the thread pool would run several
    forward passes at once, each with every intra-op thread, and concurrent calls on one fast tokenizer
    whose truncation settings change per call fail with "Already borrowed" (huggingface/tokenizers#537).
    """

    def __init__(
        self,
        detector_dir: Path | None,
        classifier_dir: Path | None,
        max_length: int,
        device: str,
        pooling: str = "cls",
    ) -> None:
        import torch
        from transformers import AutoTokenizer, ElectraForPreTraining, pipeline

        self.torch = torch
        self.device = torch.device(device)
        self.max_length = max_length
        self.lock = threading.Lock()
        self.detector = self.detector_tokenizer = self.classifier = self.embedder = None
        self.regression = False
        if detector_dir is not None:
            self.detector_tokenizer = AutoTokenizer.from_pretrained(detector_dir)
            self.detector = ElectraForPreTraining.from_pretrained(detector_dir).to(self.device).eval()
            self.embedder = self._embedder(detector_dir, pooling)
        if classifier_dir is not None:
            self.classifier = pipeline(
                "text-classification",
                model=str(classifier_dir),
                tokenizer=str(classifier_dir),
                device=-1 if self.device.type == "cpu" else (self.device.index or 0),
            )
            config = self.classifier.model.config
            self.regression = config.problem_type == "regression" or config.num_labels == 1

    def _embedder(self, model_dir: Path, pooling: str) -> Any:
        """The detector's encoder as a SentenceTransformer: its Transformer module (ElectraModel, the
        discriminator's head left out) and a Pooling module, truncating at max_length."""
        from sentence_transformers import SentenceTransformer

        try:  # where sentence-transformers 5.7 keeps them; `models` before (deprecated since)
            from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
        except ImportError:
            from sentence_transformers.models import Pooling, Transformer

        encoder = Transformer(str(model_dir), max_seq_length=self.max_length)
        pool = Pooling(encoder.auto_model.config.hidden_size, pooling_mode=pooling)
        return SentenceTransformer(modules=[encoder, pool], device=str(self.device))

    def embed(self, texts: list[str], normalize: bool) -> list[list[float]]:
        assert self.embedder is not None
        with self.lock:
            vectors = self.embedder.encode(texts, normalize_embeddings=normalize, convert_to_numpy=True)
        return vectors.tolist()

    def detect(self, texts: list[str], threshold: float, truncate: bool) -> list[dict[str, Any]]:
        assert self.detector is not None and self.detector_tokenizer is not None
        with self.lock, self.torch.inference_mode():
            enc = self.detector_tokenizer(
                texts,
                return_offsets_mapping=True,
                return_special_tokens_mask=True,
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            truncated = [bool(e.overflowing) for e in enc.encodings]
            if not truncate and any(truncated):
                raise HTTPException(
                    status_code=413, detail=f"a text is longer than {self.max_length} tokens (truncate=false)"
                )
            logits = self.detector(
                input_ids=enc["input_ids"].to(self.device),
                attention_mask=enc["attention_mask"].to(self.device),
                token_type_ids=enc["token_type_ids"].to(self.device),
            ).logits
            scores = self.torch.sigmoid(logits.float()).cpu().tolist()
        results = []
        for i, text in enumerate(texts):
            tokens = []
            rows = zip(
                enc["offset_mapping"][i].tolist(),
                enc["special_tokens_mask"][i].tolist(),
                scores[i],
                strict=True,
            )
            for (start, end), special, score in rows:
                if special:  # [CLS], [SEP] and padding have no characters in the text
                    continue
                tokens.append(
                    {
                        "text": text[start:end],
                        "start": start,
                        "end": end,
                        "score": score,
                        "replaced": score > threshold,
                    }
                )
            replaced = sum(t["replaced"] for t in tokens)
            results.append(
                {
                    "tokens": tokens,
                    "replaced_fraction": replaced / len(tokens) if tokens else 0.0,
                    "truncated": truncated[i],
                }
            )
        return results

    def classify(self, inputs: list[dict[str, str]], truncate: bool) -> list[dict[str, Any]]:
        assert self.classifier is not None
        kwargs: dict[str, Any] = {"top_k": None}
        if truncate:
            kwargs.update(truncation=True, max_length=self.max_length)
        if self.regression:
            kwargs["function_to_apply"] = "none"  # the raw score, not a sigmoid of it
        with self.lock:
            outputs = self.classifier(inputs, **kwargs)
        results = []
        for scored in outputs:
            if self.regression:
                results.append({"score": float(scored[0]["score"])})
            else:
                best = max(scored, key=lambda s: s["score"])
                results.append({"label": best["label"], "scores": {s["label"]: s["score"] for s in scored}})
        return results


def _bad_request(detail: str) -> HTTPException:
    return HTTPException(status_code=400, detail=detail)


def _detect_texts(data: dict[str, Any]) -> list[str]:
    if isinstance(data.get("text"), str):
        return [data["text"]]
    texts = data.get("texts")
    if isinstance(texts, list) and texts and all(isinstance(t, str) for t in texts):
        return texts
    raise _bad_request('the body needs "text" (a string) or "texts" (a non-empty list of strings)')


def _classify_inputs(data: dict[str, Any]) -> list[dict[str, str]]:
    items = [data] if "text" in data else data.get("inputs")
    if not isinstance(items, list) or not items:
        raise _bad_request('the body needs "text" or "inputs" (a non-empty list of {"text", "text_pair"?})')
    inputs = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise _bad_request('every input needs a "text" string')
        pair = item.get("text_pair")
        if pair is not None and not isinstance(pair, str):
            raise _bad_request('"text_pair" must be a string')
        inputs.append({"text": item["text"]} if pair is None else {"text": item["text"], "text_pair": pair})
    return inputs


def _embed_texts(data: dict[str, Any]) -> list[str]:
    inputs = data.get("inputs")
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise _bad_request('the body needs "inputs": a string or a non-empty list of strings')
    return texts


def _threshold(data: dict[str, Any]) -> float:
    value = data.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise _bad_request('"threshold" must be a number in [0, 1]')
    if math.isnan(value):
        raise _bad_request('"threshold" must be a number in [0, 1]')
    return float(value)


def create_app(
    models: NaiveModels, name_detector: str = "detector", name_classifier: str = "sentiment"
) -> Litestar:
    @get("/health/live", sync_to_thread=False)
    def live() -> dict[str, str]:
        return {"status": "live"}

    @get("/health/ready", sync_to_thread=False)
    def ready() -> dict[str, str]:
        # Models load before the app is built, so serving at all means ready.
        return {"status": "ready"}

    @post("/detect", status_code=HTTP_200_OK, sync_to_thread=True)
    def detect(data: JsonObject) -> dict[str, Any]:
        if models.detector is None:
            raise HTTPException(status_code=404, detail="no detector loaded (start with --detector)")
        texts = _detect_texts(data)
        results = models.detect(texts, _threshold(data), bool(data.get("truncate", True)))
        return {"model": name_detector, "results": results}

    @post("/classify", status_code=HTTP_200_OK, sync_to_thread=True)
    def classify(data: JsonObject) -> dict[str, Any]:
        if models.classifier is None:
            raise HTTPException(status_code=404, detail="no classifier loaded (start with --classifier)")
        inputs = _classify_inputs(data)
        return {
            "model": name_classifier,
            "results": models.classify(inputs, bool(data.get("truncate", True))),
        }

    @post("/embed", status_code=HTTP_200_OK, sync_to_thread=True)
    def embed(data: JsonObject) -> list[list[float]]:
        if models.embedder is None:
            raise HTTPException(status_code=404, detail="no encoder loaded (start with --detector)")
        normalize = data.get("normalize", True)
        if not isinstance(normalize, bool):
            raise _bad_request('"normalize" must be a boolean')
        return models.embed(_embed_texts(data), normalize)

    return Litestar(route_handlers=[live, ready, detect, classify, embed])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--detector", type=Path, default=None, help="discriminator model directory")
    ap.add_argument("--classifier", type=Path, default=None, help="sequence-classifier model directory")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument(
        "--max-length", type=int, default=512, help="tokens per text, truncating (default 512, BERT's)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument(
        "--pooling",
        default="cls",
        choices=["cls", "mean"],
        help="/embed's pooling (default cls, as export's)",
    )
    args = ap.parse_args()
    if args.detector is None and args.classifier is None:
        ap.error("pass --detector and/or --classifier")

    import torch
    import uvicorn

    if args.threads:
        torch.set_num_threads(args.threads)
    models = NaiveModels(args.detector, args.classifier, args.max_length, args.device, args.pooling)
    # Access logs off, as for the server it is compared with: a log line per request is not the model's cost.
    uvicorn.run(create_app(models), host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
