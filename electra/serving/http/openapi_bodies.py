"""OpenAPI request bodies that Litestar cannot derive, or not fully, from a handler's signature.

The v2 infer route reads its body itself (JSON, or a JSON header followed by binary tensors), and so do
text-embeddings-inference's /rerank, /predict and /embed (strictly typed, unknown fields named back), so
Litestar sees no body type; their schemas are msgspec's JSON Schema of `InferenceRequest`, `RerankRequest`,
`PredictRequest` and `EmbedRequest`, converted to Litestar's OpenAPI objects, so that /schema documents them
and schema-driven clients and fuzzers can send them. The JSON routes' bodies reject unknown fields, which
Litestar's schema does not say.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
from litestar import Litestar
from litestar.openapi.spec import OpenAPIMediaType, Reference, RequestBody, Schema

from electra.serving.http.open_inference import BINARY_CONTENT_TYPE, InferenceRequest, InferenceResponse
from electra.serving.http.schemas import (
    ClassifyRequest,
    DetectRequest,
    EmbedRequest,
    PairInput,
    PredictRequest,
    RerankRequest,
    TagRequest,
)

REF = "#/components/schemas/{name}"
_FIELDS = {f.name for f in dataclasses.fields(Schema)}
_RENAMED = {"not": "schema_not", "if": "schema_if", "else": "schema_else"}


def document_infer_body(app: Litestar) -> None:
    openapi = app.openapi_schema
    (request, response), components = msgspec.json.schema_components(
        [InferenceRequest, InferenceResponse], ref_template=REF
    )
    schemas = openapi.components.schemas
    for name, schema in components.items():
        schemas[name] = _schema(schema)
    binary = OpenAPIMediaType(schema=Schema(type="string", format="binary"))
    body = RequestBody(
        required=True,
        description="JSON, or (Triton's binary tensor data extension) a JSON header of "
        "Inference-Header-Content-Length bytes followed by the tensors' bytes",
        content={
            "application/json": OpenAPIMediaType(schema=_schema(request)),
            BINARY_CONTENT_TYPE: binary,
        },
    )
    answer = {"application/json": OpenAPIMediaType(schema=_schema(response)), BINARY_CONTENT_TYPE: binary}
    for path, item in (openapi.paths or {}).items():
        if path.endswith("/infer") and item.post is not None:
            item.post.request_body = body
            item.post.responses["200"].content = answer


def document_tei_bodies(app: Litestar) -> None:
    """/rerank's, /predict's and /embed's request bodies (electra.serving.http.tei reads them itself), and
    /embed's on Hugging Face's feature-extraction route."""
    (rerank, predict, embed), components = msgspec.json.schema_components(
        [RerankRequest, PredictRequest, EmbedRequest], ref_template=REF
    )
    openapi = app.openapi_schema
    for name, schema in components.items():
        openapi.components.schemas[name] = _schema(schema)
    # Hugging Face's feature-extraction is /embed's body on a model's path.
    bodies = {"/rerank": rerank, "/predict": predict, "/embed": embed}
    for path, item in (openapi.paths or {}).items():
        body = embed if path.endswith("/pipeline/feature-extraction") else bodies.get(path)
        if body is not None and item.post is not None:
            media = {"application/json": OpenAPIMediaType(schema=_schema(body))}
            item.post.request_body = RequestBody(required=True, content=media)


def document_closed_bodies(app: Litestar) -> None:
    """Request bodies reject unknown fields (a typo such as "treshold" must not pass silently); Litestar's
    generated schema does not say so, which would make schema-driven clients and fuzzers expect a 200."""
    closed = {cls.__name__ for cls in (DetectRequest, ClassifyRequest, PairInput, TagRequest)}
    for name, schema in (app.openapi_schema.components.schemas or {}).items():
        if name.split("_")[-1] in closed:
            schema.additional_properties = False


def _schema(node: Any) -> Any:
    """msgspec's JSON Schema (a dict) as Litestar's Schema / Reference objects."""
    if isinstance(node, list):
        return [_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return Reference(ref=node["$ref"])
    kwargs: dict[str, Any] = {}
    for key, value in node.items():
        name = _RENAMED.get(key) or "".join(("_" + c.lower()) if c.isupper() else c for c in key)
        if name not in _FIELDS:
            continue
        if name in ("properties", "pattern_properties"):
            kwargs[name] = {k: _schema(v) for k, v in value.items()}
        elif name in ("required", "enum", "type", "examples") or not isinstance(value, dict | list):
            kwargs[name] = value
        else:
            kwargs[name] = _schema(value)
    return Schema(**kwargs)
