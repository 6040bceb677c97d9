"""Shared pytest fixtures. Prefect's are opt-in: a flow test module sets
``pytestmark = pytest.mark.usefixtures("prefect_harness")`` or requests ``flow_workspace``."""

import os

import pytest

# The suite never reaches the HF hub (it is not reachable on dev/CI machines): hub-loading code is tested on local
# files of the hub's schema, and an accidental hub call fails at once instead of waiting on retries.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import fresh_clone_demo  # noqa: E402 - after the environment default above
from prefect_fixtures import (  # noqa: F401,E402 - pytest fixtures
    flow_workspace,
    harness_deployments,
    prefect_harness,
    shared_model_cache,
)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A selected test needs the fresh-clone ``make demo``: start it now, beside the rest of the suite."""
    if not fresh_clone_demo.venv_installed() or session.config.option.collectonly:
        return
    if any(fresh_clone_demo.FIXTURE in getattr(item, "fixturenames", ()) for item in session.items):
        workdir = session.config._tmp_path_factory.mktemp("fresh")  # pytest's own basetemp, kept like tmp_path
        session.config.stash[fresh_clone_demo.BACKGROUND_DEMO] = fresh_clone_demo.BackgroundDemo(workdir)


def pytest_sessionfinish(session: pytest.Session) -> None:
    demo = session.config.stash.get(fresh_clone_demo.BACKGROUND_DEMO, None)
    if demo is not None:
        demo.stop()
