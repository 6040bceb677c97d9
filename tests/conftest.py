"""Shared pytest fixtures. Prefect's are opt-in: a flow test module sets
``pytestmark = pytest.mark.usefixtures("prefect_harness")`` or requests ``flow_workspace``."""

from prefect_fixtures import flow_workspace, prefect_harness, shared_model_cache  # noqa: F401 - pytest fixtures
