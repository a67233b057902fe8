"""Input data for Triton's perf_analyzer (`--input-data FILE`): the load test's English sentences
(loadtests/locustfile.py), one text per batch item, so that the server tokenizes real words rather than
perf_analyzer's random strings. Writes `texts.json` (detectors and taggers: input `text`) and `pairs.json`
(classifiers: `text` and the optional `text_pair`) into --out. See loadtests/README.md.

    python loadtests/perf_analyzer_data.py --out perf-data
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


def sentences() -> list[str]:
    """locustfile.SENTENCES, read from its source: importing the locustfile would patch the process with
    gevent."""
    for node in ast.parse(LOCUSTFILE.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SENTENCES" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise SystemExit(f"{LOCUSTFILE} has no SENTENCES")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for texts.json and pairs.json")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    texts = sentences()
    pairs = zip(texts, texts[1:] + texts[:1], strict=True)
    (out / "texts.json").write_text(json.dumps({"data": [{"text": [t]} for t in texts]}, indent=1) + "\n")
    data = [{"text": [a], "text_pair": [b]} for a, b in pairs]
    (out / "pairs.json").write_text(json.dumps({"data": data}, indent=1) + "\n")
    print(f"{out / 'texts.json'}, {out / 'pairs.json'}: {len(texts)} entries each")


if __name__ == "__main__":
    main()
