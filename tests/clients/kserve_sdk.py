"""Runs in .venv-clients (tests/clients/requirements.txt), driven by tests/test_standard_clients.py.

KServe's Python SDK as a user calls it, unchanged: `InferenceRESTClient` with `InferRequest`s, JSON and binary
tensors, on a detector and a classifier. Prints one JSON object: each case's outputs as lists.

    python kserve_sdk.py URL API_KEY DETECTOR CLASSIFIER TEXT...
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig


def text_input(name: str, texts: list[str], binary: bool) -> InferInput:
    tensor = InferInput(name, [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array(texts, dtype=object), binary_data=binary)
    return tensor


def plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value.decode() if isinstance(value, bytes) else value


async def main(url: str, key: str, detector: str, classifier: str, texts: list[str]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=60))
    pairs = [t[::-1] for t in texts]
    out: dict[str, Any] = {}
    for binary in (False, True):
        # The SDK's binary_data_output parameter asks for binary outputs too.
        parameters = {"binary_data_output": True} if binary else None
        request = InferRequest(detector, [text_input("text", texts, binary)], parameters=parameters)
        response = await client.infer(url, request, model_name=detector, headers=dict(headers))
        out[f"detector-{binary}"] = {o.name: plain(o.as_numpy()) for o in response.outputs}
        inputs = [text_input("text", texts, binary), text_input("text_pair", pairs, binary)]
        request = InferRequest(classifier, inputs, parameters=parameters)
        response = await client.infer(url, request, model_name=classifier, headers=dict(headers))
        out[f"classifier-{binary}"] = {o.name: plain(o.as_numpy()) for o in response.outputs}
        out[f"classifier-{binary}-parameters"] = response.parameters
    await client.close()
    return out


if __name__ == "__main__":
    url, key, detector, classifier, *texts = sys.argv[1:]
    print(json.dumps(asyncio.run(main(url, key, detector, classifier, texts))))
