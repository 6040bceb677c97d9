"""Shared pytest fixtures. Prefect's are opt-in: a flow test module sets
``pytestmark = pytest.mark.usefixtures("prefect_harness")`` or requests ``flow_workspace``.

The suite also runs on pytest-xdist workers as ``pytest -n 2 --dist loadfile`` (a test module runs whole on one
worker, so its module fixtures, a verl job, a Ray head, a Prefect server, are made once). It is not `make test`'s
way: on an idle 2-core machine it took 36:19 against ~21-25 min sequentially (2026-11-28, docs/testing.md), the two
workers, the background demo and the Ray / Docker daemons oversubscribing two cores.
(``--dist loadgroup`` would let modules share a worker, but pytest-xdist 3.8 sets the group through
``item._nodeid``, which pytest 9.2 no longer reads.)"""

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

HEAVY_MARKS = ("slow", "ray", "docker")


@pytest.fixture(scope="session")
def bundled_samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled samples prepared once for the session, as `gp data prepare -c local_debug.yaml` does (its root:
    ``swebench/test.jsonl``, ``r2e_gym/train.jsonl``...). Tests read it and write nothing into it."""
    from graph_planner.env.samples import prepare_bundled_samples

    return prepare_bundled_samples(tmp_path_factory.mktemp("bundled-samples"))


def _needs_demo(item: pytest.Item) -> bool:
    return fresh_clone_demo.FIXTURE in getattr(item, "fixturenames", ())


def _needs_learning(item: pytest.Item) -> bool:
    return verl_learning_job.FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with heavy tests first (under xdist the longest work starts first), the tests of the background runs
    last (the verl learning run, then the fresh-clone demo: they run beside the suite); each module keeps its own
    order."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    heavy = {module(item) for item in items if any(item.get_closest_marker(mark) for mark in HEAVY_MARKS)}
    items.sort(key=lambda item: (_needs_demo(item), _needs_learning(item), module(item) not in heavy))


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and fresh_clone_demo.WORKER_INPUT in workerinput:
        # an xdist worker: the demo (if the test is selected) is the one the controller started
        config.stash[fresh_clone_demo.BACKGROUND_DEMO] = fresh_clone_demo.BackgroundDemo.attach(
            Path(workerinput[fresh_clone_demo.WORKER_INPUT]))
    elif config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        config.pluginmanager.register(_ControllerDemo(config), "fresh-clone-demo-controller")


class _ControllerDemo:
    """Under pytest-xdist the controller starts the demo once, when the first worker's collection names the
    fresh-clone test; the workers attach to it (its dir is in their ``workerinput``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.workdir: Path | None = None

    def _dir(self) -> Path:
        if self.workdir is None:
            self.workdir = self.config._tmp_path_factory.mktemp("fresh")  # pytest's own basetemp, kept like tmp_path
        return self.workdir

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
        node.workerinput[fresh_clone_demo.WORKER_INPUT] = str(self._dir())

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:  # noqa: ANN001
        if fresh_clone_demo.BACKGROUND_DEMO in self.config.stash or self.config.option.collectonly:
            return
        if fresh_clone_demo.venv_installed() and any(f"{fresh_clone_demo.MODULE}::" in nodeid for nodeid in ids):
            self.config.stash[fresh_clone_demo.BACKGROUND_DEMO] = fresh_clone_demo.BackgroundDemo(self._dir())


def pytest_collection_finish(session: pytest.Session) -> None:
    """A selected test needs the fresh-clone ``make demo`` or the verl learning run: start it now, beside the rest
    of the suite (under xdist the controller starts the demo, and a worker's fixture its own learning run)."""
    config = session.config
    if config.option.collectonly or getattr(config, "workerinput", None) is not None:
        return
    if (fresh_clone_demo.venv_installed() and fresh_clone_demo.BACKGROUND_DEMO not in config.stash
            and any(_needs_demo(item) for item in session.items)):
        workdir = config._tmp_path_factory.mktemp("fresh")  # pytest's own basetemp, kept like tmp_path
        config.stash[fresh_clone_demo.BACKGROUND_DEMO] = fresh_clone_demo.BackgroundDemo(workdir)
    if verl_learning_job.BACKGROUND_LEARNING not in config.stash and any(map(_needs_learning, session.items)):
        workdir = config._tmp_path_factory.mktemp("verl_learning")
        config.stash[verl_learning_job.BACKGROUND_LEARNING] = verl_learning_job.start(workdir)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for key in (fresh_clone_demo.BACKGROUND_DEMO, verl_learning_job.BACKGROUND_LEARNING):
        job = session.config.stash.get(key, None)
        if job is not None:
            job.stop()  # a no-op where the job has ended or was only attached to
