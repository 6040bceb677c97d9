# Two set-up commands: `make demo` (main job on the embedded default) and `make test` (whole suite).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export RAY_AUTH_MODE := token
export HF_HUB_OFFLINE := 1

.PHONY: venv demo test test-fast deploy undeploy docker-up docker-down clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first: the pinned CPU build (an unpinned torch pulls a multi-GB CUDA build)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[train,dev]"
	@touch $(STAMP)

venv: $(STAMP)

# The main job: the pipeline flow on configs/experiments/local_debug.yaml (ephemeral Prefect, results cached here).
demo: $(STAMP)
	PREFECT_HOME=$(CURDIR)/.cache/prefect $(BIN)/python -m flows.demo

# A local Prefect server + process worker with the deployments of deployments/prefect.yaml (UI on :4200).
deploy: $(STAMP)
	bash scripts/prefect-local.sh start

undeploy:
	bash scripts/prefect-local.sh stop

# As root (and always in CI) the docker tests get a real engine + registry (scripts/docker-up.sh); elsewhere they skip.
test: $(STAMP)
	@if [ "$${CI:-}" = "true" ] || [ "$$(id -u)" = "0" ]; then bash scripts/docker-up.sh >/dev/null || echo "docker-up failed (docker tests will report why)"; fi; \
	if [ -f .cache/docker/env.sh ]; then . ./.cache/docker/env.sh; fi; \
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not docker and not slow and not ray"

docker-up:
	bash scripts/docker-up.sh

docker-down:
	bash scripts/docker-down.sh

clean:
	rm -rf $(VENV) runs prepared .pytest_cache
