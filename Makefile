# Two set-up commands: `make demo` (main job on the embedded default) and `make test` (whole suite).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements/lock.txt
# the installer itself, pinned: uv installs the locked set without resolving (seconds instead of minutes)
UV_VERSION := 0.13.9
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export RAY_AUTH_MODE := token

.PHONY: venv demo demo-learning demo-transfer test test-fast deploy undeploy docker-up docker-down lock clean

# Install from the committed lock, never resolving: torch (the CPU build named in the lock) with pip, which finds
# it where the machine keeps it (pip's find-links / the PyTorch CPU index); everything else with uv --no-deps.
# Both compile to bytecode at install (pip's default; uv's --compile-bytecode): where PYTHONDONTWRITEBYTECODE is
# set (it is on these machines) nothing is ever cached and every process recompiles what it imports (torch 6 s ->
# 2.6 s, verl 16 s -> 6 s, a sandboxed pytest run 0.6 s -> 0.3 s).
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --no-compile "uv==$(UV_VERSION)"
	$(BIN)/pip install -q --disable-pip-version-check --no-deps "$$(grep -E '^torch==' $(LOCK))"
	grep -vE '^torch==' $(LOCK) | $(BIN)/uv pip install -q --python $(BIN)/python --no-deps --compile-bytecode -r -
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	$(BIN)/uv pip check -q --python $(BIN)/python
	@touch $(STAMP)

venv: $(STAMP)

# The main job: the pipeline flow on configs/experiments/local_learning.yaml (SFT warm start -> GRPO with the oracle
# synthesiser -> eval; ephemeral Prefect, results cached here), then the base / SFT / GRPO table.
demo: $(STAMP)
	@mkdir -p .cache/prefect
	PREFECT_HOME=$(CURDIR)/.cache/prefect HF_HUB_OFFLINE=1 $(BIN)/python -m flows.demo

# The longer learning run of docs/training.md (20 GRPO steps instead of 10: the reward keeps rising).
demo-learning: $(STAMP)
	@mkdir -p .cache/prefect
	PREFECT_HOME=$(CURDIR)/.cache/prefect HF_HUB_OFFLINE=1 $(BIN)/python -m flows.demo \
		--set training.total_steps=20 --set training.total_epochs=20

# Does learning transfer? Synthesised bugs of the bundled repos split by code location: SFT + GRPO on train, base /
# SFT / GRPO measured on held-out val and test locations (configs/experiments/local_transfer.yaml, docs/training.md).
demo-transfer: $(STAMP)
	@mkdir -p .cache/prefect
	PREFECT_HOME=$(CURDIR)/.cache/prefect HF_HUB_OFFLINE=1 $(BIN)/python -m flows.demo \
		--config configs/experiments/local_transfer.yaml

# A local Prefect server + process worker with the deployments of deployments/prefect.yaml (UI on :4200).
deploy: $(STAMP)
	bash scripts/prefect-local.sh start

undeploy:
	bash scripts/prefect-local.sh stop

# As root (and always in CI) the docker tests get a real engine + registry (scripts/docker-up.sh); elsewhere they skip.
test: $(STAMP)
	@if [ "$${CI:-}" = "true" ] || [ "$$(id -u)" = "0" ]; then bash scripts/docker-up.sh >/dev/null || echo "docker-up failed (docker tests will report why)"; fi; \
	if [ -f .cache/docker/env.sh ]; then . ./.cache/docker/env.sh; fi; \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not docker and not slow and not ray"

docker-up:
	bash scripts/docker-up.sh

docker-down:
	bash scripts/docker-down.sh

# Re-resolve pyproject.toml's dependencies into requirements/lock.txt (the only step that resolves; see docs).
lock:
	bash scripts/lock.sh

clean:
	rm -rf $(VENV) runs prepared .pytest_cache
