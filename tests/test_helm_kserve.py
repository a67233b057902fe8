"""The chart's KServe mode (kserve.enabled): a ServingRuntime and an InferenceService, checked against
KServe's published CRD schemas.

kubernetes-validate knows only the built-in API, so the two custom resources are validated here with
jsonschema against the openAPIV3Schema of the served version in KServe's own CRD files (release v0.20.0,
stored verbatim, gzip-compressed, in tests/fixtures/kserve/ with their source and license; the test first
checks that they decompress to the upstream git blobs). The schemas are made strict the way the API server's
strict field validation (`kubectl apply --validate=strict`) treats them: an unknown field is an error, not
silently pruned. The predictor pod KServe would build from the two is also validated strictly as a core
PodTemplate, and the server's own settings parser reads the environment it would get.

Not checked here (needs a cluster with KServe): CEL rules (x-kubernetes-validations), KServe's admission
webhooks, and the controller's merge of the runtime and the InferenceService (approximated by
tests.helm_tools.kserve_pod_spec).
"""

from __future__ import annotations

import argparse
import copy
import functools
import gzip
import hashlib
import re
from pathlib import Path

import pytest
import yaml

from tests.helm_tools import (
    kinds,
    kserve_pod_spec,
    one,
    render,
    render_error,
    require_kubernetes_validate,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kserve"
KSERVE_TAG = "v0.20.0"
# kind -> (fixture, served apiVersion, git blob id of the upstream file at KSERVE_TAG)
CRDS = {
    "ServingRuntime": (
        "serving.kserve.io_servingruntimes.yaml.gz",
        "serving.kserve.io/v1alpha1",
        "59deb0d14aed7be7edfd32ca0577f9ba789fa747",
    ),
    "InferenceService": (
        "serving.kserve.io_inferenceservices.yaml.gz",
        "serving.kserve.io/v1beta1",
        "1e37d05b7a741eb40b9eb01c378dc9dc80eab3d9",
    ),
}
FULLNAME = "rel-electra-server"
KSERVE = "kserve-values.yaml"
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# ----------------------------------------------------------------------------------------------------------
# KServe's CRD schemas
# ----------------------------------------------------------------------------------------------------------


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@functools.cache
def _crd_bytes(kind: str) -> bytes:
    return gzip.decompress((FIXTURES / CRDS[kind][0]).read_bytes())


def strict(schema: object) -> object:
    """A CRD's structural schema as a JSON schema that rejects what strict field validation rejects: objects
    with `properties` allow no other keys (unless x-kubernetes-preserve-unknown-fields), int-or-string fields
    take an integer or a string, `nullable` fields take null."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


@functools.cache
def validator(kind: str):
    """A jsonschema validator for the served version of KServe's CRD for kind (OpenAPI v3 ~ draft 4)."""
    jsonschema = pytest.importorskip("jsonschema")
    crd = yaml.load(_crd_bytes(kind), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    _, api_version, _ = CRDS[kind]
    group, version = api_version.split("/")
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["group"] == group
    assert crd["spec"]["names"]["kind"] == kind
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    assert version in served, f"{kind}: KServe {KSERVE_TAG} does not serve {api_version}: {sorted(served)}"
    schema = strict(served[version]["schema"]["openAPIV3Schema"])
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def crd_errors(doc: dict) -> list[str]:
    """What KServe's CRD schema (and the API server's ObjectMeta rules, in brief) reject in doc."""
    kind = doc["kind"]
    _, api_version, _ = CRDS[kind]
    errors = (
        [f"apiVersion {doc['apiVersion']!r}, want {api_version!r}"]
        if doc["apiVersion"] != api_version
        else []
    )
    meta = doc.get("metadata", {})
    name_re = DNS1035 if kind == "InferenceService" else DNS1123  # KServe wants DNS-1035 service names
    if not name_re.match(meta.get("name", "")) or len(meta.get("name", "")) > 63:
        errors.append(f"metadata.name {meta.get('name')!r}")
    for key, value in (meta.get("labels") or {}).items():
        if not (isinstance(value, str) and LABEL_VALUE.match(value) and len(value) <= 63):
            errors.append(f"metadata.labels[{key}] {value!r}")
    for key, value in (meta.get("annotations") or {}).items():
        if not isinstance(value, str):
            errors.append(f"metadata.annotations[{key}] is not a string: {value!r}")
    for e in validator(kind).iter_errors(doc):
        errors.append(f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}")
    return errors


def kserve_docs(*values: str, **kw) -> tuple[dict, dict, list[dict]]:
    docs = render(*values, **kw)
    return one(docs, "ServingRuntime"), one(docs, "InferenceService"), docs


def test_crd_fixtures_are_kserves_published_files() -> None:
    for kind, (name, _, blob) in CRDS.items():
        assert _git_blob_id(_crd_bytes(kind)) == blob, f"{name} is not {KSERVE_TAG}'s file (see README.md)"
    readme = (FIXTURES / "README.md").read_text()
    assert KSERVE_TAG in readme and "Apache License 2.0" in readme
    assert "Apache License" in (FIXTURES / "LICENSE").read_text()


# ----------------------------------------------------------------------------------------------------------
# the rendered resources against the schemas
# ----------------------------------------------------------------------------------------------------------

VARIANTS = [
    pytest.param((KSERVE,), (), (), id="ci"),
    pytest.param(
        (KSERVE,),
        (
            "gpu.enabled=false",
            "image.tag=",
            "server.threads=4",
            "kserve.deploymentMode=Knative",
            "kserve.scaleMetric=concurrency",
            "kserve.scaleTarget=8",
            "kserve.timeout=120",
            "kserve.minReplicas=0",
            "kserve.maxReplicas=0",
            "kserve.name=detector",
            "kserve.runtime.name=electra-cpu",
            "apiKeys.enabled=true",
            "apiKeys.keys[0]=0123456789abcdef0123",
            "server.accessLog=true",
            "preStopSleepSeconds=0",
        ),
        (
            'extraEnv=[{"name":"A","value":"1"}]',
            'extraEnvFrom=[{"secretRef":{"name":"s"}}]',
            'extraVolumes=[{"name":"x","emptyDir":{}}]',
            'extraVolumeMounts=[{"name":"x","mountPath":"/x"}]',
            'imagePullSecrets=[{"name":"regcred"}]',
            'podLabels={"team":"nlp"}',
            'podAnnotations={"a":"b"}',
            'kserve.annotations={"example.com/owner":"nlp"}',
        ),
        id="cpu-knative-everything",
    ),
    pytest.param(
        (KSERVE,),
        (
            "models[1].name=sst2",
            "models[1].path=sst2-int8",
            "kserve.storageUri=pvc://electra-bundles/bundles",
        ),
        ('affinity={"podAntiAffinity":{}}', "topologySpreadConstraints=[]"),
        id="two-models-pvc",
    ),
]


@pytest.mark.parametrize(("values", "sets", "set_json"), VARIANTS)
def test_rendered_kserve_resources_match_kserves_crd_schemas(values, sets, set_json) -> None:
    runtime, isvc, _ = kserve_docs(*values, sets=sets, set_json=set_json)
    assert crd_errors(runtime) == []
    assert crd_errors(isvc) == []


@pytest.mark.parametrize(
    ("kind", "path", "value", "expected"),
    [
        # a misspelt field: pruned silently by a lax API server, an error under strict validation
        ("ServingRuntime", ("spec", "containers", 0, "readinessProbes"), {}, "readinessProbes"),
        ("ServingRuntime", ("spec", "protocolVersion"), ["v2"], "protocolVersion"),
        ("InferenceService", ("spec", "predictor", "model", "storageURI"), "s3://x/", "storageURI"),
        ("InferenceService", ("spec", "predictor", "minReplica"), 1, "minReplica"),
        # wrong types and values
        ("InferenceService", ("spec", "predictor", "minReplicas"), "two", "is not of type 'integer'"),
        ("InferenceService", ("spec", "predictor", "scaleMetric"), "gpu", "is not one of"),
        ("ServingRuntime", ("spec", "supportedModelFormats", 0, "priority"), 0, "minimum"),
        (
            "ServingRuntime",
            ("spec", "containers", 0, "resources", "limits", "memory"),
            "8 GB",
            "does not match",
        ),
        ("ServingRuntime", ("spec", "containers", 0, "ports", 0, "containerPort"), "8000", "not of type"),
    ],
)
def test_a_broken_object_fails_validation(kind: str, path: tuple, value: object, expected: str) -> None:
    """The check has teeth: one wrong field in an otherwise valid rendered object is reported."""
    runtime, isvc, _ = kserve_docs(KSERVE)
    doc = copy.deepcopy(runtime if kind == "ServingRuntime" else isvc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    errors = crd_errors(doc)
    assert errors, f"{kind} with {path}={value!r} passed validation"
    assert any(expected in e for e in errors), errors


def test_missing_required_fields_fail_validation() -> None:
    runtime, isvc, _ = kserve_docs(KSERVE)
    runtime = copy.deepcopy(runtime)
    del runtime["spec"]["containers"]
    assert any("'containers' is a required property" in e for e in crd_errors(runtime))
    isvc = copy.deepcopy(isvc)
    del isvc["spec"]["predictor"]["model"]["modelFormat"]["name"]
    assert any("'name' is a required property" in e for e in crd_errors(isvc))
    bad_name = copy.deepcopy(isvc)
    bad_name["metadata"]["name"] = "9-detector"
    assert any("metadata.name" in e for e in crd_errors(bad_name))
    assert crd_errors(dict(isvc, apiVersion="serving.kserve.io/v1")) != []


def test_the_predictor_pod_is_a_valid_core_pod_template() -> None:
    """The pod KServe builds (runtime container + predictor fields) passes kubernetes-validate --strict."""
    require_kubernetes_validate()
    import kubernetes_validate
    from kubernetes_validate.utils import latest_version

    for values, sets, set_json in [p.values for p in VARIANTS]:
        runtime, isvc, _ = kserve_docs(*values, sets=sets, set_json=set_json)
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "predictor", "namespace": "ml"},
            "template": {
                "metadata": {"labels": isvc["spec"]["predictor"]["labels"]},
                "spec": kserve_pod_spec(runtime, isvc),
            },
        }
        for version in ("1.28.0", latest_version()):
            kubernetes_validate.validate(template, version, strict=True)


# ----------------------------------------------------------------------------------------------------------
# what the resources say
# ----------------------------------------------------------------------------------------------------------


def test_kserve_mode_replaces_the_deployment_service_and_autoscaling() -> None:
    runtime, isvc, docs = kserve_docs(KSERVE)
    assert kinds(docs) == sorted(
        ["ConfigMap", "InferenceService", "Pod", "PodDisruptionBudget", "ServiceAccount", "ServingRuntime"]
    )
    assert runtime["metadata"]["name"] == FULLNAME and isvc["metadata"]["name"] == FULLNAME
    # The PDB and the topology spread select the predictor pods by the labels the InferenceService gives them.
    selector = one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]
    pod_labels = isvc["spec"]["predictor"]["labels"]
    assert selector.items() <= pod_labels.items()
    for c in isvc["spec"]["predictor"]["topologySpreadConstraints"]:
        assert c["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    test_pod = one(docs, "Pod")
    assert test_pod["spec"]["containers"][0]["command"][-1] == f"http://{FULLNAME}-predictor.ml/health/ready"
    # Off by default: the plain chart renders no KServe resources.
    assert {"ServingRuntime", "InferenceService"}.isdisjoint(kinds(render("gpu-values.yaml")))


def test_runtime_runs_electra_serve_with_the_v2_protocol_on_a_gpu() -> None:
    runtime, isvc, _ = kserve_docs(KSERVE)
    spec = runtime["spec"]
    assert spec["protocolVersions"] == ["v2"]
    assert spec["supportedModelFormats"] == [
        {"name": "electra-onnx", "version": "1", "autoSelect": True, "priority": 1}
    ]
    assert spec["annotations"] == {
        "prometheus.kserve.io/port": "8000",
        "prometheus.kserve.io/path": "/metrics",
    }
    (c,) = spec["containers"]
    assert c["name"] == "kserve-container"  # the container KServe merges predictor.model into
    assert c["image"] == "registry.example.com/ml/electra-server:0.1.0-cuda"
    assert c["command"] == ["electra", "serve"]
    assert c["ports"] == [{"name": "http1", "containerPort": 8000, "protocol": "TCP"}]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["startupProbe"]["httpGet"] == {"path": "/health/ready", "port": 8000}
    assert c["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": 8000}
    assert c["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": 8000}
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 300
    assert {"configMapRef": {"name": FULLNAME}} in c["envFrom"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["NVIDIA-L4"]
    pred = isvc["spec"]["predictor"]
    assert pred["runtimeClassName"] == "nvidia"
    assert pred["model"]["resources"] == c["resources"]
    # A custom port follows everywhere.
    runtime, _, docs = kserve_docs(KSERVE, sets=("server.port=9000",))
    c = runtime["spec"]["containers"][0]
    assert c["ports"][0]["containerPort"] == 9000 and c["readinessProbe"]["httpGet"]["port"] == 9000
    assert one(docs, "ConfigMap")["data"]["ELECTRA_PORT"] == "9000"


def test_inference_service_uses_the_runtime_and_the_storage_initializers_models() -> None:
    runtime, isvc, docs = kserve_docs(KSERVE)
    meta, pred = isvc["metadata"], isvc["spec"]["predictor"]
    assert meta["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"
    assert meta["annotations"]["serving.kserve.io/enable-prometheus-scraping"] == "true"
    model = pred["model"]
    assert model["modelFormat"] == {"name": "electra-onnx", "version": "1"}
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["protocolVersion"] == "v2"
    assert model["storageUri"] == "s3://ml-bundles/electra/detector-v3/"
    # One bundle: storageUri is the bundle, served from /mnt/models itself under models[0].name.
    assert model["env"] == [{"name": "ELECTRA_MODELS", "value": "detector=/mnt/models"}]
    assert "ELECTRA_MODELS" not in one(docs, "ConfigMap")["data"]
    assert (pred["minReplicas"], pred["maxReplicas"], pred["scaleMetric"], pred["scaleTarget"]) == (
        1,
        4,
        "cpu",
        70,
    )
    assert pred["serviceAccountName"] == FULLNAME and pred["automountServiceAccountToken"] is False
    assert pred["securityContext"]["runAsUser"] == 10001
    assert pred["terminationGracePeriodSeconds"] == 5 + 30 + 10
    assert pred["annotations"]["checksum/config"]
    # Several bundles: sub-folders of storageUri (models[].path, default the name), or absolute paths.
    _, isvc, _ = kserve_docs(
        KSERVE,
        sets=(
            "models[1].name=sst2",
            "models[1].path=sst2-int8",
            "models[2].name=mnli",
            "models[3].name=x",
            "models[3].path=/opt/x",
        ),
    )
    env = isvc["spec"]["predictor"]["model"]["env"][0]["value"]
    assert env == "detector=/mnt/models/detector,sst2=/mnt/models/sst2-int8,mnli=/mnt/models/mnli,x=/opt/x"
    # A config change changes the checksum, which rolls the predictor pods.
    _, other, _ = kserve_docs(KSERVE, sets=("server.maxQueue=7",))
    assert (
        other["spec"]["predictor"]["annotations"]["checksum/config"] != pred["annotations"]["checksum/config"]
    )


def test_the_servers_own_parser_accepts_the_predictors_environment() -> None:
    from electra.cli.serve_cmd import OPTIONS, settings_from

    runtime, isvc, docs = kserve_docs(KSERVE, sets=("gpu.enabled=false", "image.tag=", "server.threads=2"))
    c = next(c for c in kserve_pod_spec(runtime, isvc)["containers"] if c["name"] == "kserve-container")
    environ = dict(one(docs, "ConfigMap")["data"])
    environ.update({e["name"]: e["value"] for e in c["env"]})
    args = argparse.Namespace(model=None, **{o.replace("-", "_"): None for o in OPTIONS})
    s = settings_from(args, environ=environ)
    assert s.host == "0.0.0.0" and s.port == 8000 and s.device == "cpu" and s.threads == 2
    assert [(m.name, str(m.path)) for m in s.models] == [("detector", "/mnt/models")]
    assert c["image"].endswith("-cpu") and "nvidia.com/gpu" not in c["resources"].get("limits", {})


def test_api_keys_are_mounted_into_the_runtime() -> None:
    runtime, _, docs = kserve_docs(KSERVE, sets=("apiKeys.enabled=true", "apiKeys.existingSecret=keys"))
    c = runtime["spec"]["containers"][0]
    assert {"name": "api-keys", "mountPath": "/etc/electra/api-keys", "readOnly": True} in c["volumeMounts"]
    vol = next(v for v in runtime["spec"]["volumes"] if v["name"] == "api-keys")
    assert vol["secret"]["secretName"] == "keys"
    assert one(docs, "ConfigMap")["data"]["ELECTRA_API_KEY_FILE"] == "/etc/electra/api-keys/keys"


# ----------------------------------------------------------------------------------------------------------
# the chart's checks
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (("modelStorage.type=pvc", "modelStorage.pvc.existingClaim=c"), "unset modelStorage.type"),
        (("models[0].url=https://h/d.tgz",), "models[name=detector].url is not used with kserve.enabled"),
        (("kserve.storageUri=",), "kserve.enabled needs kserve.storageUri"),
        (
            ("autoscaling.enabled=true", "autoscaling.queueSize.enabled=true"),
            "autoscaling.enabled has no effect",
        ),
        (("keda.enabled=true",), "keda.enabled has no effect"),
        (("ingress.enabled=true",), "ingress.enabled has no effect"),
        (("metrics.serviceMonitor.enabled=true",), "metrics.podAnnotations=true"),
        (("kserve.minReplicas=5",), "kserve.maxReplicas must be >= kserve.minReplicas"),
        (("models=null",), "models is empty"),
    ],
)
def test_kserve_checks_say_what_to_fix(sets: tuple[str, ...], expected: str) -> None:
    assert expected in render_error(KSERVE, sets=sets)


def test_an_image_baked_bundle_needs_no_storage_uri() -> None:
    _, isvc, _ = kserve_docs(KSERVE, sets=("kserve.storageUri=", "models[0].path=/models/detector"))
    model = isvc["spec"]["predictor"]["model"]
    assert "storageUri" not in model
    assert model["env"][0]["value"] == "detector=/models/detector"
    assert crd_errors(isvc) == []


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (("kserve.deploymentMode=Serverfull",), "at '/kserve/deploymentMode'"),
        (("kserve.scaleMetric=gpu",), "at '/kserve/scaleMetric'"),
        (("kserve.name=Detector",), "at '/kserve/name'"),
        (("kserve.storageUri=bucket/x",), "at '/kserve/storageUri'"),
        (("kserve.replicas=2",), "additional properties 'replicas' not allowed"),
    ],
)
def test_schema_rejects_bad_kserve_values(sets: tuple[str, ...], expected: str) -> None:
    err = render_error(KSERVE, sets=sets)
    assert "values don't meet the specifications of the schema" in err and expected in err
