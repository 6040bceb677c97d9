"""Data prep throughput: 4,578 R2E-Gym-Lite-shaped rows (the size of its train split) through prepare + register.

Rows are generated (in a child process, so its memory does not count) with realistic payloads: whole old/new
source files in parquet `parsed_commit_content`, hidden tests and run logs in `execution_result_content`, the
long issue-synthesis `prompt`, multi-paragraph problem statements. Prints one JSON object.

    .venv/bin/python benchmarks/data_prep.py [--rows 4578] [--file-kb 12]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARGET_S = 30.0


def _source_file(rng: random.Random, kb: int) -> str:
    lines, size, n = [], 0, 0
    while size < kb * 1024:
        n += 1
        block = (f"def function_{n}_{rng.randrange(10**6)}(value, other=None):\n"
                 f"    \"\"\"Compute thing {n} for the data frame, see issue #{rng.randrange(50000)}.\"\"\"\n"
                 f"    result = value * {rng.randrange(100)} + (other or 0)\n"
                 f"    if result > {rng.randrange(1000)}:\n        return result - 1\n    return result\n\n\n")
        lines.append(block)
        size += len(block)
    return "".join(lines)


def _row(index: int, file_kb: int) -> dict:
    rng = random.Random(index)
    repo = ("pandas", "numpy", "tornado", "aiohttp", "pillow", "scrapy", "datalad", "pyramid")[index % 8]
    commit = f"{rng.getrandbits(160):040x}"
    diffs = []
    for k in range(2):
        old = _source_file(rng, file_kb)
        new = old.replace("return result - 1", "return result - 2", 1 + k)
        diffs.append({"old_file_content": old, "new_file_content": new, "header": {"file": {"path": f"{repo}/m{k}.py"}},
                      "minus_file": {"path": f"a/{repo}/m{k}.py"}, "plus_file": {"path": f"b/{repo}/m{k}.py"},
                      "hunks": [], "is_binary_file": False})
    test_old = _source_file(rng, 3)
    diffs.append({"old_file_content": test_old, "new_file_content": test_old + "def test_new():\n    pass\n",
                  "header": {"file": {"path": f"{repo}/tests/test_m.py"}}, "hunks": []})
    tests = {f"test_{i}.py": _source_file(rng, 2) for i in range(2)}
    log = "".join(f"{repo}/tests/test_m.py::TestThing::test_case_{i} PASSED\n" for i in range(120))
    execution = {"repo_name": repo, "new_commit_hash": commit, "test_file_names": list(tests),
                 "test_file_codes": list(tests.values()), "new_commit_res_stdout": log,
                 "old_commit_res_stdout": log.replace("PASSED", "FAILED", 3), "setup_res_stdout": log[:2000]}
    issue = " ".join(f"When calling function_{i} with a frame of {rng.randrange(1000)} rows the result is off by one."
                     for i in range(20))
    return {
        "repo_name": repo, "docker_image": f"namanjain12/{repo}_final:{commit}", "commit_hash": commit,
        "parsed_commit_content": json.dumps({"file_diffs": diffs, "old_commit_hash": f"{rng.getrandbits(160):040x}",
                                             "new_commit_hash": commit, "commit_message": "fix", "metadata": {}}),
        "execution_result_content": json.dumps(execution),
        "modified_files": [d["header"]["file"]["path"] for d in diffs],
        "modified_entity_summaries": [{"ast_type_str": "FunctionDef", "end_lineno": 9, "file_name": f"{repo}/m0.py",
                                       "name": "function_1", "start_lineno": 1, "type": "function"}],
        "relevant_files": [f"{repo}/m0.py"], "num_non_test_files": 2, "num_non_test_func_methods": 2,
        "num_non_test_lines": 4, "prompt": issue * 6,
        "problem_statement": f"[ISSUE]\nTitle: off-by-one in {repo}\n\n{issue}\n\n{issue}\n[/ISSUE]",
        "expected_output_json": json.dumps({f"TestThing.test_case_{i}": "PASSED" for i in range(120)}),
    }


def generate(path: Path, rows: int, file_kb: int) -> None:
    """Write rows to parquet in batches with the real R2E-Gym-Lite HF features."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_data_rows import R2E_FEATURES

    schema = R2E_FEATURES.arrow_schema
    with pq.ParquetWriter(str(path), schema) as writer:
        for start in range(0, rows, 256):
            batch = [_row(i, file_kb) for i in range(start, min(rows, start + 256))]
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))


class AnonPeak:
    """Peak anonymous (heap) memory, sampled: ru_maxrss also counts the memory-mapped Arrow cache pages."""

    def __init__(self, interval: float = 0.05) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval: float) -> None:
        while not self._stop.is_set():
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            self._stop.wait(interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=4578)
    parser.add_argument("--file-kb", type=int, default=12, help="Size of each whole source file in a diff.")
    parser.add_argument("--generate-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate_only:
        generate(args.generate_only, args.rows, args.file_kb)
        return

    from graph_planner.config.schema import DataConfig
    from graph_planner.data.prepare import prepare_datasets
    from graph_planner.data.registry import register_dataset

    with tempfile.TemporaryDirectory(prefix="gp-bench-data-") as tmp:
        root = Path(tmp)
        source = root / "r2e-lite-train.parquet"
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--file-kb", str(args.file_kb),
                        "--generate-only", str(source)], check=True)
        generate_s = time.perf_counter() - started
        config = DataConfig(output_dir=str(root / "out"), r2e_dataset=str(source), r2e_val_size=min(512, args.rows // 10),
                            skip_swebench=True)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        anon = AnonPeak()
        anon.start()
        t0, cpu0 = time.perf_counter(), time.process_time()
        summary = prepare_datasets(config, cache_dir=str(root / "hf-cache"))
        t1 = time.perf_counter()
        for split in ("train", "val"):
            register_dataset(summary.split_path("r2e_gym", split), "bench", root / "registry", split,
                             rllm_layout=True)
        t2, cpu2 = time.perf_counter(), time.process_time()
        anon.stop()
        seconds = t2 - t0
        peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({
            "benchmark": "data_prep",
            "rows": args.rows,
            "input_mb": round(source.stat().st_size / 2**20, 1),
            "kept": summary.total_kept,
            "rejected": summary.total_rejected,
            "generate_s": round(generate_s, 2),
            "prepare_s": round(t1 - t0, 2),
            "register_s": round(t2 - t1, 2),
            "seconds": round(seconds, 2),
            "rows_per_s": round(args.rows / seconds, 1),
            "cpu_s": round(cpu2 - cpu0, 2),  # wall seconds minus waiting on a busy machine / disk
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "peak_rss_mb": round(peak_rss_mb, 1),
            "peak_anon_mb": round(anon.peak_kb / 1024, 1),
            "rss_before_mb": round(rss_before, 1),
            "target_s": TARGET_S,
            "seconds_over_target": round(seconds / TARGET_S, 3),
            "within_target": seconds < TARGET_S,
        }))


if __name__ == "__main__":
    main()
