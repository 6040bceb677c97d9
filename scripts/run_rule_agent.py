"""Seed 001 section 4: ``python scripts/run_rule_agent.py --backend repoenv --max-steps 6 --report r.json`` =
``gp smoke --sandbox repoenv ...`` (the rule agent on one task). ``--ds-json FILE`` (an R2E-Gym row) becomes the
task: it is prepared into a one-task dataset first (``gp data prepare --custom``, seed 001 row shape)."""

import json
import sys
import tempfile
from pathlib import Path

from seed_cli import run


def main(argv: list[str]) -> int:
    args = list(argv)
    if "--ds-json" in args:
        i = args.index("--ds-json")
        ds_path = Path(args[i + 1]).resolve()
        del args[i: i + 2]
        ds = json.loads(ds_path.read_text(encoding="utf-8"))
        work = Path(tempfile.mkdtemp(prefix="gp-rule-agent-"))
        backend = args[args.index("--backend") + 1] if "--backend" in args else "repoenv"
        row = {"task_id": ds.get("task_id") or ds.get("instance_id") or ds_path.stem,
               "issue": ds.get("problem_statement", ""), "max_steps": 6,
               "sandbox": {"backend": backend, "docker_image": ds.get("docker_image"), "workdir": "/testbed",
                           "mounts": {}, "env": {}, "r2e_ds_json": str(ds_path)}}
        (work / "task.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
        code = run(["data", "prepare", "--skip-r2e", "--skip-swebench", "--custom", str(work / "task.jsonl"),
                    "--out", str(work / "prepared")], [])
        if code:
            return code
        args += ["--dataset", str(work / "prepared" / "custom" / "train.jsonl")]
    return run(["smoke"], args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
