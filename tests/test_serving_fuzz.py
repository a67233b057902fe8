"""No 5xx for any request a client can send: arbitrary bytes and JSON values, odd encodings, byte-order
marks, deep and wide JSON, numbers out of range, NaN, duplicate keys, any Content-Type, and (over a real
socket, against a real server process) bodies cut short, longer than declared or badly chunked.

Every answer is under 500; every 4xx is JSON `{"status_code", "detail"}`; /health/ready stays 200.
Decisions these tests pin down:

- A byte-order mark before the JSON answers 400 saying so (UTF-8, UTF-16 or UTF-32), whatever the
  Content-Type: JSON over HTTP is UTF-8 without one (RFC 8259, 8.1). U+FEFF inside a string is just text.
- Duplicate keys: the last one wins (msgspec's rule), so `{"text": 3, "text": "a"}` is accepted.
- NaN/Infinity are not JSON: 400 saying so. Numbers beyond a 64-bit float (1e400): 400 "out of range".
- Nesting deeper than the decoder can follow: 400 "nested too deeply" (not a RecursionError's 500).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from electra.serving.http.app import create_app
from electra.serving.http.json_body import NOT_JSON
from electra.serving.process import ServerProcess, free_port, serve_command, start_server
from electra.serving.settings import ModelSpec, ServeSettings

ROUTES = ["/detect", "/classify", "/tag"]
MODEL_OF = {"/detect": "detector", "/classify": "sentiment", "/tag": "tagger"}
FIELDS = {
    "/detect": ("text", "texts", "threshold", "level", "model", "truncate", "stride"),
    "/classify": ("text", "text_pair", "inputs", "model", "truncate"),
    "/tag": ("text", "texts", "model", "aggregation_strategy", "ignore_labels", "truncate", "stride"),
}
VALID = {
    "/detect": {"text": "the cat sat"},
    "/classify": {"text": "a good movie"},
    "/tag": {"text": "the cat sat in paris"},
}
# Routes whose many-inputs field is a list of texts (/classify's is a list of {"text", "text_pair"}).
TEXTS_ROUTES = {"/detect", "/tag"}
MAX_EXAMPLES = 300
READY_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def client(serving_bundles: dict[str, Path]) -> Iterator[TestClient]:
    models = tuple(ModelSpec(n, serving_bundles[n]) for n in ("detector", "sentiment", "tagger"))
    app = create_app(ServeSettings(models=models, max_texts=16, max_chars=5000))
    with TestClient(app) as c:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while c.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.02)
        yield c


def check(response: Any) -> int:
    """Under 500; a 4xx is JSON {"status_code", "detail"}; a 200 is JSON with results."""
    status = response.status_code
    assert status < 500, (status, response.text[:500])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    if status >= 400:
        assert body["status_code"] == status, body
        assert isinstance(body["detail"], str) and body["detail"], body
    else:
        assert status == 200 and isinstance(body["results"], list), body
    return status


def post(client: TestClient, route: str, raw: bytes, content_type: str | None = "application/json") -> Any:
    headers = {"content-type": content_type.encode("latin-1")} if content_type is not None else {}
    return client.post(route, content=raw, headers=headers)


def detail(response: Any, status: int) -> str:
    assert check(response) == status, (response.status_code, response.text[:500])
    return str(response.json()["detail"])


# ----------------------------------------------------------------------------------------------------------
# 1. Property-based: arbitrary bytes, arbitrary JSON values, the real fields with arbitrary values
# ----------------------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)

header_text = st.text(
    st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=40
)
content_types = (
    st.none()
    | header_text
    | st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "application/json; charset=utf-16",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=xyz",
            "multipart/form-data",
            "application/msgpack",
            "application/xml",
            "*/*",
            "",
        ]
    )
)


def field_values(route: str, name: str) -> st.SearchStrategy[Any]:
    """Plausible values of a field (so some bodies get through to the model), or anything at all."""
    text = st.text(max_size=60)
    plausible: dict[str, st.SearchStrategy[Any]] = {
        "text": text,
        "text_pair": text,
        "texts": st.lists(text, max_size=4),
        "inputs": st.lists(st.fixed_dictionaries({"text": text}, optional={"text_pair": text}), max_size=4),
        "threshold": st.floats(allow_nan=True, allow_infinity=True) | st.integers(),
        "level": st.sampled_from(["token", "word", "char", ""]),
        "model": st.sampled_from(["detector", "sentiment", "tagger", "nope", ""]) | st.text(max_size=300),
        "truncate": st.booleans(),
        "stride": st.integers(-2, 40),
        "aggregation_strategy": st.sampled_from(["none", "simple", "first", "average", "max", "maxx", ""]),
        "ignore_labels": st.lists(st.sampled_from(["O", "B-PER", "PER", "LOC", ""]) | text, max_size=3),
    }
    return plausible[name] | json_values


def field_dicts(route: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {}, optional={name: field_values(route, name) for name in FIELDS[route]}
    ) | st.fixed_dictionaries({"text": st.text(max_size=60)}, optional={"model": st.just(MODEL_OF[route])})


def bodies(route: str) -> st.SearchStrategy[bytes]:
    def dumps(value: Any) -> bytes:
        return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")

    as_json = (json_values | field_dicts(route)).map(dumps)
    # Valid JSON with bytes around it: a BOM, whitespace, garbage, or cut short.
    edited = st.tuples(
        as_json, st.sampled_from([b"", b"\xef\xbb\xbf", b" \r\n\t", b"\xff", b"\x00"]), st.binary(max_size=4)
    ).map(lambda t: t[1] + t[0] + t[2])
    cut = st.tuples(as_json, st.integers(0, 50)).map(lambda t: t[0][: max(0, len(t[0]) - t[1])])
    return st.binary(max_size=400) | as_json | edited | cut


FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("route", ROUTES)
def test_any_body_and_content_type_answers_under_500(client: TestClient, route: str) -> None:
    @FUZZ
    @given(raw=bodies(route), content_type=content_types)
    def fuzz(raw: bytes, content_type: str | None) -> None:
        seen[check(post(client, route, raw, content_type))] += 1

    seen: Counter[int] = Counter()
    fuzz()
    assert seen[200] and seen[400], seen  # some bodies reached the model, some were refused
    assert client.get("/health/ready").status_code == 200


# The standard protocols' POST routes: their errors are {"error": message}; v2 bodies may carry binary tensors
# after a JSON header whose length a header gives, so that header is fuzzed too.
PROTOCOL_ROUTES = [
    "/v2/models/detector/infer",
    "/v2/models/sentiment/versions/1/infer",
    "/v2/models/tagger/infer",
    "/hf/detector",
    "/hf/sentiment",
    "/hf/tagger",
]


def v2_bodies() -> st.SearchStrategy[tuple[bytes, str | None]]:
    text = st.text(max_size=60)
    tensor = st.fixed_dictionaries(
        {
            "name": st.sampled_from(["text", "text_pair", "words"]),
            "shape": st.lists(st.integers(-1, 3), max_size=3),
            "datatype": st.sampled_from(["BYTES", "FP32", "INT64", "BOOL", "nope"]),
        },
        optional={
            "data": st.lists(text | json_values, max_size=3) | json_values,
            "parameters": st.fixed_dictionaries({"binary_data_size": st.integers(-1, 40) | json_values}),
        },
    )
    request = st.fixed_dictionaries(
        {"inputs": st.lists(tensor, max_size=3)},
        optional={
            "parameters": st.dictionaries(
                st.sampled_from(["threshold", "level", "stride", "truncate", "binary_data_output", "x"]),
                json_values,
                max_size=3,
            ),
            "outputs": st.lists(
                st.fixed_dictionaries({"name": st.sampled_from(["scores", "label", "x"])}), max_size=2
            ),
            "id": json_values,
        },
    )
    header = (request | json_values).map(
        lambda v: json.dumps(v, allow_nan=True).encode("utf-8", "surrogatepass")
    )
    with_binary = st.tuples(header, st.binary(max_size=40), st.integers(-5, 5) | st.none()).map(
        lambda t: (t[0] + t[1], None if t[2] is None else str(len(t[0]) + t[2]))
    )
    raw = st.tuples(st.binary(max_size=300), st.none() | header_text)
    return with_binary | raw


def hf_bodies() -> st.SearchStrategy[bytes]:
    text = st.text(max_size=60)
    inputs = text | st.lists(
        text | st.fixed_dictionaries({"text": text}, optional={"text_pair": text}), max_size=3
    )
    parameters = st.dictionaries(
        st.sampled_from(
            ["top_k", "function_to_apply", "aggregation_strategy", "ignore_labels", "stride", "x"]
        ),
        json_values | st.sampled_from(["none", "simple", "first", "average", "max", "softmax", "sigmoid"]),
        max_size=3,
    )
    body = st.fixed_dictionaries(
        {"inputs": inputs | json_values}, optional={"parameters": parameters | json_values}
    )
    return (body | json_values).map(
        lambda v: json.dumps(v, allow_nan=True).encode("utf-8", "surrogatepass")
    ) | st.binary(max_size=300)


def check_protocol(response: Any) -> int:
    status = response.status_code
    assert status < 500, (status, response.text[:500])
    if status >= 400:
        body = response.json()
        assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"], body
    return status


@pytest.mark.parametrize("route", PROTOCOL_ROUTES)
def test_protocol_routes_answer_under_500(client: TestClient, route: str) -> None:
    @FUZZ
    @given(body=v2_bodies() if route.startswith("/v2") else hf_bodies().map(lambda b: (b, None)))
    def fuzz(body: tuple[bytes, str | None]) -> None:
        raw, header_length = body
        headers = (
            {}
            if header_length is None
            else {"Inference-Header-Content-Length": header_length.encode("latin-1")}
        )
        seen[check_protocol(client.post(route, content=raw, headers=headers))] += 1

    seen: Counter[int] = Counter()
    fuzz()
    assert seen[400], seen
    if route.startswith("/hf"):
        assert seen[200], seen  # some bodies reached the model
    assert client.get("/health/ready").status_code == 200


# ----------------------------------------------------------------------------------------------------------
# 2. Explicit cases, for every POST route
# ----------------------------------------------------------------------------------------------------------

# Encodings: (body, what the detail says)
ENCODINGS = {
    "latin-1": ('{"text": "caf\xe9"}'.encode("latin-1"), "not UTF-8 text (byte 13)"),
    "utf-16-bom": ('{"text": "a"}'.encode("utf-16"), "UTF-16 byte-order mark"),
    "utf-16-be-bom": (b"\xfe\xff" + '{"text": "a"}'.encode("utf-16-be"), "UTF-16 byte-order mark"),
    "utf-16-le": ('{"text": "a"}'.encode("utf-16-le"), "looks like UTF-16 or UTF-32"),
    "utf-16-be": ('{"text": "a"}'.encode("utf-16-be"), "looks like UTF-16 or UTF-32"),
    "utf-32-bom": ('{"text": "a"}'.encode("utf-32"), "UTF-32 byte-order mark"),
    "utf-8-bom": (b'\xef\xbb\xbf{"text": "a"}', "UTF-8 byte-order mark"),
    "utf-8-bom-only": (b"\xef\xbb\xbf", "UTF-8 byte-order mark"),
    "mixed-utf8-latin1": ('{"text": "café '.encode() + "café".encode("latin-1") + b'"}', "not UTF-8"),
    "overlong": (b'{"text": "\xc0\xaf"}', "not UTF-8 text (byte 10)"),
    "encoded-surrogate": (b'{"text": "\xed\xa0\x80"}', "not UTF-8 text (byte 10)"),
    "lone-continuation": (b'{"text": "\x80"}', "not UTF-8 text (byte 10)"),
    "cut-multibyte": (b'{"text": "\xe2\x82"}', "not UTF-8"),
    "cp1252-quotes": (b'{"text": "\x93hi\x94"}', "not UTF-8"),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", sorted(ENCODINGS))
def test_invalid_encodings_and_byte_order_marks_answer_400(client: TestClient, route: str, case: str) -> None:
    raw, says = ENCODINGS[case]
    for content_type in ("application/json", None, "text/plain; charset=latin-1"):
        text = detail(post(client, route, raw, content_type), 400)
        assert text.startswith(f"{NOT_JSON}: ") and says in text, (content_type, text)


@pytest.mark.parametrize("route", ROUTES)
def test_byte_order_mark_inside_a_string_is_text(client: TestClient, route: str) -> None:
    raw = json.dumps({"text": "\ufeffthe cat", "model": MODEL_OF[route]}).encode()
    assert check(post(client, route, raw)) == 200
    raw = json.dumps({"text": "\ufeffthe cat", "model": MODEL_OF[route]}, ensure_ascii=False).encode()
    assert check(post(client, route, raw)) == 200


NESTED = {
    "arrays-unclosed": b"[" * 10_000,
    "arrays": b"[" * 10_000 + b"]" * 10_000,
    "objects": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    "in-text": b'{"text": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "in-texts": b'{"texts": ["a", ' + b"[" * 10_000 + b"]" * 10_000 + b"]}",
    "mixed": b'[{"a":' * 5_000 + b"null" + b"}]" * 5_000,
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", sorted(NESTED))
def test_deeply_nested_json_answers_400(client: TestClient, route: str, case: str) -> None:
    text = detail(post(client, route, NESTED[case]), 400)
    assert text == (
        f"{NOT_JSON}: its arrays or objects are nested too deeply for the server to decode; send at most a "
        "few hundred levels"
    ), text
    assert client.get("/health/ready").status_code == 200


@pytest.mark.parametrize("route", ROUTES)
def test_moderately_nested_json_is_a_validation_error(client: TestClient, route: str) -> None:
    raw = b'{"text": ' + b"[" * 100 + b"]" * 100 + b"}"
    assert detail(post(client, route, raw), 400).startswith("Validation failed")


@pytest.mark.parametrize("route", ROUTES)
def test_very_wide_json(client: TestClient, route: str) -> None:
    keys = json.dumps({f"k{i}": i for i in range(100_000)}).encode()
    assert "unknown field" in json.dumps(post(client, route, keys).json())
    assert detail(post(client, route, keys), 400).startswith("Validation failed")
    many = "texts" if route in TEXTS_ROUTES else "inputs"
    item: Any = "a" if route in TEXTS_ROUTES else {"text": "a"}
    wide = json.dumps({many: [item] * 100_000}).encode()
    assert "the limit is 16" in detail(post(client, route, wide), 413)
    long_key = json.dumps({"k" * 1_000_000: 1}).encode()
    assert detail(post(client, route, long_key), 400).startswith("Validation failed")


OUT_OF_RANGE = {
    "1e400": b"1e400",
    "-1e400": b"-1e400",
    "1e99999999999999999999": b"1e99999999999999999999",
    "5000-digit-int": b"1" * 5000,
    "-5000-digit-int": b"-" + b"1" * 5000,
    "5000-digit-float": b"1" * 5000 + b".5",
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_numbers_out_of_range_answer_400(client: TestClient, route: str, case: str) -> None:
    number = OUT_OF_RANGE[case]
    for raw in (
        b'{"text": "a", "threshold": ' + number + b"}",
        b'{"text": "a", "truncate": ' + number + b"}",
        b"[" + number + b"]",
        number,
    ):
        text = detail(post(client, route, raw), 400)
        assert "out of range" in text or text.startswith("Validation failed"), text


@pytest.mark.parametrize("number", [10**400, -(10**400), 2**64, -(2**63) - 1, 10**4000])
def test_huge_integer_threshold_is_a_validation_error(client: TestClient, number: int) -> None:
    raw = b'{"text": "a", "threshold": ' + str(number).encode() + b"}"
    response = post(client, "/detect", raw)
    assert check(response) == 400
    assert "out of range" in response.text or "Expected" in response.text or "greater" in response.text


def test_tiny_numbers_underflow_to_zero(client: TestClient) -> None:
    raw = b'{"text": "the cat", "threshold": 1e-400}'
    response = post(client, "/detect", raw)
    assert check(response) == 200
    assert all(t["replaced"] for t in response.json()["results"][0]["tokens"])  # every score >= 0.0


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "nan", "inf", "-inf"])
def test_non_finite_literals_answer_400(client: TestClient, route: str, literal: str) -> None:
    for raw in (
        b'{"text": "a", "threshold": ' + literal.encode() + b"}",
        b"[" + literal.encode() + b"]",
        literal.encode(),
    ):
        text = detail(post(client, route, raw), 400)
        assert text.startswith(NOT_JSON), text
        assert "NaN and Infinity are not JSON numbers" in text, text
    for inside in (b'{"text": "nan\\x"}', b'{"text": "a NaN', b'{"text": "\\"inf\\q"}'):  # in a string
        assert "NaN and Infinity" not in detail(post(client, route, inside), 400)
    for word in (b"info", b"nano", b"Infinite"):  # words that start like one: the parser's own message
        text = detail(post(client, route, b'{"text": ' + word + b"}"), 400)
        assert "NaN and Infinity" not in text and "invalid character" in text, text


@pytest.mark.parametrize("route", ROUTES)
def test_duplicate_keys_the_last_one_wins(client: TestClient, route: str) -> None:
    assert check(post(client, route, b'{"text": 3, "text": "the cat"}')) == 200
    assert detail(post(client, route, b'{"text": "the cat", "text": 3}'), 400).startswith("Validation")
    model = MODEL_OF[route].encode()
    both = b'{"text": "a", "model": "nope", "model": "' + model + b'"}'
    assert post(client, route, both).json()["model"] == MODEL_OF[route]
    many = b'{"text": "a", ' + b'"model": "nope", ' * 10_000 + b'"model": "' + model + b'"}'
    assert check(post(client, route, many)) == 200


CONTENT_TYPES = [
    None,
    "",
    "application/json",
    "application/json; charset=utf-16",
    "application/json; charset=latin-1",
    "text/plain",
    "text/html",
    "application/xml",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "multipart/form-data; boundary=----x",
    "application/msgpack",
    "application/octet-stream",
    "*/*",
    ";;;",
    "%%%; charset=\u00e9".encode().decode("latin-1"),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_any_content_type(client: TestClient, route: str, content_type: str | None) -> None:
    """A JSON body is accepted whatever the type; a body that is not JSON answers 400 whatever the type."""
    assert check(post(client, route, json.dumps(VALID[route]).encode(), content_type)) == 200
    form = b"------x\r\nContent-Disposition: form-data; name=text\r\n\r\nthe cat\r\n------x--\r\n"
    assert detail(post(client, route, form, content_type), 400).startswith(NOT_JSON)
    assert detail(post(client, route, b"text=the+cat", content_type), 400).startswith(NOT_JSON)


@pytest.mark.parametrize("route", ROUTES)
def test_odd_headers(client: TestClient, route: str) -> None:
    raw = json.dumps(VALID[route]).encode()
    for headers in (
        {"content-encoding": "gzip"},
        {"content-encoding": "br", "content-type": "application/json"},
        {"accept": "application/xml"},
        {"accept-charset": "utf-16"},
        {"authorization": "Bearer whatever"},
        {"content-type": "application/json", "x-" + "a" * 200: "b" * 4000},
    ):
        assert check(client.post(route, content=raw, headers=headers)) < 500, headers


# ----------------------------------------------------------------------------------------------------------
# 3. Over a real socket, against a real server process: bodies that do not match their Content-Length
# ----------------------------------------------------------------------------------------------------------

SOCKET_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def server(
    serving_bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELECTRA_")}
    args = serve_command(
        *("--model", f"detector={serving_bundles['detector']}"),
        *("--model", f"sentiment={serving_bundles['sentiment']}"),
        *("--model", f"tagger={serving_bundles['tagger']}"),
        *("--port", str(port), "--max-body-bytes", "100000"),
    )
    log = tmp_path_factory.mktemp("fuzz-server") / "server.log"
    root = Path(__file__).resolve().parents[1]
    with start_server(args, env, url=f"http://127.0.0.1:{port}", log=log, cwd=root, ready_timeout=90) as proc:
        yield proc


def exchange(server: ServerProcess, raw: bytes, *, close_write: bool = False) -> bytes:
    """Send `raw`, optionally half-close, and read until the server closes or SOCKET_TIMEOUT_S passes
    (an AssertionError: the server hung)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as s:
        s.sendall(raw)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        received = b""
        deadline = time.monotonic() + SOCKET_TIMEOUT_S
        while True:
            assert time.monotonic() < deadline, f"the server neither answered nor closed: {received!r}"
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                raise AssertionError(f"the server neither answered nor closed: {received!r}") from None
            except ConnectionResetError:
                return received
            if not chunk:
                return received
            received += chunk
            if not close_write and _complete(received):
                return received


def _complete(data: bytes) -> bool:
    """One whole response with Content-Length (enough to stop reading on a kept-alive connection)."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(rest) >= int(value.strip())
    return False


def responses(data: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of every response in `data`."""
    out = []
    while data.startswith(b"HTTP/1.1 "):
        head, _, rest = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if len(rest) < length:
            break
        out.append((status, rest[:length]))
        data = rest[length:]
    return out


def request(route: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {route} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def log_size(server: ServerProcess) -> int:
    return server.log.stat().st_size


def healthy(server: ServerProcess, since: int | None = None) -> None:
    """/health/ready answers 200; with `since` (the log's size when the test started), no traceback was
    logged since then."""
    raw = b"GET /health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    assert [s for s, _ in responses(exchange(server, raw))] == [200]
    if since is not None:
        log = server.log.read_bytes()[since:].decode(errors="replace")
        assert "unhandled error" not in log and "Traceback" not in log, log[-4000:]


def json_error(status: int, body: bytes) -> str:
    assert 400 <= status < 500, (status, body)
    parsed = json.loads(body)
    assert parsed["status_code"] == status
    return str(parsed["detail"])


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("sent", [0, 1, 10, 50])
def test_body_shorter_than_content_length_then_close(server: ServerProcess, route: str, sent: int) -> None:
    since = log_size(server)
    body = json.dumps(VALID[route]).encode().ljust(100)
    raw = request(route, body[:sent], {"Content-Type": "application/json", "Content-Length": "100"})
    got = responses(exchange(server, raw, close_write=True))
    for status, answer in got:  # nothing (the server closed) or a JSON 4xx
        json_error(status, answer)
    healthy(server, since)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("close_write", [False, True])
def test_body_longer_than_content_length(server: ServerProcess, route: str, close_write: bool) -> None:
    """The server reads the declared bytes; what follows is parsed as the next request, which is not one.
    uvicorn answers that with its own plain-text 400 and closes (its HTTP parser sees the whole buffer
    before the app answers the first request, so the app's answer may never be sent): always a 4xx."""
    since = log_size(server)
    body = json.dumps(VALID[route]).encode()
    for raw in (
        request(route, body + b"x" * 40, {"Content-Type": "application/json", "Content-Length": "10"}),
        request(route, body + b"\r\n\r\nGARBAGE", {"Content-Length": str(len(body))}),
        request(route, body + b" " * 40, {"Content-Length": str(len(body) + 20)}),
    ):
        got = responses(exchange(server, raw, close_write=close_write))
        assert got, "no answer"
        for status, answer in got:
            assert status == 200 or 400 <= status < 500, (status, answer)
            if answer.startswith(b"{") and status >= 400:
                json_error(status, answer)
        assert got[-1][0] == 400, got
    healthy(server, since)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_pipelined_requests_then_close(server: ServerProcess, route: str) -> None:
    """Two requests in one write, then the client half-closes: uvicorn closes the connection and may still
    start the second request, whose answer then fails to write (uvicorn logs that, a bug of its own); the
    server stays ready, and nothing is answered 5xx."""
    body = json.dumps(VALID[route]).encode()
    one = request(route, body, {"Content-Length": str(len(body))})
    since = log_size(server)
    for status, answer in responses(exchange(server, one + one, close_write=True)):
        assert status == 200, (status, answer)
    # Let the second request finish (and uvicorn log its failed write) before the next test reads the log.
    deadline = time.monotonic() + 2.0
    while b"Exception in ASGI" not in server.log.read_bytes()[since:] and time.monotonic() < deadline:
        time.sleep(0.05)
    healthy(server)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_pipelined_requests(server: ServerProcess, route: str) -> None:
    since = log_size(server)
    body = json.dumps(VALID[route]).encode()
    one = request(route, body, {"Content-Length": str(len(body))})
    ready = b"GET /health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
    data = b""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(one + one + ready)
        while len(responses(data)) < 3:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    assert [status for status, _ in responses(data)] == [200, 200, 200]
    healthy(server, since)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "chunks",
    [
        b"zz\r\n{}\r\n0\r\n\r\n",  # not hex
        b"-5\r\nhello\r\n0\r\n\r\n",  # negative
        b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",  # huge
        b'5\r\n{"te\r\n3\r\nxt\r\n',  # sizes that do not match the data, no last chunk
        b'5\r\n{"tex',  # cut short inside a chunk
    ],
)
def test_bad_chunked_bodies(server: ServerProcess, route: str, chunks: bytes) -> None:
    since = log_size(server)
    raw = request(route, chunks, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    got = responses(exchange(server, raw, close_write=True))
    for status, answer in got:  # closed, or 4xx (uvicorn's own 400 for a broken chunk framing is text)
        assert 400 <= status < 500, (status, answer)
    healthy(server, since)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_no_content_type_over_a_socket(server: ServerProcess, route: str) -> None:
    since = log_size(server)
    body = json.dumps(VALID[route]).encode()
    raw = request(route, body, {"Content-Length": str(len(body)), "Connection": "close"})
    got = responses(exchange(server, raw))
    assert [s for s, _ in got] == [200], got
    raw = request(route, b"the cat", {"Content-Length": "7", "Connection": "close"})
    got = responses(exchange(server, raw))
    assert len(got) == 1 and json_error(*got[0]).startswith(NOT_JSON)
    healthy(server, since)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Length": "abc"},
        {"Content-Length": "-1"},
        {"Content-Length": "5, 6"},
        {"Content-Length": "99999999999999999999999"},
        {"Content-Length": "5", "Transfer-Encoding": "chunked"},
        {"Content-Type": "application/json\x01"},
    ],
)
def test_malformed_framing_headers(server: ServerProcess, route: str, headers: dict[str, str]) -> None:
    since = log_size(server)
    raw = request(route, b'{"text": "a"}', {**headers, "Connection": "close"})
    got = responses(exchange(server, raw, close_write=True))
    for status, answer in got:
        assert status < 500, (status, answer)
        if status == 413:
            assert "--max-body-bytes" in json_error(status, answer)
    healthy(server, since)
