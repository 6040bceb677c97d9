"""Shared pytest fixtures. Prefect's are opt-in: a flow test module sets
``pytestmark = pytest.mark.usefixtures("prefect_harness")`` or requests ``flow_workspace``.

`make test` runs the suite on two pytest-xdist workers, ``pytest -n 2 --dist loadfile`` (a test module runs whole
on one worker, so its module fixtures, a verl job, a Ray head, a Prefect server, are made once); the xdist
controller starts the background runs (``_ControllerJobs``). The flags are on the command line, not in
``PYTEST_ADDOPTS``: tests that run pytest inside a task repository would inherit them. Measured in
docs/testing.md ("Ninth session"). (``--dist loadgroup`` would let modules share a worker, but pytest-xdist 3.8
sets the group through ``item._nodeid``, which pytest 9.2 no longer reads.)"""

import os
from pathlib import Path

import pytest

# The suite never reaches the HF hub (it is not reachable on dev/CI machines): hub-loading code is tested on local
# files of the hub's schema, and an accidental hub call fails at once instead of waiting on retries.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import fresh_clone_demo  # noqa: E402 - after the environment default above
import verl_learning_job  # noqa: E402
from prefect_fixtures import (  # noqa: F401,E402 - pytest fixtures
    flow_workspace,
    harness_deployments,
    prefect_harness,
    shared_model_cache,
)

import graph_planner  # noqa: E402,F401 - its runtime defaults (OMP_WAIT_POLICY) before any test imports torch

HEAVY_MARKS = ("slow", "ray", "docker")


@pytest.fixture(scope="session")
def bundled_samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled samples prepared once for the session, as `gp data prepare -c local_debug.yaml` does (its root:
    ``swebench/test.jsonl``, ``r2e_gym/train.jsonl``...). Tests read it and write nothing into it."""
    from graph_planner.env.samples import prepare_bundled_samples

    return prepare_bundled_samples(tmp_path_factory.mktemp("bundled-samples"))


#: The long runs the suite starts in the background when collection ends (tests/background.py): each module
#: names its FIXTURE, MODULE, STASH key, ``start(workdir)``, ``attach(workdir)`` and ``can_start()``.
BACKGROUND_JOBS = (verl_learning_job, fresh_clone_demo)


def _needs(job, item: pytest.Item) -> bool:  # noqa: ANN001 - a module of BACKGROUND_JOBS
    return job.FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with heavy tests first (under xdist the longest work starts first), the tests of the background runs
    last (the verl learning run, then the fresh-clone demo: they run beside the suite); each module keeps its own
    order."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    heavy = {module(item) for item in items if any(item.get_closest_marker(mark) for mark in HEAVY_MARKS)}
    items.sort(key=lambda item: (*(_needs(job, item) for job in reversed(BACKGROUND_JOBS)),
                                 module(item) not in heavy))


def _worker_input_key(job) -> str:  # noqa: ANN001
    return f"background_dir:{job.FIXTURE}"


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # an xdist worker: a background run (if its test is selected) is the one the controller started
        for job in BACKGROUND_JOBS:
            if _worker_input_key(job) in workerinput:
                config.stash[job.STASH] = job.attach(Path(workerinput[_worker_input_key(job)]))
    elif config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        config.pluginmanager.register(_ControllerJobs(config), "background-jobs-controller")


class _ControllerJobs:
    """Under pytest-xdist the controller starts each background run once, when the first worker's collection names
    its test module; the workers attach to it (its dir is in their ``workerinput``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.workdirs: dict[str, Path] = {}

    def _dir(self, job) -> Path:  # noqa: ANN001
        if job.FIXTURE not in self.workdirs:  # pytest's own basetemp, kept like tmp_path
            self.workdirs[job.FIXTURE] = self.config._tmp_path_factory.mktemp(job.FIXTURE)
        return self.workdirs[job.FIXTURE]

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
        for job in BACKGROUND_JOBS:
            node.workerinput[_worker_input_key(job)] = str(self._dir(job))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:  # noqa: ANN001
        if self.config.option.collectonly:
            return
        for job in BACKGROUND_JOBS:
            if (job.STASH not in self.config.stash and job.can_start()
                    and any(f"{job.MODULE}::" in nodeid for nodeid in ids)):
                self.config.stash[job.STASH] = job.start(self._dir(job))


def pytest_collection_finish(session: pytest.Session) -> None:
    """A selected test needs a background run (the fresh-clone ``make demo``, the verl learning run): start it now,
    beside the rest of the suite (under xdist the controller starts them)."""
    config = session.config
    if config.option.collectonly or getattr(config, "workerinput", None) is not None:
        return
    for job in BACKGROUND_JOBS:
        if (job.STASH not in config.stash and job.can_start()
                and any(_needs(job, item) for item in session.items)):
            config.stash[job.STASH] = job.start(config._tmp_path_factory.mktemp(job.FIXTURE))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for job in BACKGROUND_JOBS:
        run = session.config.stash.get(job.STASH, None)
        if run is not None:
            run.stop()  # a no-op where the run has ended or was only attached to
