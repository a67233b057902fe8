"""Runs in .venv-clients (tests/clients/requirements.txt), driven by tests/test_standard_clients.py.

Reads Triton's model configurations and statistics as the server answered them (a JSON object on stdin:
{"configs": [...], "statistics": {...}}) into Triton's own protobuf messages, `inference.ModelConfig` and
`inference.ModelStatisticsResponse` from tritonclient, strictly: a field the schema lacks, or a value of the
wrong type, fails. Prints them back as JSON. A process of its own: KServe's SDK registers protobuf messages
of the same names.
"""

from __future__ import annotations

import json
import sys

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2, service_pb2


def parsed(value: object, message: object) -> dict[str, object]:
    json_format.Parse(json.dumps(value), message)
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


if __name__ == "__main__":
    given = json.load(sys.stdin)
    print(
        json.dumps(
            {
                "configs": [parsed(c, model_config_pb2.ModelConfig()) for c in given["configs"]],
                "statistics": parsed(given["statistics"], service_pb2.ModelStatisticsResponse()),
            }
        )
    )
