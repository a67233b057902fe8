"""Request bodies that must be JSON: decoding, and a message that says what is wrong and at which byte.

Shared by every JSON route, so any malformed body gets the same answer whichever route it was sent to: the
routes whose body Litestar decodes read it first through `read_json_body`, the v2 infer route (JSON or
binary) through `decode`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
from litestar import Request
from litestar.exceptions import SerializationException

# The start of every answer to a body that is not JSON, whatever is wrong with it.
NOT_JSON = "the body is not valid JSON"


TOO_DEEP = (
    "its arrays or objects are nested too deeply for the server to decode; send at most a few hundred levels"
)


class MalformedBody(Exception):
    """A body that is not JSON; `str()` says why and where (error_response answers 400)."""


# Byte-order marks: JSON over HTTP is UTF-8 without one (RFC 8259, section 8.1). A body that starts with one
# always answers 400, saying which mark it is, rather than being accepted by some routes and not others.
BYTE_ORDER_MARKS = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xef\xbb\xbf", "UTF-8"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)
# NaN/Infinity as Python, JavaScript or C print them: a whole word, so "{bad" or "info" is not taken for one.
_NON_FINITE = re.compile(rb"-?(?:nan|inf|infinity)(?![a-z0-9_])", re.IGNORECASE)


def non_finite_at(body: bytes, message: str) -> int | None:
    """Where a NaN or Infinity literal starts, when that is what msgspec stopped at (None: it is not)."""
    where = re.search(r"\(byte (\d+)\)$", message)
    if where is not None:
        at = int(where.group(1))
    elif "truncated" in message and _NON_FINITE.fullmatch(body.strip()):
        at = len(body)
    else:
        return None
    # msgspec notices a literal up to 4 bytes after it starts ("nan}" is read as a "null" gone wrong); a
    # literal inside a string (after an odd number of unescaped quotes) is text, not a number.
    for i in range(max(at - 4, 0), at + 1):
        word = _NON_FINITE.match(body, i) and not body[i - 1 : i].isalnum()
        if word and re.sub(rb"\\.", b"", body[:i]).count(b'"') % 2 == 0:
            return i
    return None


def why_not_json(body: bytes, error: Exception) -> str:
    """What is wrong with a body msgspec could not decode, with the byte offset where it is known."""
    for mark, encoding in BYTE_ORDER_MARKS:
        if body.startswith(mark):
            if encoding == "UTF-8":
                return "it starts with a UTF-8 byte-order mark (EF BB BF, byte 0); send the JSON without it"
            return f"it is not UTF-8 text (byte 0): it starts with a {encoding} byte-order mark; send UTF-8"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"it is not UTF-8 text (byte {e.start})"
    if len(body) >= 2 and (body[0] == 0) != (body[1] == 0):  # ASCII as UTF-16 or UTF-32: zero bytes
        return f"it looks like UTF-16 or UTF-32 text (a zero byte at byte {body.index(0)}); send UTF-8"
    message = str(error)
    if message.startswith(("Number out of range", "Integer value out of range")):
        return "a number is out of range: JSON numbers here must fit a 64-bit float (not 1e400, say)"
    non_finite = non_finite_at(body, message)
    if non_finite is not None:
        return f"NaN and Infinity are not JSON numbers (byte {non_finite})"
    if message.startswith("JSON is malformed: "):  # "... (byte N)"
        return message.removeprefix("JSON is malformed: ")
    if "truncated" in message:
        try:  # msgspec also calls a lone surrogate escape ("\ud800") truncated; the stdlib accepts it
            json.loads(body)
        except ValueError:
            return f"it ends before the JSON value is complete (byte {len(body)})"
        except RecursionError:  # the stdlib's decoder nests deeper per level than msgspec's
            return TOO_DEEP
        return "a \\uXXXX escape is half of a UTF-16 surrogate pair without the other half"
    return message


def decode(body: bytes) -> Any:
    """The JSON value of `body` (MalformedBody when it is not one, saying why)."""
    if not body.strip():
        raise MalformedBody("it is empty")
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise MalformedBody(why_not_json(body, e)) from None
    except RecursionError:  # msgspec's decoder recurses per level, and stops at Python's recursion limit
        raise MalformedBody(TOO_DEEP) from None


async def read_json_body(request: Request[Any, Any, Any]) -> None:
    """before_request of the JSON routes: reads the body (RequestEntityTooLarge over --max-body-bytes) and
    decodes it (MalformedBody); Litestar keeps both, so the handler's `data` does not decode it again."""
    body = await request.body()
    if not body.strip():
        raise MalformedBody("it is empty")
    try:
        await request.json()
    except (SerializationException, UnicodeDecodeError) as e:
        raise MalformedBody(why_not_json(body, e)) from None
    except RecursionError:  # msgspec's decoder recurses per level, and stops at Python's recursion limit
        raise MalformedBody(TOO_DEEP) from None
