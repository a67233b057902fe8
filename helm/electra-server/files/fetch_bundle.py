"""Fetch `electra export` bundles into a directory: the chart's init container (modelStorage.type=download).

    python fetch_bundle.py --dest /models --bundle NAME SOURCE SHA256 [--bundle ...]

SOURCE is an http(s):// or file:// URL of a bundle archive (.tar.gz, .tgz, .tar), a local archive, or a local
directory (what the chart's AWS CLI container staged from s3://). SHA256 is the archive's checksum, or "-" to
skip the check. Each bundle ends up in DEST/NAME (the directory holding bundle.json; an archive may wrap it in
one top-level folder). A bundle already there is kept, so a restarted init container does no work twice.

Standard library only (it runs in the server image). Downloads retry with back-off; the environment variable
BUNDLE_AUTHORIZATION, when set, is sent as the Authorization header (not forwarded on redirects). Archives
are unpacked with tarfile's "data" filter: no absolute paths, no `..`, no links out of the bundle, no
devices. Everything is written next to DEST/NAME and renamed into place, so a crash leaves no half bundle.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

CHUNK = 1 << 20
ATTEMPTS = 4
TIMEOUT_S = 60
MARKER = "bundle.json"


class FetchError(Exception):
    """A problem to report in one line (the init container then fails and Kubernetes retries it)."""


def log(message: str) -> None:
    print(f"fetch_bundle: {message}", file=sys.stderr, flush=True)


def download(url: str, target: Path) -> str:
    """Stream url into target; the sha256 of what was written. Retries transient failures."""
    request = urllib.request.Request(url, headers={"User-Agent": "electra-fetch-bundle"})
    token = os.environ.get("BUNDLE_AUTHORIZATION", "")
    if token and url.startswith(("http://", "https://")):
        request.add_unredirected_header("Authorization", token)
    for attempt in range(1, ATTEMPTS + 1):
        digest = hashlib.sha256()
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, target.open("wb") as out:
                while chunk := response.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            return digest.hexdigest()
        except urllib.error.HTTPError as e:
            if e.code < 500 and e.code != 429:
                raise FetchError(f"{url}: HTTP {e.code} {e.reason}") from None
            problem = f"HTTP {e.code} {e.reason}"
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            problem = str(getattr(e, "reason", e))
        if attempt == ATTEMPTS:
            raise FetchError(f"{url}: {problem} (gave up after {ATTEMPTS} attempts)")
        wait = 2**attempt
        log(f"{url}: {problem}; retrying in {wait} s")
        time.sleep(wait)
    raise AssertionError("unreachable")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _check_member(member: tarfile.TarInfo, root: Path) -> None:
    # Only for Pythons without tarfile's extraction filters (3.11 before 3.11.4).
    target = (root / member.name).resolve()
    if not target.is_relative_to(root.resolve()) or member.name.startswith("/"):
        raise FetchError(f"archive member {member.name!r} points outside the bundle")
    if member.issym() or member.islnk() or member.isdev():
        raise FetchError(f"archive member {member.name!r} is a link or device; bundles hold plain files")


def unpack(archive: Path, into: Path) -> None:
    try:
        with tarfile.open(archive, "r:*") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, filter="data")
            else:  # pragma: no cover - old 3.11 patch releases
                for member in tar.getmembers():
                    _check_member(member, into)
                tar.extractall(into)
    except tarfile.TarError as e:
        raise FetchError(f"{archive.name}: not a readable tar archive ({e})") from None


def bundle_root(folder: Path) -> Path:
    """The directory holding bundle.json: folder itself or its single top-level subfolder."""
    if (folder / MARKER).is_file():
        return folder
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / MARKER).is_file():
        return entries[0]
    raise FetchError(
        f"no {MARKER} at the top of the archive (or of its single top-level folder): "
        "is this a directory written by `electra export`?"
    )


def fetch(name: str, source: str, sha256: str | None, dest: Path) -> Path:
    final = dest / name
    if (final / MARKER).is_file():
        log(f"{name}: already present in {final}")
        return final
    dest.mkdir(parents=True, exist_ok=True)
    remote = source.startswith(("http://", "https://"))
    local = Path(source.removeprefix("file://"))
    if not remote and not local.exists():
        raise FetchError(f"{name}: {source} is neither an http(s) URL nor an existing file or directory")
    # Staged by the chart's s3 container inside DEST: moved (not copied) and removed once unpacked.
    staged = not remote and local.resolve().is_relative_to(dest.resolve())
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dest))
    try:
        if not remote and local.is_dir():
            if sha256:
                raise FetchError(f"{name}: sha256 applies to archives, but {source} is a directory")
            digest = None
            root = bundle_root(local)
            if not staged:
                shutil.copytree(root, work / "copy")
                root = work / "copy"
        else:
            if remote:
                log(f"{name}: downloading {source}")
                archive = work / "bundle.archive"
                digest = download(source, archive)
            else:
                archive, digest = local, sha256_file(local)
            if sha256 and digest != sha256.lower():
                raise FetchError(
                    f"{name}: sha256 mismatch for {source}: expected {sha256.lower()}, got {digest}"
                )
            unpacked = work / "unpacked"
            unpacked.mkdir()
            unpack(archive, unpacked)
            if staged or remote:
                archive.unlink()
            root = bundle_root(unpacked)
        if final.exists():  # a half bundle from an older, interrupted attempt
            shutil.rmtree(final)
        root.rename(final)
        log(f"{name}: ready in {final}" + (f" (sha256 {digest})" if digest else ""))
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, required=True, help="directory that receives DEST/NAME")
    parser.add_argument(
        "--bundle",
        nargs=3,
        action="append",
        required=True,
        metavar=("NAME", "SOURCE", "SHA256"),
        help="a bundle: its name, where it comes from, its archive's sha256 or '-'",
    )
    args = parser.parse_args(argv)
    try:
        for name, source, sha256 in args.bundle:
            if not name or "/" in name or name.startswith("."):
                raise FetchError(f"bad bundle name {name!r}")
            fetch(name, source, None if sha256 in ("", "-") else sha256, args.dest)
    except FetchError as e:
        log(f"error: {e}")
        return 1
    staging = args.dest / ".staging"
    if staging.is_dir():
        shutil.rmtree(staging, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
