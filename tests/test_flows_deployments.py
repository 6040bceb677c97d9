"""deployments/prefect.yaml: every deployment loads its flow and its parameters validate against the flow's typed
signature (catches moved files, renamed flows, bad parameter names), without a server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from prefect.exceptions import ParameterTypeError
from prefect.flows import load_flow_from_entrypoint

ROOT = Path(__file__).resolve().parent.parent
SPEC = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
DEPLOYMENTS = {d["name"]: d for d in SPEC["deployments"]}


def load(entrypoint: str):
    path, name = entrypoint.split(":")
    return load_flow_from_entrypoint(f"{ROOT / path}:{name}")


def test_the_three_deployments_exist_with_run_names_ci_can_call() -> None:
    names = {f"{load(d['entrypoint']).name}/{d['name']}" for d in SPEC["deployments"]}
    assert names == {"evaluate/nightly-eval", "train/train", "pipeline/pipeline"}


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_deployment_parameters_validate_against_the_flow(name: str) -> None:
    deployment = DEPLOYMENTS[name]
    flow = load(deployment["entrypoint"])
    validated = flow.validate_parameters(deployment["parameters"])
    assert Path(ROOT / validated["config_path"]).is_file()
    assert deployment["work_pool"]["name"] == "graph-planner-process"


def test_nightly_eval_runs_at_two_utc_and_the_others_on_demand() -> None:
    (schedule,) = DEPLOYMENTS["nightly-eval"]["schedules"]
    assert (schedule["cron"], schedule["timezone"], schedule["active"]) == ("0 2 * * *", "UTC", True)
    assert not DEPLOYMENTS["train"].get("schedules") and not DEPLOYMENTS["pipeline"].get("schedules")


def test_typed_parameters_reject_bad_input_before_any_run() -> None:
    flow = load(DEPLOYMENTS["nightly-eval"]["entrypoint"])
    assert flow.validate_parameters({"limit": "3"})["limit"] == 3
    with pytest.raises(ParameterTypeError):
        flow.validate_parameters({"limit": "three"})
    with pytest.raises(ParameterTypeError):
        flow.validate_parameters({"overrides": "training.lr=1"})  # must be a list of KEY=VALUE items



def test_every_flow_parameter_has_a_description_for_the_run_form() -> None:
    """The UI's "Custom run" form and `prefect deployment run --param` show these descriptions."""
    from flows.evaluate import evaluate
    from flows.pipeline import pipeline
    from flows.prepare_data import prepare_data
    from flows.train import train

    for flow_ in (pipeline, train, evaluate, prepare_data):
        properties = flow_.parameters.model_dump()["properties"]
        missing = [name for name, schema in properties.items() if not schema.get("description")]
        assert not missing, f"flow {flow_.name}: parameters without a description: {missing}"


DESCRIBED_DEFAULT = re.compile(r"default: the config's ([\w.]+), which is (.+?) in (configs/\S+?\.yaml)")


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_every_described_default_is_the_deployments_effective_config_value(name: str) -> None:
    """A run-form description that states a default states the value the deployment's config gives (nightly-eval's
    ``limit`` said "(default: all)" while the config's ``eval.limit: 4`` applied)."""
    from graph_planner.config.loader import load_run_config

    deployment = DEPLOYMENTS[name]
    config_path = deployment["parameters"]["config_path"]
    config = load_run_config(str(ROOT / config_path), write=False).model_dump(mode="json")
    properties = load(deployment["entrypoint"]).parameters.model_dump()["properties"]
    checked = 0
    for parameter, schema in properties.items():
        description = " ".join(schema.get("description", "").split())
        claims = DESCRIBED_DEFAULT.findall(description)
        assert description.count("default") == len(claims), (
            f"{name}.{parameter}: a default not stated as the config's value: {description!r}")
        for key, value, file in claims:
            assert file == config_path, f"{name}.{parameter} names {file}, the deployment runs {config_path}"
            actual = config
            for part in key.split("."):
                actual = actual[part]
            assert value == str(actual), f"{name}.{parameter}: says {key} is {value!r}, {config_path} gives {actual!r}"
            checked += 1
    if name == "nightly-eval":
        assert checked == 3  # dataset, limit, model
