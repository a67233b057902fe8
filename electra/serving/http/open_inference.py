"""The Open Inference Protocol v2 (KServe v2, Triton's HTTP API): its tensors on the wire, both ways.

Specification: kserve/open-inference-protocol, `specification/protocol/inference_rest.md`, and Triton's binary
tensor data extension (`docs/protocol/extension_binary_data.md`), which `tritonclient.http` uses by default:
the JSON header comes first, its length in the `Inference-Header-Content-Length` header, then each binary
tensor in order; a BYTES element is a 4-byte little-endian length and its bytes. Only codec here; what the
tensors mean for our models is `electra.serving.http.protocols`.

Lenient where the specification lets a server be: fields of the request object it does not define
(`model_name`, which KServe's SDK always sends) are ignored, and so are parameter keys this server does not
use, but those are named back in the answer (`IGNORED_PARAMETERS`, a response parameter and a header), so that
a misspelt one is visible. An output asked for with Triton's `classification` parameter comes back as its top
classes (electra.serving.http.classification).
"""

from __future__ import annotations

import math
import reprlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
from msgspec import Struct

from electra.errors import InputError
from electra.serving.http.classification import top_classes
from electra.serving.http.json_body import decode

HEADER_LENGTH = "Inference-Header-Content-Length"
BINARY_CONTENT_TYPE = "application/octet-stream"
# The parameter keys a request sent that this server did not use: a response parameter (comma-separated, as
# the protocol's parameter values are scalars) and a header of this name.
IGNORED_PARAMETERS = "ignored_parameters"
IGNORED_HEADER = "Electra-Ignored-Parameters"
# Triton's shared-memory parameters put a tensor where this server cannot reach it: refused, not ignored.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 80, 80
# More dimensions than a tensor of texts needs (Triton's clients send [n] or [n, 1]), with room to spare.
MAX_DIMS = 8
SHARED_MEMORY = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")

# Wire datatype -> numpy dtype of the tensors this server sends or accepts.
DTYPES: dict[str, Any] = {
    "BOOL": np.bool_,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


class ProtocolError(InputError):
    """A request the protocol does not allow, or one our models cannot take: 400 with the reason."""


# --- the JSON forms (also the OpenAPI schema of the routes) -------------------------------------------------


class RequestInput(Struct, forbid_unknown_fields=True):
    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Any] | None = None
    data: Any = None


class RequestOutput(Struct, forbid_unknown_fields=True):
    name: str
    parameters: dict[str, Any] | None = None


class InferenceRequest(Struct):
    """`inputs`: the texts as a BYTES tensor named `text` (and `text_pair` for a classifier's pairs). Other
    fields (`model_name`, `model_version`, ...) are ignored: the route names the model."""

    inputs: list[RequestInput]
    id: str | None = None
    parameters: dict[str, Any] | None = None
    outputs: list[RequestOutput] | None = None


class ResponseOutput(Struct, omit_defaults=True):
    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Any] | None = None
    data: list[Any] | None = None


class InferenceResponse(Struct, omit_defaults=True):
    model_name: str
    outputs: list[ResponseOutput]
    model_version: str | None = None
    id: str | None = None
    parameters: dict[str, Any] | None = None


class TensorMetadata(Struct):
    name: str
    datatype: str
    shape: list[int]


class ModelMetadata(Struct):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class ServerMetadata(Struct):
    name: str
    version: str
    extensions: list[str]


class ProtocolErrorBody(Struct):
    """The protocol's error answer: `{"error": message}`."""

    error: str


# --- requests -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str
    shape: list[int]
    data: np.ndarray  # flat; BYTES as str


@dataclass(frozen=True)
class Request:
    inputs: dict[str, Tensor]
    parameters: dict[str, Any]
    id: str | None
    outputs: list[RequestOutput] | None
    # Tensor parameter keys this server does not use, as "tensor.key".
    ignored: list[str]


def parse_request(body: bytes, header_length: str | None) -> Request:
    """A request from its body; `header_length` is the Inference-Header-Content-Length header, if sent."""
    header, binary = _split(body, header_length)
    try:
        request = msgspec.convert(decode(header), InferenceRequest)
    except msgspec.ValidationError as e:
        raise ProtocolError(f"not an inference request: {e}") from None
    inputs: dict[str, Tensor] = {}
    ignored: list[str] = []
    offset = 0
    for spec in request.inputs:
        ignored += _unused(spec.name, spec.parameters, {"binary_data_size"})
        if spec.name in inputs:
            raise ProtocolError(f"input {spec.name!r} is given twice")
        tensor, offset = _input(spec, binary, offset, len(body))
        inputs[spec.name] = tensor
    if offset != len(binary):
        raise ProtocolError(
            f"{len(binary) - offset} bytes after the JSON header belong to no input's binary_data_size"
        )
    return Request(inputs, request.parameters or {}, request.id, request.outputs, ignored)


def shown(value: Any) -> str:
    """A client's value as an error message shows it: a few levels and characters of it, so a value nested
    as deep as the decoder allows cannot overflow the stack in repr, nor a long one swell the message."""
    return _SHOWN.repr(value)


def _unused(tensor: str, parameters: dict[str, Any] | None, used: set[str]) -> list[str]:
    """`tensor`'s parameter keys outside `used`, named "tensor.key"; shared memory is refused."""
    keys = list(parameters or {})
    shared = [k for k in keys if k in SHARED_MEMORY]
    if shared:
        raise ProtocolError(
            f"tensor {tensor!r}: {shared[0]!r} asks for Triton's shared-memory extension, which this server "
            "does not implement; send the data in the body (JSON or binary)"
        )
    return [f"{tensor}.{k}" for k in keys if k not in used]


def _split(body: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    if header_length is None:
        return body, b""
    if not header_length.strip().isdigit():
        raise ProtocolError(f"{HEADER_LENGTH} must be a whole number of bytes, got {header_length!r}")
    n = int(header_length)
    if not 0 < n <= len(body):
        raise ProtocolError(f"{HEADER_LENGTH} is {n}, but the body has {len(body)} bytes")
    return body[:n], body[n:]


def _check_shape(spec: RequestInput, body_bytes: int) -> None:
    """A shape that can describe data sent in a body of `body_bytes`, checked before its dimensions are
    multiplied: the client chooses them, and their product (or its digits in a message) could cost seconds
    and memory out of proportion to the body."""
    if len(spec.shape) > MAX_DIMS:
        raise ProtocolError(
            f"input {spec.name!r}: shape has {len(spec.shape)} dimensions; a tensor of texts has at most "
            f"{MAX_DIMS}"
        )
    for i, d in enumerate(spec.shape):
        if d < 0:
            raise ProtocolError(f"input {spec.name!r}: dimension {i} of the shape is negative")
        # Every element takes at least a byte of the body, so a longer dimension cannot match the data.
        if d > body_bytes:
            raise ProtocolError(
                f"input {spec.name!r}: dimension {i} of the shape is more elements than the body "
                f"({body_bytes} bytes) could hold"
            )


def _input(spec: RequestInput, binary: bytes, offset: int, body_bytes: int) -> tuple[Tensor, int]:
    if spec.datatype not in DTYPES:
        raise ProtocolError(
            f"input {spec.name!r}: datatype {spec.datatype!r} is not one this server reads "
            f"({', '.join(DTYPES)})"
        )
    _check_shape(spec, body_bytes)
    count = math.prod(spec.shape)
    size = (spec.parameters or {}).get("binary_data_size")
    if size is not None:
        if spec.data is not None:
            raise ProtocolError(f"input {spec.name!r} has both data and binary_data_size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0 or offset + size > len(binary):
            raise ProtocolError(
                f"input {spec.name!r}: binary_data_size {shown(size)} does not fit the "
                f"{len(binary) - offset} bytes left after the JSON header"
            )
        data = _from_binary(spec, binary[offset : offset + size], count)
        offset += size
    else:
        if spec.data is None:
            raise ProtocolError(f"input {spec.name!r} has no data (nor binary_data_size)")
        data = _from_json(spec, spec.data)
    if data.size != count:
        raise ProtocolError(
            f"input {spec.name!r}: shape {spec.shape} holds {count} elements, the data has {data.size}"
        )
    return Tensor(spec.name, spec.datatype, list(spec.shape), data), offset


def _from_json(spec: RequestInput, data: Any) -> np.ndarray:
    flat = list(_flatten(data if isinstance(data, list) else [data]))
    if spec.datatype == "BYTES":
        if not all(isinstance(x, str) for x in flat):
            raise ProtocolError(f"input {spec.name!r}: BYTES data in JSON must be strings")
        return np.array(flat, dtype=object)
    if spec.datatype == "BOOL":
        ok = all(isinstance(x, bool) for x in flat)
    else:
        ok = all(isinstance(x, int | float) and not isinstance(x, bool) for x in flat)
    if not ok:
        raise ProtocolError(
            f"input {spec.name!r}: {spec.datatype} data must be numbers (or booleans for BOOL)"
        )
    try:
        return np.array(flat, dtype=DTYPES[spec.datatype])
    except OverflowError:
        raise ProtocolError(f"input {spec.name!r}: a value is out of range for {spec.datatype}") from None


def _flatten(data: list[Any]) -> Any:
    # Row-major, nested or flat: the protocol allows both. An explicit stack, not recursion: depth is the
    # client's choice.
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            yield item
        else:
            stack.pop()


def _from_binary(spec: RequestInput, raw: bytes, count: int) -> np.ndarray:
    if spec.datatype != "BYTES":
        dtype = np.dtype(DTYPES[spec.datatype]).newbyteorder("<")
        if len(raw) != count * dtype.itemsize:
            raise ProtocolError(
                f"input {spec.name!r}: {len(raw)} bytes are not {count} {spec.datatype} elements"
            )
        return np.frombuffer(raw, dtype=dtype)
    items = []
    at = 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise ProtocolError(f"input {spec.name!r}: a BYTES element's 4-byte length is cut off")
        (n,) = struct.unpack_from("<I", raw, at)
        at += 4
        if at + n > len(raw):
            raise ProtocolError(f"input {spec.name!r}: a BYTES element says {n} bytes, fewer are left")
        try:
            items.append(raw[at : at + n].decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ProtocolError(
                f"input {spec.name!r}: element {len(items)} is not UTF-8 text ({e.reason})"
            ) from None
        at += n
    return np.array(items, dtype=object)


# --- responses ----------------------------------------------------------------------------------------------


def encode_response(
    model: str,
    version: str,
    request: Request,
    outputs: dict[str, tuple[str, np.ndarray]],
    ignored: Sequence[str] = (),
    classes: dict[str, list[str] | None] | None = None,
) -> tuple[bytes, dict[str, str]]:
    """The body and headers answering `request` with `outputs` (name -> (datatype, array)), as JSON or with
    binary tensors where the request asked for them (its outputs' `binary_data`, or `binary_data_output`).

    `ignored`: request parameter keys the model did not use, named back with the input and output ones.
    `classes`: the outputs that can be returned as classifications (Triton's classification extension), each
    with its class labels (None: indices only); others asked for so answer 400.
    """
    wanted, ignored_outputs = _wanted(request, outputs)
    binary_default = _flag(request.parameters, "binary_data_output")
    parts: list[ResponseOutput] = []
    blobs: list[bytes] = []
    for name, params in wanted.items():
        datatype, array = outputs[name]
        count = _class_count(name, params, classes or {})
        if count is not None:
            datatype, array = "BYTES", top_classes(array, count, (classes or {})[name])
        binary = _flag(params, "binary_data", binary_default)
        shape = list(array.shape)
        if binary:
            blob = _to_binary(datatype, array)
            parts.append(ResponseOutput(name, shape, datatype, parameters={"binary_data_size": len(blob)}))
            blobs.append(blob)
        else:
            parts.append(ResponseOutput(name, shape, datatype, data=array.reshape(-1).tolist()))
    unused = [*ignored, *request.ignored, *ignored_outputs]
    parameters = {IGNORED_PARAMETERS: ",".join(unused)} if unused else None
    header = msgspec.json.encode(InferenceResponse(model, parts, version, request.id, parameters))
    headers = {IGNORED_HEADER: ", ".join(unused)} if unused else {}
    if not blobs:
        return header, {**headers, "Content-Type": "application/json"}
    return b"".join([header, *blobs]), {
        **headers,
        HEADER_LENGTH: str(len(header)),
        "Content-Type": BINARY_CONTENT_TYPE,
    }


def check_outputs(request: Request, names: Sequence[str], classes: dict[str, list[str] | None]) -> None:
    """What encode_response would refuse in the outputs `request` asks for, refused before the model runs."""
    for out in request.outputs or []:
        if out.name not in names:
            raise ProtocolError(f"output {out.name!r} is not one of this model's: {', '.join(names)}")
        _class_count(out.name, out.parameters or {}, classes)


def _wanted(request: Request, outputs: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The outputs to send with their parameters, and the output parameter keys this server does not use."""
    if request.outputs is None:
        return {name: {} for name in outputs}, []
    wanted: dict[str, dict[str, Any]] = {}
    ignored: list[str] = []
    for out in request.outputs:
        if out.name not in outputs:
            raise ProtocolError(f"output {out.name!r} is not one of this model's: {', '.join(outputs)}")
        wanted[out.name] = out.parameters or {}
        ignored += _unused(out.name, out.parameters, {"binary_data", "classification"})
    return wanted, ignored


def _class_count(name: str, params: dict[str, Any], classes: dict[str, list[str] | None]) -> int | None:
    """The `classification` count asked for output `name` (None: its tensor as it is)."""
    count = params.get("classification")
    if count is None:
        return None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ProtocolError(
            f"output {name!r}: 'classification' must be a whole number >= 1, got {shown(count)}"
        )
    if name not in classes:
        which = ", ".join(repr(n) for n in classes) or "none of this model's"
        raise ProtocolError(
            f"output {name!r} cannot be returned as a classification (class_count); outputs that can: {which}"
        )
    return count


def _flag(parameters: dict[str, Any], name: str, default: bool = False) -> bool:
    value = parameters.get(name, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"parameter {name!r} must be true or false, got {shown(value)}")
    return value


def _to_binary(datatype: str, array: np.ndarray) -> bytes:
    if datatype != "BYTES":
        return np.ascontiguousarray(array, dtype=np.dtype(DTYPES[datatype]).newbyteorder("<")).tobytes()
    out = bytearray()
    for item in array.reshape(-1):
        raw = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        out += struct.pack("<I", len(raw)) + raw
    return bytes(out)
