"""The Dockerfile and .dockerignore: hadolint, and what the images promise, checked without a Docker engine.

No image is built here (there is no Docker engine in CI). What can be checked statically is: hadolint's rules;
the stages and targets; that both serving images install exactly the serving extra with the project's
constraints, as CI does, and never PyTorch; that the environment CI installed satisfies that extra (so the
image resolves what the tests ran against); that the CUDA base image matches the CUDA major version the
installed onnxruntime-gpu links against; non-root user, port, environment, entry point; and that the
.dockerignore sends what the COPY lines need and nothing else.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.helm_tools import require_hadolint

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
SERVING_STAGES = ("cuda", "cpu")
SERVING_INSTALL = ["-c", "constraints.txt", ".[serve]"]
LINUX_X86_64 = {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux"}


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARGs and the stages, with continuation lines joined and comments dropped."""
    logical, current = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue  # comments inside a continued instruction are dropped by Docker too
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", args.strip(), re.I)
            assert m, line
            stages.append(Stage(name=m.group(2) or str(len(stages)), base=m.group(1)))
        elif not stages:
            assert keyword == "ARG", f"only ARG may precede the first FROM: {line}"
            name, _, default = args.partition("=")
            global_args[name.strip()] = default.strip()
        else:
            stages[-1].instructions.append((keyword, args.strip()))
    return global_args, stages


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], dict[str, Stage], list[Stage]]:
    global_args, stages = parse_dockerfile(DOCKERFILE.read_text())
    return global_args, {s.name: s for s in stages}, stages


def lineage(stages: dict[str, Stage], name: str) -> list[Stage]:
    """The stage and every stage it builds on or copies from."""
    seen: list[Stage] = []
    todo = [name]
    while todo:
        stage = stages[todo.pop()]
        if stage in seen:
            continue
        seen.append(stage)
        if stage.base in stages:
            todo.append(stage.base)
        for copy in stage.all("COPY"):
            m = re.search(r"--from=(\S+)", copy)
            if m and m.group(1) in stages:
                todo.append(m.group(1))
    return seen


def pip_installs(stage: Stage) -> list[list[str]]:
    """The arguments of every `pip install` in the stage's RUN lines, caching options dropped."""
    installs = []
    for run in stage.all("RUN"):
        lexer = shlex.shlex(run, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        commands: list[list[str]] = [[]]
        for token in lexer:
            if token in (";", "&&", "||", "|", "&"):
                commands.append([])
            else:
                commands[-1].append(token)
        for words in commands:
            if len(words) >= 2 and words[0].endswith("pip") and words[1] == "install":
                installs.append([w for w in words[2:] if w not in ("--no-cache-dir", "--quiet", "-q")])
    return installs


def test_hadolint_is_clean() -> None:
    hadolint = require_hadolint()
    proc = subprocess.run(
        [str(hadolint), "--no-color", "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], "\n".join(f"{f['line']}: {f['code']} {f['message']}" for f in findings)
    assert proc.returncode == 0, proc.stderr


def test_stages_and_default_target(dockerfile) -> None:
    global_args, stages, ordered = dockerfile
    assert {"cuda", "cpu", "train", "cuda-builder", "cpu-builder", "bundle"} <= set(stages)
    assert ordered[-1].name == "cuda", "the default target (the last stage) is the GPU image"
    assert stages["cuda"].base == stages["cuda-builder"].base == "${CUDA_IMAGE}"
    assert stages["cpu"].base == stages["cpu-builder"].base == "${PYTHON_IMAGE}"
    assert re.fullmatch(r"nvidia/cuda:\d+\.\d+\.\d+-cudnn-runtime-ubuntu\d+\.\d+", global_args["CUDA_IMAGE"])
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", global_args["PYTHON_IMAGE"])


@pytest.mark.parametrize("target", SERVING_STAGES)
def test_serving_images_install_exactly_the_serve_extra_as_ci_does(dockerfile, target: str) -> None:
    _, stages, _ = dockerfile
    chain = lineage(stages, target)
    installs = [args for stage in chain for args in pip_installs(stage)]
    assert installs == [SERVING_INSTALL], installs
    assert "train" not in {s.name for s in chain}
    # The builder proves it: the build fails if torch slipped in through some dependency.
    builder = stages[f"{target}-builder"]
    assert any("pip show torch" in run and "exit 1" in run for run in builder.all("RUN"))


@pytest.mark.parametrize("target", SERVING_STAGES)
def test_serving_images_run_as_non_root_on_port_8000(dockerfile, target: str) -> None:
    _, stages, _ = dockerfile
    stage = stages[target]
    (user,) = stage.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit(), "numeric, so runAsNonRoot can check it"
    assert stage.all("EXPOSE") == ["8000"]
    assert json.loads(stage.all("ENTRYPOINT")[0]) == ["electra", "serve"]
    env = " ".join(stage.all("ENV"))
    assert "ELECTRA_HOST=0.0.0.0" in env and "ELECTRA_PORT=8000" in env
    assert f"ELECTRA_DEVICE={target}" in env
    assert "/health/ready" in stage.all("HEALTHCHECK")[0]
    from electra.cli.serve_cmd import OPTIONS, env_name

    known = {env_name(o) for o in OPTIONS} | {"ELECTRA_MODELS"}
    assert set(re.findall(r"\b(ELECTRA_[A-Z_]+)=", env)) <= known
    # Baked bundles land where the chart's modelStorage.type=image expects them.
    assert "ELECTRA_MODELS=${MODEL_BUNDLE:+${MODEL_NAME}=/models/${MODEL_NAME}}" in env
    assert any("--from=bundle /models /models" in c for c in stage.all("COPY"))


def test_image_user_and_model_root_match_the_chart(dockerfile) -> None:
    _, stages, _ = dockerfile
    values = yaml.safe_load((ROOT / "helm" / "electra-server" / "values.yaml").read_text())
    uid = int(stages["cuda"].all("USER")[0].split(":")[0])
    assert values["podSecurityContext"]["runAsUser"] == uid
    assert values["modelStorage"]["mountPath"] == "/models"
    assert values["server"]["port"] == 8000


def test_ci_environment_satisfies_the_serve_extra() -> None:
    """What the image installs (the serve extra, for linux/x86_64) is what CI's environment has installed."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    serve = [Requirement(r) for r in project["optional-dependencies"]["serve"]]
    selected = [r for r in serve if r.marker is None or r.marker.evaluate(LINUX_X86_64)]
    names = {r.name for r in selected}
    assert "onnxruntime-gpu" in names and "onnxruntime" not in names
    assert not names & {"torch", "transformers"}, "the serving image must not carry torch"
    gpu = next(r for r in selected if r.name == "onnxruntime-gpu")
    assert not gpu.extras, "onnxruntime-gpu[cuda,cudnn] would put CUDA libraries into the CPU image"
    import platform
    import sys

    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("CI's environment is linux/x86_64; this machine resolves the other branch of the extra")
    for req in selected:
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"{req.name} is not installed: this environment lacks the serve extra")
        assert req.specifier.contains(version, prereleases=True), f"{req.name} {version} vs {req.specifier}"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("onnxruntime")  # never both in one environment


def test_cuda_base_matches_the_cuda_onnxruntime_gpu_links_against(dockerfile) -> None:
    global_args, _, _ = dockerfile
    try:
        dist = importlib.metadata.distribution("onnxruntime-gpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("onnxruntime-gpu is not installed here (not linux/x86_64, or no serve extra)")
    # Its [cuda] extra names the CUDA runtime wheel it was built against: nvidia-cuda-runtime~=13.0
    # (CUDA 13) or nvidia-cuda-runtime-cu12 (CUDA 12).
    majors = set()
    for line in dist.requires or ():
        m = re.match(r"nvidia-cuda-runtime(?:-cu(\d+))?\s*(?:~=|==|>=)?\s*(\d+)?", line)
        if m and 'extra == "cuda"' in line:
            majors.add(m.group(1) or m.group(2))
    unconditional = [r for r in dist.requires or () if "extra ==" not in r]
    assert not [r for r in unconditional if r.startswith("nvidia-")], (
        "CUDA libraries would reach the CPU image"
    )
    if not majors:
        pytest.skip(f"onnxruntime-gpu {dist.version} does not declare its CUDA version in its metadata")
    (major,) = majors
    cuda = re.search(r"nvidia/cuda:(\d+)\.", global_args["CUDA_IMAGE"]).group(1)
    assert cuda == major, f"onnxruntime-gpu {dist.version} needs CUDA {major}, the image has CUDA {cuda}"


# ----------------------------------------------------------------------------------------------------------
# .dockerignore
# ----------------------------------------------------------------------------------------------------------


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a parent folder matches the path."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.strip("/")
        regex = re.escape(pat).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        regex = re.sub(r"\\\[([^\]]*)\\\]", r"[\1]", regex)
        if any(re.fullmatch(regex, c) for c in candidates):
            excluded = not negate
    return excluded


def test_dockerignore_sends_the_sources_and_nothing_else(dockerfile) -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    _, stages, _ = dockerfile
    copied = set()
    for stage in stages.values():
        for copy in stage.all("COPY"):
            if "--from=" in copy:
                continue
            copied.update(copy.split()[:-1])
    assert copied == {"pyproject.toml", "constraints.txt", "README.md", "electra"}
    for source in copied:
        assert (ROOT / source).exists(), source
    needed = [str(p.relative_to(ROOT)) for p in (ROOT / "electra").rglob("*") if p.is_file()]
    needed = [p for p in needed if "__pycache__" not in p and not p.endswith(".pyc")]
    assert any(p.endswith(".html") for p in needed), "the page is package data and must be sent"
    for path in [*copied, *needed, "bundles/detector/bundle.json"]:
        assert not dockerignore_excludes(patterns, path), f".dockerignore drops {path}"
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        "tests/test_helm.py",
        "electra.egg-info/PKG-INFO",
        "electra/serving/__pycache__/app.cpython-311.pyc",
        "electra-demo/corpus.txt",
        "runs/base/metrics.jsonl",
        "helm/electra-server/Chart.yaml",
        "Dockerfile",
    ):
        assert dockerignore_excludes(patterns, path), f".dockerignore sends {path}"


def test_dockerignore_matcher_follows_docker_rules() -> None:
    assert dockerignore_excludes(["*"], "a/b")
    assert not dockerignore_excludes(["*", "!a/"], "a/b")
    assert dockerignore_excludes(["*", "!a/", "**/__pycache__"], "a/x/__pycache__/m.pyc")
    assert dockerignore_excludes(["**/*.py[cod]"], "a/m.pyc")
    assert not dockerignore_excludes(["**/*.py[cod]"], "a/m.py")
    assert fnmatch.fnmatch("m.pyc", "*.py[cod]")
