"""The registry of model kinds (electra.serving.engine.kinds): every kind has its route, request, result, v2
tensors and Hugging Face task, the server serves what the registry says, and no module of the server writes a
kind's name itself: what it branches on comes from the registry."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from litestar.testing import TestClient

from electra.bundle import EXPORTABLE_KINDS
from electra.serving.engine import requests
from electra.serving.engine.kinds import KINDS, ModelKind, Tensor, register, served_by
from electra.serving.engine.runtime import ModelRunner
from electra.serving.http.app import create_app
from electra.serving.http.model_config import CONFIG_TYPES
from electra.serving.http.protocols import V2_TENSORS
from electra.serving.settings import ModelSpec, ServeSettings

SERVING = Path(__file__).parent.parent / "electra" / "serving"
# The Hugging Face pipeline tasks a kind may answer as (transformers' names).
HF_TASKS = {"text-classification", "token-classification", "feature-extraction", "fill-mask"}


@pytest.fixture(scope="module")
def runners(serving_bundles: dict[str, Path]) -> dict[str, ModelRunner]:
    """One loaded model of each bundle kind."""
    names = {"discriminator": "detector", "classifier": "sentiment", "tagger": "tagger"}
    return {kind: ModelRunner(name, serving_bundles[name]) for kind, name in names.items()}


def test_every_kind_has_its_route_request_result_tensors_and_task(runners: dict[str, ModelRunner]) -> None:
    assert set(KINDS) >= set(EXPORTABLE_KINDS) | {"embedder"}
    routes = [kind.route for kind in KINDS.values()]
    assert len(set(routes)) == len(routes) and all(r.startswith("/") for r in routes)
    for kind in KINDS.values():
        assert kind.request.__module__ == requests.__name__ and dataclasses.is_dataclass(kind.request)
        assert isinstance(kind.result, type)
        assert kind.hf_task in HF_TASKS
        assert kind.bundles and set(kind.bundles) <= set(EXPORTABLE_KINDS)
        assert kind.v2_inputs and all(t.datatype == "BYTES" for t in kind.v2_inputs)
        for bundle_kind in kind.bundles:
            outputs = kind.v2_outputs(runners[bundle_kind])
            assert outputs and all(isinstance(t, Tensor) for t in outputs)
            assert all(t.datatype in CONFIG_TYPES for t in outputs)
            assert len({t.name for t in outputs}) == len(outputs)


def test_each_bundle_kind_serves_its_own_kind_first_and_the_embedder() -> None:
    for bundle_kind in EXPORTABLE_KINDS:
        served = [k.name for k in served_by(bundle_kind)]
        assert served[0] == bundle_kind and "embedder" in served


def test_the_server_answers_every_registered_route_and_v2_for_every_bundle_kind(
    serving_bundles: dict[str, Path],
) -> None:
    models = tuple(ModelSpec(n, serving_bundles[n]) for n in ("detector", "sentiment", "tagger"))
    app = create_app(ServeSettings(models=models))
    paths = {route.path for route in app.routes}
    assert {kind.route for kind in KINDS.values()} <= paths
    assert set(V2_TENSORS) == set(KINDS)  # the embedder's too: a request asking for `embeddings`
    with TestClient(app) as client:
        for spec in models:
            runner = app.state.electra.runners[spec.name]
            metadata = client.get(f"/v2/models/{spec.name}").json()
            want = KINDS[runner.kind].v2_outputs(runner)
            # The model's own kind's outputs first, then the embedder's that its kind does not have.
            assert [o["name"] for o in metadata["outputs"]] == [t.name for t in want] + ["embeddings"]


def test_a_kind_or_route_is_registered_once() -> None:
    taken = KINDS["classifier"]
    with pytest.raises(ValueError, match="already registered"):
        register(taken)
    with pytest.raises(ValueError, match="already registered"):
        register(dataclasses.replace(taken, name="another"))
    assert "another" not in KINDS and isinstance(taken, ModelKind)


def kind_names_written(path: Path) -> list[tuple[int, str]]:
    """String constants in `path` that are exactly a registered kind's name or a bundle kind, with their
    lines (prose that mentions one is a longer string, not a match)."""
    names = set(KINDS) | set(EXPORTABLE_KINDS)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names
    ]


def test_no_module_of_the_server_writes_a_kind_name_but_the_registry() -> None:
    """What the server branches on comes from the registry: its constants and its entries' fields."""
    found = {
        str(path.relative_to(SERVING)): written
        for path in sorted(SERVING.rglob("*.py"))
        if path.name != "kinds.py" and (written := kind_names_written(path))
    }
    assert found == {}


def test_the_check_sees_a_kind_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""A "tagger" in prose."""\n\nif kind == "tagger":\n    pass\n')
    assert kind_names_written(module) == [(3, "tagger")]
