"""Locust load test for `electra serve`: /detect, /classify and /tag with a realistic mix of text lengths,
and the same models through the standard protocols (/v2/models/NAME/infer, /hf/NAME) when their names are
known.

Configured by environment variables (loadtests/run.py sets them from the server's /models):
  ELECTRA_DETECT_MODEL    detector sent as "model" (unset: the server's only detector; "none": no /detect)
  ELECTRA_CLASSIFY_MODEL  classifier name; unset, empty or "none": no /classify traffic at all
  ELECTRA_TAG_MODEL       tagger name; unset, empty or "none": no /tag traffic at all
  ELECTRA_DETECT_SUGGEST  k > 0 (a detector with a generator): some /detect, v2 and /hf requests ask for k
                          suggestions per flagged token (`suggest`, fill-mask's top_k); 0 or unset: none
  ELECTRA_API_KEY         sent as `Authorization: Bearer KEY` when the server has --api-key-file
  ELECTRA_WAIT_MIN/MAX    think time between a user's requests in seconds (default 0.05 / 0.5)

Run through loadtests/run.py, or by hand against a running server:
  locust -f loadtests/locustfile.py --headless -u 32 -r 32 -t 30s --host http://127.0.0.1:8000
"""

from __future__ import annotations

import os
import random
from typing import Any

import gevent
from locust import FastHttpUser, between, events, task

DETECT_MODEL = os.environ.get("ELECTRA_DETECT_MODEL", "").strip()
CLASSIFY_MODEL = os.environ.get("ELECTRA_CLASSIFY_MODEL", "").strip()
TAG_MODEL = os.environ.get("ELECTRA_TAG_MODEL", "").strip()
SUGGEST = int(os.environ.get("ELECTRA_DETECT_SUGGEST", "0").strip() or 0)
NO_MODEL = "none"
API_KEY = os.environ.get("ELECTRA_API_KEY", "").strip()
WAIT_MIN = float(os.environ.get("ELECTRA_WAIT_MIN", "0.05"))
WAIT_MAX = float(os.environ.get("ELECTRA_WAIT_MAX", "0.5"))

SENTENCES = (
    "The city council approved the new budget after a long debate on Tuesday night.",
    "She walked her dog along the river bank every morning before work.",
    "Researchers found that the drug reduced symptoms in most of the patients they studied.",
    "The movie was far too long, but the final twenty minutes were worth the wait.",
    "Heavy rain is expected across the north of the country for the rest of the week.",
    "He forgot his umbrella at the train station and had to buy another one.",
    "The company reported a sharp rise in profits thanks to strong sales overseas.",
    "Our hotel room had a small balcony with a view of the old harbour.",
    "The quick brown fox jumps over the lazy dog.",
    "I would not recommend this restaurant; the service was slow and the food arrived cold.",
    "The museum will stay open late on Fridays during the summer months.",
    "After three years of construction, the bridge finally opened to traffic in May.",
    "Scientists have discovered a new species of frog in the mountains of Peru.",
    "The book tells the story of a family that moves from Paris to New York after the war.",
    "Please remember to switch off the lights when you leave the office.",
    "The team lost the first match but won the next four games in a row.",
    "Prices for fresh vegetables went up again this month because of the dry weather.",
    "My sister is learning to play the piano and practises for an hour every day.",
    "The new phone has a brighter screen, a better camera and a battery that lasts two days.",
    "Traffic on the main road was stopped for several hours after the accident.",
    "The teacher asked the students to write a short essay about their favourite season.",
    "Water covers about seventy percent of the surface of the Earth.",
    "This is one of the best films I have seen in years, with a brilliant cast.",
    "The airline cancelled dozens of flights because of the storm.",
    "A small bakery on the corner sells the best bread in the neighbourhood.",
    "The government plans to build thousands of new homes over the next decade.",
    "They spent the weekend hiking in the hills and camping under the stars.",
    "The software update fixed several bugs but introduced a new problem with the keyboard.",
    "Children under twelve must be accompanied by an adult at all times.",
    "The orchestra played a programme of works by Mozart and Beethoven.",
    "I ordered the package two weeks ago and it still has not arrived.",
    "The old factory was turned into a library, a cafe and space for local artists.",
    "Doctors advise drinking plenty of water and getting enough sleep.",
    "The election results will be announced late on Sunday evening.",
    "The cat sat on the mat and watched the birds in the garden.",
    "Farmers in the region have had their best harvest in more than a decade.",
    "The police are asking anyone who saw the incident to come forward.",
    "The film's plot was predictable, and the dialogue felt flat and lifeless.",
    "Our flight landed in London just after midnight, an hour behind schedule.",
    "The students were excited to visit the science museum on their school trip.",
    "Honestly, the customer support team solved my problem in less than five minutes.",
    "Wind and solar power now produce a growing share of the country's electricity.",
)

# Word-count ranges and how often each occurs: mostly short queries, some paragraphs, a few long documents.
LENGTHS = (((5, 20), 70), ((40, 60), 22), ((150, 300), 8))


def make_text(rng: random.Random) -> str:
    """Running text of a length drawn from LENGTHS, cut at a word boundary inside a sentence if need be."""
    (low, high) = rng.choices([r for r, _ in LENGTHS], weights=[w for _, w in LENGTHS])[0]
    target = rng.randint(low, high)
    words: list[str] = []
    while len(words) < target:
        words.extend(rng.choice(SENTENCES).split())
    return " ".join(words[:target])


def detail_of(resp: Any) -> str:
    """The server's error `detail` (JSON), or the start of the body when it is not JSON."""
    try:
        body = resp.json()
        if isinstance(body, dict) and "detail" in body:
            return str(body["detail"])
    except Exception:
        pass
    return (resp.text or "")[:300]


@events.quit.add_listener
def _let_csv_catch_up(exit_code: int, **_: Any) -> None:
    # Locust rewrites its --csv files once a second and not again at shutdown, so PREFIX_stats.csv (what
    # loadtests/run.py reads) would miss up to the last second of requests; this lets one more write happen.
    gevent.sleep(1.5)


class ElectraUser(FastHttpUser):
    """Shared plumbing: auth header, JSON POST with failure reporting and a result-count check."""

    abstract = True
    wait_time = between(WAIT_MIN, WAIT_MAX)

    def on_start(self) -> None:
        # Seeded per user from the global generator so runs differ but users do not move in lockstep.
        self.rng = random.Random(random.getrandbits(64))
        self.headers = {"Authorization": f"Bearer {API_KEY}"} if API_KEY else {}

    def post(self, path: str, body: dict[str, Any], n_results: int, name: str | None = None) -> None:
        with self.client.post(
            path, json=body, headers=self.headers, name=name or path, catch_response=True
        ) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {detail_of(resp)}")
                return
            try:
                got = count_results(resp.json())
            except Exception as e:
                resp.failure(f"unreadable 200 response: {e!r}")
                return
            # A 200 with the wrong number of results is as broken as an error, and cheap to check.
            if got != n_results:
                resp.failure(f"expected {n_results} results, got {got}")
            else:
                resp.success()

    def post_v2(self, model: str, texts: list[str], parameters: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {
            "inputs": [{"name": "text", "shape": [len(texts)], "datatype": "BYTES", "data": texts}]
        }
        if parameters:
            body["parameters"] = parameters
        self.post(f"/v2/models/{model}/infer", body, len(texts), name="/v2/models/{name}/infer")

    def post_hf(self, model: str, texts: list[str], parameters: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"inputs": texts}
        if parameters:  # fill-mask (top_k) on a detector with a generator: its stats under a name of its own
            body["parameters"] = parameters
        name = "/hf/{name} fill-mask" if parameters and "top_k" in parameters else "/hf/{name}"
        self.post(f"/hf/{model}", body, len(texts), name=name)


def count_results(body: Any) -> int:
    """Results in an answer: our routes' `results`, v2's first output's rows, a Hugging Face list."""
    if isinstance(body, list):
        return len(body)
    if "outputs" in body:
        return int(body["outputs"][0]["shape"][0])
    return len(body["results"])


class DetectUser(ElectraUser):
    weight = 3
    # A server with classifiers only would fail every /detect: the runner turns these users off then.
    abstract = DETECT_MODEL == NO_MODEL

    def body(self, **fields: Any) -> dict[str, Any]:
        if DETECT_MODEL:
            fields["model"] = DETECT_MODEL
        # The page and most API clients ask for tokens; word-level output costs a little extra work.
        if self.rng.random() < 0.2:
            fields["level"] = "word"
        if self.rng.random() < 0.3:
            fields["threshold"] = round(self.rng.uniform(0.2, 0.8), 2)
        return fields

    @task(6)
    def detect_one(self) -> None:
        self.post("/detect", self.body(text=make_text(self.rng)), 1)

    @task(2)
    def detect_batch(self) -> None:
        texts = [make_text(self.rng) for _ in range(self.rng.randint(2, 8))]
        self.post("/detect", self.body(texts=texts), len(texts))

    @task(2)
    def detect_suggest(self) -> None:
        if not SUGGEST:
            return self.detect_one()
        body = self.body(text=make_text(self.rng), suggest=SUGGEST)
        self.post("/detect", body, 1, name="/detect suggest")

    @task(1)
    def detect_protocols(self) -> None:
        if not DETECT_MODEL:  # the standard protocols name the model in the URL
            return self.detect_one()
        texts = [make_text(self.rng) for _ in range(self.rng.randint(1, 4))]
        suggest = SUGGEST and self.rng.random() < 0.5
        if self.rng.random() < 0.5:
            self.post_v2(DETECT_MODEL, texts, {"suggest": SUGGEST} if suggest else None)
        else:
            self.post_hf(DETECT_MODEL, texts, {"top_k": SUGGEST} if suggest else None)


class ClassifyUser(ElectraUser):
    weight = 2
    # Without a classifier the server would answer every /classify with an error: no such users then.
    abstract = CLASSIFY_MODEL in ("", NO_MODEL)

    def body(self, **fields: Any) -> dict[str, Any]:
        fields["model"] = CLASSIFY_MODEL
        return fields

    @task(5)
    def classify_one(self) -> None:
        self.post("/classify", self.body(text=make_text(self.rng)), 1)

    @task(1)
    def classify_pair(self) -> None:
        body = self.body(text=make_text(self.rng), text_pair=make_text(self.rng))
        self.post("/classify", body, 1)

    @task(2)
    def classify_batch(self) -> None:
        inputs: list[dict[str, str]] = []
        for _ in range(self.rng.randint(2, 8)):
            item = {"text": make_text(self.rng)}
            if self.rng.random() < 0.2:
                item["text_pair"] = make_text(self.rng)
            inputs.append(item)
        self.post("/classify", self.body(inputs=inputs), len(inputs))

    @task(1)
    def classify_protocols(self) -> None:
        texts = [make_text(self.rng) for _ in range(self.rng.randint(1, 4))]
        if self.rng.random() < 0.5:
            self.post_v2(CLASSIFY_MODEL, texts)
        else:
            self.post_hf(CLASSIFY_MODEL, texts)


class TagUser(ElectraUser):
    weight = 2
    # Without a tagger the server would answer every /tag with an error: no such users then.
    abstract = TAG_MODEL in ("", NO_MODEL)

    def body(self, **fields: Any) -> dict[str, Any]:
        fields["model"] = TAG_MODEL
        # Mostly the default grouping; word-level strategies cost a little extra work, "none" a longer answer.
        if self.rng.random() < 0.3:
            fields["aggregation_strategy"] = self.rng.choice(["none", "first", "average", "max"])
        return fields

    @task(5)
    def tag_one(self) -> None:
        self.post("/tag", self.body(text=make_text(self.rng)), 1)

    @task(2)
    def tag_batch(self) -> None:
        texts = [make_text(self.rng) for _ in range(self.rng.randint(2, 8))]
        self.post("/tag", self.body(texts=texts), len(texts))

    @task(1)
    def tag_protocols(self) -> None:
        texts = [make_text(self.rng) for _ in range(self.rng.randint(1, 4))]
        if self.rng.random() < 0.5:
            self.post_v2(TAG_MODEL, texts)
        else:
            self.post_hf(TAG_MODEL, texts)
