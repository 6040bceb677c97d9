"""Shared pytest fixtures. Prefect's are opt-in: a flow test module sets
``pytestmark = pytest.mark.usefixtures("prefect_harness")`` or requests ``flow_workspace``."""

import os

# The suite never reaches the HF hub (it is not reachable on dev/CI machines): hub-loading code is tested on local
# files of the hub's schema, and an accidental hub call fails at once instead of waiting on retries.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from prefect_fixtures import flow_workspace, prefect_harness, shared_model_cache  # noqa: F401 - pytest fixtures
