"""`gp eval --executor ray` on a real 2-node Ray cluster on one host (a head and a second raylet, each with its own
temp dir, ports and TMPDIR, token auth), with a node and then the head killed mid-run (issue 27 item 8).

A node loss costs time, not results: its episodes are played again on the surviving node (10/10 rows, none
twice, exit 0). A lost head ends the run within a bound with one line, exit 6 and a report of what finished; the
same command on a new cluster finishes it. Every process is started here and killed by PID (never `ray stop`,
which ends every Ray process on the machine).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from graph_planner.env.samples import LOCAL_DEBUG_CONFIG
from graph_planner.training.ray.head import free_ports

pytestmark = [pytest.mark.ray, pytest.mark.slow]
psutil = pytest.importorskip("psutil")
pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
#: From the kill of the head to gp eval's exit (issue: "within a bounded time"; measured 5-16 s on this
#: 2-core machine under load, most of it the driver noticing and writing the report).
HEAD_LOSS_BOUND_S = 30.0
RUN_TIMEOUT_S = 420


class TwoNodeCluster:
    """`ray start --head` plus `ray start --address` on this host; each node has its own temp dir (short: Ray's
    socket paths) and TMPDIR (so the sandboxes each node's workers make can be told apart)."""

    def __init__(self, root: Path, token_path: Path) -> None:
        self.root = root
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path),
                    "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", "RAY_USAGE_STATS_ENABLED": "0",
                    # the Ray workers import the code under test, whichever checkout the venv was installed from
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        for key in ("RAY_ADDRESS", "RAY_AUTH_TOKEN"):
            self.env.pop(key, None)
        self.gcs_port = free_ports(1)[0]
        self.address = f"127.0.0.1:{self.gcs_port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started: Counter[str] = Counter()

    def tmpdir(self, node: str) -> Path:
        return self.root / f"{node}-tmp"

    def _start(self, node: str, args: list[str]) -> None:
        self.tmpdir(node).mkdir(exist_ok=True)
        flags = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
                 "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port"]
        if node == "head":
            flags += ["--ray-client-server-port", "--dashboard-port"]
        ports: list[str] = []
        chosen = [p for p in free_ports(len(flags) + 1) if p != self.gcs_port][:len(flags)]  # distinct, not the GCS's
        for flag, port in zip(flags, chosen, strict=True):
            ports += [flag, str(port)]
        env = {**self.env, "TMPDIR": str(self.tmpdir(node))}
        with open(self.root / f"{node}.log", "ab") as log:
            self.procs[node] = subprocess.Popen(
                [str(VENV_BIN / "ray"), "start", "--block", "--disable-usage-stats", "--num-cpus", "2",
                 "--include-log-monitor", "false", "--object-store-memory", str(200 * 2**20),
                 "--node-name", node, "--temp-dir", str(self.root / node), *ports, *args],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def _wait_started(self, node: str, timeout_s: float = 150) -> None:
        """`ray start` says "Ray runtime started." once its node is registered with the GCS."""
        deadline = time.monotonic() + timeout_s
        log = self.root / f"{node}.log"
        while time.monotonic() < deadline:
            count = log.read_text(errors="replace").count("Ray runtime started.")
            if count > self.started[node]:
                self.started[node] = count
                return
            if self.procs[node].poll() is not None:
                raise RuntimeError(f"ray start for {node} exited:\n{log.read_text(errors='replace')[-1500:]}")
            time.sleep(0.5)
        raise RuntimeError(f"ray start for {node} did not start in {timeout_s:.0f} s")

    def start(self, nodes: int = 2) -> TwoNodeCluster:
        self._start_node("head", ["--head", "--port", str(self.gcs_port), "--include-dashboard", "false"])
        if nodes == 2:
            self._start_node("worker", ["--address", self.address])
        return self

    def _start_node(self, node: str, args: list[str], attempts: int = 4) -> None:
        """A loaded machine can miss Ray's fixed 30 s wait for a raylet to register: the node is started again."""
        for attempt in range(attempts):
            self._start(node, args)
            try:
                self._wait_started(node)
                return
            except RuntimeError:
                self.kill(node)
                if attempt == attempts - 1:
                    raise

    def processes(self, node: str) -> list[psutil.Process]:
        """The node's processes: those naming its temp dir, and the raylet's descendants (the Ray workers,
        whose command line Ray rewrites, and the sandboxes' processes they started)."""
        marker = str(self.root / node)
        found: dict[int, psutil.Process] = {}
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                cmdline = proc.info["cmdline"] or []
            except psutil.Error:
                continue
            if any(marker + "/" in part or part == marker or part.startswith(marker + "/") for part in cmdline) \
                    or any(f"--temp-dir={marker}" == part for part in cmdline):
                found[proc.pid] = proc
        for proc in list(found.values()):
            try:
                found.update({child.pid: child for child in proc.children(recursive=True)})
            except psutil.Error:
                continue
        launcher = self.procs.get(node)
        if launcher is not None and launcher.poll() is None:
            found.setdefault(launcher.pid, psutil.Process(launcher.pid))
        return list(found.values())

    def kill(self, node: str) -> None:
        """SIGKILL every process of the node at once (a lost machine), then reap the launcher."""
        procs = self.processes(node)
        for proc in procs:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=10)
        launcher = self.procs.get(node)
        if launcher is not None:
            try:
                launcher.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        for node in ("worker", "head"):
            self.kill(node)

    def alive(self, node: str) -> bool:
        launcher = self.procs.get(node)
        return launcher is not None and launcher.poll() is None

    def restart_worker(self) -> TwoNodeCluster:
        """A new worker node on the same head (a replaced machine): its raylet registers with a new node id."""
        self.kill("worker")
        lost = self.root / "worker"
        if lost.exists():  # the lost node's session dir and sockets: the new raylet starts on a clean temp dir
            lost.rename(self.root / f"worker-lost-{self.started['worker']}")
        self._start_node("worker", ["--address", self.address])
        return self


@pytest.fixture(scope="module")
def cluster_root():
    """``make(nodes)`` gives a cluster with that many live nodes. The module's tests share it where they can: a
    cluster whose head is alive gets a new worker for the one killed (a head start saved); a lost head means a new
    cluster (``fresh=True`` asks for one whatever the state)."""
    root = Path(tempfile.mkdtemp(prefix="gpc-", dir="/tmp"))  # short: Ray's unix socket paths live under it
    token = root / "token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    clusters: list[TwoNodeCluster] = []

    def make(nodes: int = 2, fresh: bool = False) -> TwoNodeCluster:
        if clusters and not fresh and clusters[-1].alive("head"):
            if nodes == 2 and not clusters[-1].alive("worker"):
                return clusters[-1].restart_worker()
            if nodes == 2 or not clusters[-1].alive("worker"):
                return clusters[-1]
        if clusters:
            clusters[-1].stop()
        cluster = TwoNodeCluster(root / f"c{len(clusters)}", token)
        cluster.root.mkdir()
        clusters.append(cluster)
        return cluster.start(nodes)

    yield make
    for cluster in clusters:
        cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def prepared(bundled_samples) -> Path:
    return bundled_samples / "swebench" / "test.jsonl"


def _eval(tmp_path: Path, prepared: Path, cluster: TwoNodeCluster, run_name: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "graph_planner.cli", "eval", "-c", str(LOCAL_DEBUG_CONFIG), "--dataset",
            str(prepared), "--executor", "ray", "--limit", "10", "--batch-size", "2", "--run-name", run_name, "--output-dir",
            str(tmp_path), "--set", "backends.planner_backend=rule", "--set", "backends.cgm_backend=gold",
            "--set", f"paths.cache_dir={tmp_path / 'cache'}", "--set", f"resources.ray_address={cluster.address}"]
    env = {**cluster.env, "TMPDIR": str(tmp_path)}
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rows(results: Path) -> list[dict]:
    return [json.loads(line) for line in results.read_text().splitlines() if line.strip()] if results.exists() else []


def _wait_for(condition, proc: subprocess.Popen[str], timeout_s: float = RUN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"gp eval ended (rc {proc.returncode}) before the fault could be injected:\n{err[-3000:]}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the run never reached the point of the fault")


def _copies(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob("gp-*"))


def _reap(tmpdir: Path, env: dict[str, str]) -> str:
    """`gp sandbox reap` as a user runs it on that node (its TMPDIR)."""
    done = subprocess.run([sys.executable, "-m", "graph_planner.cli", "sandbox", "reap"], cwd=ROOT,
                          env={**env, "TMPDIR": str(tmpdir), "DOCKER_HOST": f"unix://{tmpdir}/no-docker.sock"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def test_a_lost_worker_node_costs_time_not_results(tmp_path, prepared, cluster_root):
    cluster = cluster_root()
    results = tmp_path / "nodeloss" / "eval" / "results.jsonl"
    proc = _eval(tmp_path, prepared, cluster, "nodeloss")
    # mid-run with an episode in flight on the worker node: a row written and a sandbox copy under its TMPDIR
    _wait_for(lambda: len(_rows(results)) >= 1 and any(p.name.startswith("gp-") and not
                                                       p.name.startswith("gp-template-")
                                                       for p in _copies(cluster.tmpdir("worker"))), proc)
    cluster.kill("worker")
    out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, err[-4000:]
    rows = [r for r in _rows(results) if r["label"] == "policy"]
    ids = [r["instance_id"] for r in rows]
    assert len(set(ids)) == 10 and len(ids) == 10, Counter(ids)  # 10/10, none twice, no error row
    assert all(r["status"] == "finished" for r in rows), [r.get("error") for r in rows]  # each has a verdict
    replayed = [r for r in rows if r["info"].get("node_losses")]
    assert replayed, "no episode was lost with the node: the kill came too late"
    assert all(r["info"]["attempts"] >= 2 and r["info"]["node_name"] == "head" for r in replayed)
    # info.node is the Ray node id, info.node_name its name: the two nodes share one host name
    assert all(len(r["info"]["node"]) == 56 and r["info"]["node_name"] in ("head", "worker") for r in rows)
    assert len({r["info"]["host"] for r in rows}) == 1
    report = json.loads((tmp_path / "nodeloss" / "eval" / "report.json").read_text())
    assert (report["completed_tasks"], report["errors"]) == (10, 0)
    # the live node's workers dropped their sandbox templates after each task; the killed node's workers left
    # theirs, and `gp sandbox reap` on that node removes them
    assert _copies(cluster.tmpdir("head")) == []
    assert _copies(cluster.tmpdir("worker")), "the killed workers left nothing to reap"
    said = _reap(cluster.tmpdir("worker"), cluster.env)
    assert _copies(cluster.tmpdir("worker")) == [], said


def test_a_lost_head_ends_the_run_with_exit_6_and_a_report_and_the_same_command_finishes_it(
        tmp_path, prepared, cluster_root):
    cluster = cluster_root()
    eval_dir = tmp_path / "headloss" / "eval"
    proc = _eval(tmp_path, prepared, cluster, "headloss")
    _wait_for(lambda: len(_rows(eval_dir / "results.jsonl")) >= 3, proc)
    killed_at = time.monotonic()
    cluster.kill("head")
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - killed_at
    print(f"gp eval exit {proc.returncode} {took:.1f} s after the head was killed")
    assert proc.returncode == 6, err[-4000:]
    assert took <= HEAD_LOSS_BOUND_S, f"{took:.1f} s"
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err[-4000:]
    last = lines[-1]
    assert last.startswith("gp eval: lost the Ray head") and "run the same command again" in last, last
    assert sum("lost the Ray head" in line for line in lines) == 1
    finished = {r["instance_id"] for r in _rows(eval_dir / "results.jsonl")
                if r["label"] == "policy" and r["status"] == "finished"}
    report = json.loads((eval_dir / "report.json").read_text())
    assert report["completed_tasks"] == len(finished) >= 3 and report["total_tasks"] == 10
    assert f"{len(finished)}/10 task(s) graded" in last and str(eval_dir / "report.json") in last
    cluster.kill("worker")  # its head is gone: the node is of no use

    resumed_on = cluster_root(nodes=1)  # the cluster brought back (one node is enough to finish)
    again = _eval(tmp_path, prepared, resumed_on, "headloss")
    out, err = again.communicate(timeout=RUN_TIMEOUT_S)
    assert again.returncode == 0, err[-4000:]
    assert f"{len(finished)} task(s) already finished" in " ".join(err.split())  # rich wraps its lines
    rows = [r for r in _rows(eval_dir / "results.jsonl") if r["label"] == "policy" and r["status"] == "finished"]
    assert sorted(r["instance_id"] for r in rows) == sorted({r["instance_id"] for r in rows})  # none twice
    assert len(rows) == 10
    report = json.loads((eval_dir / "report.json").read_text())
    assert (report["completed_tasks"], report["errors"]) == (10, 0)
