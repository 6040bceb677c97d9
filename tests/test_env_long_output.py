"""Long tool output (issue 25 item 5): a huge ``read`` or ``run_tests`` result is cut into the observation (head
and tail around a marker, within ``env.observation_token_budget``) and the episode goes on; the final graded
run's output is kept per eval instance, as the SWE-bench harness keeps ``test_output.txt``.

A tiny repository built in tmp_path, in the local sandbox: one function whose source is a ~900 kB line (under
the code graph's 1 MB file cap) and one failing test that prints 2 MB."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_planner.config.schema import RunConfig
from graph_planner.data.record import TaskRecord
from graph_planner.env.assembly import open_env
from graph_planner.env.observation import CHARS_PER_TOKEN, clip_middle
from graph_planner.eval.episode import write_test_output
from graph_planner.models.synthesizers import NoSynthesizer

BUDGET = 500  # tokens: 2000 characters of result
FOOTER = 300  # the step, memory and steps-left lines around the result


@pytest.fixture
def noisy_task(tmp_path: Path) -> TaskRecord:
    repo = tmp_path / "noisy"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "big.py").write_text("def blob():\n    return '" + "x" * 900_000 + "'  # END-OF-BLOB\n")
    (repo / "tests" / "test_noisy.py").write_text(
        "from pkg.big import blob\n\n\ndef test_noisy():\n    print('y' * 2_000_000)\n    assert blob() == ''\n")
    return TaskRecord(task_id="noisy-1", source="custom", split="test", repo="me/noisy", problem_statement="noisy",
                      repo_path=str(repo), fail_to_pass=["tests/test_noisy.py::test_noisy"], backend="local")


def test_huge_read_and_test_output_are_cut_into_the_observation_and_the_episode_goes_on(noisy_task, tmp_path):
    config = RunConfig.model_validate({"paths": {"cache_dir": str(tmp_path / "cache")},
                                       "logging": {"output_dir": str(tmp_path / "runs")},
                                       "env": {"observation_token_budget": BUDGET}})
    with open_env(noisy_task, config, None, "test-long-output", synthesizer=NoSynthesizer()) as env:
        env.reset()
        read = env.step({"name": "read", "arguments": {"node_id": "fn:pkg/big.py::blob"}})
        assert not read.done
        assert len(read.obs["result"]["code"]) > 800_000  # the structured result is whole; the text is cut
        assert len(read.observation) <= BUDGET * CHARS_PER_TOKEN + FOOTER
        assert "read(fn:pkg/big.py::blob)" in read.observation  # head kept
        assert "END-OF-BLOB" in read.observation  # tail kept
        assert "characters cut from the middle of this result" in read.observation
        assert read.observation.rstrip().endswith("Reply with one action.")

        tests = env.step({"name": "run_tests", "arguments": {}})
        assert not tests.done and "run_tests: 0/1 of the failing tests pass" in tests.observation
        assert len(tests.observation) <= BUDGET * CHARS_PER_TOKEN + FOOTER

        env.sandbox.write_file("pkg/big.py", "def blob():\n    return 'changed'\n")  # something to submit
        final = env.step({"name": "submit", "arguments": {}})
    assert final.done and env.summary is not None and not env.summary.resolved
    # the final graded run's output is kept per eval instance, linked from its row
    eval_dir = tmp_path / "eval"
    relative = write_test_output(eval_dir, noisy_task, env.summary)
    assert relative == "logs/noisy-1/test_output.txt"
    kept = (eval_dir / relative).read_text()
    assert kept.startswith("verdict: unresolved") and "test_noisy" in kept


def test_clip_middle_keeps_head_and_tail_within_the_limit():
    text = "HEAD" + "m" * 10_000 + "TAIL"
    cut = clip_middle(text, 1000)
    assert len(cut) <= 1000 and cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "characters cut from the middle" in cut
    assert clip_middle("short", 1000) == "short"
