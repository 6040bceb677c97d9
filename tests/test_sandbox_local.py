"""LocalSandbox: commands, timeouts, file ops, the hidden-test guard, snapshots and patches on a real git copy."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from test_sandbox_local_fixtures import local_config, make_calc_repo, r2e_task, swebench_task, tree_hashes

from graph_planner.sandbox.base import HiddenPathError, PatchRejected, Sandbox, SandboxError
from graph_planner.sandbox.local import LocalSandbox, network_cut_prefix


@pytest.fixture()
def calc(tmp_path: Path) -> tuple[Path, str, str]:
    return make_calc_repo(tmp_path)


@pytest.fixture()
def sandbox(tmp_path: Path, calc: tuple[Path, str, str]):
    _, gold, test_patch = calc
    with LocalSandbox(swebench_task(tmp_path, gold, test_patch), local_config().sandbox, tmp_path, "t") as sb:
        yield sb


def test_local_sandbox_implements_the_protocol_and_works_on_a_copy(tmp_path, calc, sandbox):
    repo, _, _ = calc
    assert isinstance(sandbox, Sandbox)
    assert sandbox.repo_dir != repo
    sandbox.write_file("calc/ops.py", "changed\n")
    assert (repo / "calc" / "ops.py").read_text() != "changed\n"  # the dataset's tree is never touched
    assert sandbox.read_file("calc/ops.py") == "changed\n"
    result = sandbox.exec("pwd && cat README.md")
    assert result.ok and result.stdout.split("\n")[:2] == [str(sandbox.repo_dir), "calc"]


def test_exec_past_timeout_is_killed_with_its_children_and_reported(sandbox):
    start = time.monotonic()
    marker = f"{60 + os.getpid() % 1000 / 1000:.3f}"  # a sleep argument no other process on the host uses
    result = sandbox.exec(f"sh -c 'exec sleep {marker}' & echo started; sleep 60", timeout=1)
    assert time.monotonic() - start < 10
    assert result.timed_out and result.rc == 124 and not result.ok
    assert "started" in result.stdout and "timeout" in result.stderr
    time.sleep(0.3)
    # pids inside a bwrap sandbox are namespaced: look for the child by its command line from the host side
    assert not [p for p in _live_cmdlines() if p == f"sleep\0{marker}\0"]  # the background child died too


def _live_cmdlines() -> list[str]:
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if "zombie" not in (proc / "status").read_text():
                out.append((proc / "cmdline").read_text())
        except OSError:
            continue
    return out


def test_failed_command_reports_its_exit_code_and_stderr(sandbox):
    result = sandbox.exec("echo oops >&2; exit 3")
    assert result.rc == 3 and not result.timed_out and "oops" in result.stderr


def test_snapshot_edit_restore_returns_the_exact_tree(sandbox):
    before = tree_hashes(sandbox.repo_dir)
    snap = sandbox.snapshot()
    sandbox.write_file("calc/ops.py", "x = 1\n")
    sandbox.exec("rm README.md && mkdir -p newpkg/deep && echo hi > newpkg/deep/new.txt && chmod +x calc/__init__.py")
    sandbox.write_file("tests/extra_test.py", "def test(): pass\n")
    assert tree_hashes(sandbox.repo_dir) != before
    sandbox.restore(snap)
    assert tree_hashes(sandbox.repo_dir) == before
    assert not (sandbox.repo_dir / "newpkg").exists()


def test_restore_goes_back_to_an_intermediate_snapshot_including_new_files(sandbox):
    sandbox.write_file("notes/new.py", "a = 1\n")
    mid = tree_hashes(sandbox.repo_dir)
    snap = sandbox.snapshot()
    sandbox.write_file("notes/new.py", "a = 2\n")
    sandbox.exec("rm calc/ops.py")
    sandbox.restore(snap)
    assert tree_hashes(sandbox.repo_dir) == mid
    with pytest.raises(SandboxError, match="not a snapshot id"):
        sandbox.restore("HEAD; rm -rf /")


def test_hidden_r2e_tests_are_refused_before_grading(tmp_path, calc):
    _, gold, _ = calc
    with LocalSandbox(r2e_task(tmp_path, gold), local_config().sandbox, tmp_path, "t") as sb:
        with pytest.raises(HiddenPathError):
            sb.read_file("r2e_tests/test_1.py")
        with pytest.raises(HiddenPathError):
            sb.exec("cat r2e_tests/*")
        with pytest.raises(HiddenPathError):
            sb.read_file("/r2e_tests/test_1.py")
        with pytest.raises(HiddenPathError):
            sb.write_file("r2e_tests/test_1.py", "def test(): pass\n")
        assert not (sb.repo_dir / "r2e_tests").exists()  # not in the working copy at all outside grading
        sb.run_tests()
        assert not (sb.repo_dir / "r2e_tests").exists()
        assert not any("r2e_tests" in f for f in sb.list_files("**/*"))


def test_new_test_files_of_the_test_patch_are_hidden_but_existing_tests_are_readable(sandbox):
    with pytest.raises(HiddenPathError):
        sandbox.read_file("tests/test_add.py")
    with pytest.raises(HiddenPathError):
        sandbox.exec("cat tests/test_add.py")
    with pytest.raises(HiddenPathError):
        sandbox.apply_patch("--- /dev/null\n+++ b/tests/test_add.py\n@@ -0,0 +1 @@\n+x = 1\n")
    assert "def test_sub" in sandbox.read_file("tests/test_ops.py")
    sandbox.run_tests()
    assert not (sandbox.repo_dir / "tests" / "test_add.py").exists()
    assert not list(sandbox.repo_dir.rglob("*test_add*"))  # no bytecode / cache of the hidden test either
    assert "test_sub_zero" not in sandbox.read_file("tests/test_ops.py")  # test_patch edits are gone too


def test_paths_outside_the_repository_are_refused(tmp_path, sandbox):
    (tmp_path / "secret.txt").write_text("s")
    with pytest.raises(SandboxError, match="escapes"):
        sandbox.read_file("../secret.txt")
    with pytest.raises(SandboxError, match="outside"):
        sandbox.read_file(str(tmp_path / "secret.txt"))
    os.symlink(tmp_path / "secret.txt", sandbox.repo_dir / "link.txt")
    with pytest.raises(SandboxError, match="outside"):
        sandbox.read_file("link.txt")
    with pytest.raises(SandboxError, match="no such file"):
        sandbox.read_file("missing.py")


def test_list_files_matches_globs_and_skips_deleted_files(sandbox):
    assert sandbox.list_files() == ["calc/__init__.py", "calc/ops.py", "tests/test_ops.py"]
    sandbox.exec("rm calc/__init__.py")
    sandbox.write_file("calc/sub/new.py", "")
    assert sandbox.list_files("calc/**/*.py") == ["calc/ops.py", "calc/sub/new.py"]
    assert sandbox.list_files("*.md") == ["README.md"]


def test_apply_patch_then_diff_shows_the_change_against_base(sandbox, calc):
    _, gold, _ = calc
    sandbox.apply_patch(gold)
    assert "return a + b" in sandbox.read_file("calc/ops.py")
    sandbox.write_file("calc/new_mod.py", "X = 1\n")
    diff = sandbox.diff()
    assert "+    return a + b" in diff and "calc/new_mod.py" in diff
    assert sandbox.exec("git status --porcelain").ok  # the repo is still a working git repo


def test_patch_that_does_not_apply_is_rejected_naming_the_file(sandbox):
    bad = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,2 +1,2 @@\n-def nothing_like_this():\n-    pass\n+x\n+y\n"
    with pytest.raises(PatchRejected, match="calc/ops.py"):
        sandbox.apply_patch(bad)
    assert sandbox.diff() == ""  # nothing half-applied


def test_patch_with_drifted_context_applies_through_the_fuzz_fallback(sandbox):
    drifted = (
        "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,6 +1,6 @@\n def add(a, b):\n-    return a - b\n"
        "+    return a + b\n \n \n def sub(a, b):\n-    return a - b  # context line that drifted\n"
        "+    return a - b  # context line that drifted\n"
    )
    fuzzy = drifted.replace("-    return a - b  # context line that drifted\n+    return a - b  # context line "
                            "that drifted\n", "     return a - b  # drifted\n")
    sandbox.apply_patch(fuzzy)
    assert "return a + b" in sandbox.read_file("calc/ops.py")


@pytest.mark.parametrize("diff", [
    "--- a/../x\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n",
    "--- /dev/null\n+++ /etc/passwd\n@@ -0,0 +1 @@\n+root::0:0\n",
    "diff --git a/calc/ops.py b/calc/ops.py\nGIT binary patch\nliteral 3\nKcmZ>\x00\n",
])
def test_patch_guard_rejects_escapes_and_binary_before_touching_the_tree(tmp_path, sandbox, diff):
    with pytest.raises(PatchRejected):
        sandbox.apply_patch(diff)
    assert sandbox.diff() == ""
    assert not (tmp_path / "repos" / "x").exists()


def test_unshare_cuts_the_network_when_available(tmp_path, calc):
    if network_cut_prefix() is None:
        pytest.skip("neither unshare -n nor bubblewrap works on this machine")
    _, gold, test_patch = calc
    task = swebench_task(tmp_path, gold, test_patch)
    with LocalSandbox(task, local_config(network=False).sandbox, tmp_path, "t") as sb:
        interfaces = [line.split(":")[0].strip() for line in sb.exec("cat /proc/net/dev").stdout.splitlines()[2:]]
        assert interfaces == ["lo"]
        loopback = ("import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
                    "socket.create_connection(s.getsockname()); print('loopback ok')")
        assert sb.exec(f'python -c "{loopback}"').stdout.strip() == "loopback ok"  # local servers still work
    with LocalSandbox(task, local_config(network=True).sandbox, tmp_path, "t") as sb:
        assert sb.exec("cat /proc/net/dev").stdout.count("\n") > 3


def test_local_backend_without_repo_path_fails_clearly(tmp_path, calc):
    _, gold, test_patch = calc
    task = swebench_task(tmp_path, gold, test_patch, repo_path=None, image="swebench/sweb.eval.x86_64.x:latest")
    with pytest.raises(SandboxError, match="--sandbox docker"):
        LocalSandbox(task, local_config().sandbox, tmp_path, "t").start()


def test_plain_source_tree_becomes_a_deterministic_git_repo_at_the_base(tmp_path):
    _, gold, test_patch = make_calc_repo(tmp_path, with_git=False)
    task = swebench_task(tmp_path, gold, test_patch)
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as sb:
        head = sb.base_commit
        assert head and sb.diff() == ""
        sb.apply_patch(gold)
        assert "return a + b" in sb.diff()
    with LocalSandbox(task.model_copy(update={"base_commit": head}), local_config().sandbox, tmp_path, "t") as sb:
        assert sb.base_commit == head  # same tree, same commit id: the record's base_commit is reproducible
    (tmp_path / "repos" / "calc" / "README.md").write_text("edited after prepare\n")
    with pytest.raises(SandboxError, match="not the task's base"):
        LocalSandbox(task.model_copy(update={"base_commit": head}), local_config().sandbox, tmp_path, "t").start()


def test_sandboxes_of_a_plain_tree_copy_one_committed_template(tmp_path, monkeypatch):
    """Concurrent rollouts start dozens of sandboxes a step: the plain tree is committed once per process, and each
    sandbox is still its own repo at the base (an edit in one is not in another)."""
    from graph_planner.data import gitrepo

    built = []
    real = gitrepo.init_deterministic_repo
    monkeypatch.setattr(gitrepo, "init_deterministic_repo", lambda path: built.append(path) or real(path))
    _, gold, test_patch = make_calc_repo(tmp_path, with_git=False)
    task = swebench_task(tmp_path, gold, test_patch)
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as first:
        head = first.base_commit
    task = task.model_copy(update={"base_commit": head})
    built.clear()
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as a, \
            LocalSandbox(task, local_config().sandbox, tmp_path, "t") as b:
        a.apply_patch(gold)
        assert a.base_commit == b.base_commit == head and b.diff() == "" and "return a + b" in a.diff()
        assert a.repo_dir != b.repo_dir
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as c:
        assert c.diff() == ""
    assert len(built) == 1  # one template for the three sandboxes


def test_task_code_cannot_reach_the_template_later_sandboxes_copy(tmp_path):
    """Attack: code run in one sandbox plants a file (a conftest, a fixed source) in the committed template, so every
    later sandbox of the process, the fresh grading one included, starts from it. Under bubblewrap the template
    (outside the sandbox's own dir) is not there to write to."""
    from graph_planner.sandbox import isolation, local_copies

    if not isolation.bwrap_works():
        pytest.skip("bubblewrap is not usable here: the local sandbox then only cuts the network (docs/security.md)")
    _, gold, test_patch = make_calc_repo(tmp_path, with_git=False)
    task = swebench_task(tmp_path, gold, test_patch)
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as sb:
        task = task.model_copy(update={"base_commit": sb.base_commit})
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as sb:
        template = next(reversed(local_copies._templates.values()))[0]  # the one this sandbox was copied from
        res = sb.exec(f"echo planted > {template}/conftest.py")
        assert not res.ok and not (template / "conftest.py").exists()
    with LocalSandbox(task, local_config().sandbox, tmp_path, "t") as sb:
        assert sb.diff() == "" and not (sb.repo_dir / "conftest.py").exists()


def test_only_the_most_recent_templates_are_kept(tmp_path, monkeypatch):
    """Each template is a whole repo copy: a long run over many tasks keeps the last few, not one per task."""
    from graph_planner.sandbox import local_copies

    monkeypatch.setattr(local_copies, "MAX_TEMPLATES", 1)
    roots = []
    for name in ("one", "two"):
        _, gold, test_patch = make_calc_repo(tmp_path / name, with_git=False)
        task = swebench_task(tmp_path / name, gold, test_patch)
        with LocalSandbox(task, local_config().sandbox, tmp_path / name, "t") as sb:
            task = task.model_copy(update={"base_commit": sb.base_commit})
        with LocalSandbox(task, local_config().sandbox, tmp_path / name, "t") as sb:
            assert sb.diff() == ""
        roots.append(next(iter(local_copies._templates.values()))[0].parent)
    assert len(local_copies._templates) == 1 and not roots[0].exists() and roots[1].exists()


def test_close_removes_the_temp_copy(sandbox):
    root = sandbox.repo_dir.parent
    assert root.exists()
    sandbox.close()
    assert not root.exists()
    with pytest.raises(SandboxError, match="start"):
        sandbox.exec("true")


def test_a_command_printing_200_mib_returns_head_note_tail_in_bounded_memory(sandbox, monkeypatch):
    """stdout is read by threads into a head + tail cap (output_cap), not kept whole by communicate(); each pipe is
    closed once read (no ResourceWarning, turned into an error here, when the Popen is collected)."""
    import gc
    import resource
    import sys
    import warnings

    from graph_planner.sandbox.output_cap import command_output

    total = 200 * 1024 * 1024
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB: the peak so far
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        res = sandbox.exec(f"yes | head -c {total}; echo done >&2")
        gc.collect()
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    cap = command_output()
    dropped = total - cap.head_bytes - cap.tail_bytes
    assert grown_mib < 100, f"the test process grew by {grown_mib:.0f} MiB"
    assert res.ok and res.stderr == "done\n"
    assert res.stdout == ("y\n" * (cap.head_bytes // 2) + f"\n[... {dropped} bytes of output dropped ...]\n"
                          + "y\n" * (cap.tail_bytes // 2))
    assert not unraisable, unraisable
    assert sandbox.exec("echo ok").stdout == "ok\n"


def test_a_loud_command_past_its_timeout_keeps_head_and_tail_and_the_kill_note(sandbox):
    res = sandbox.exec("head -c 50000000 /dev/zero | tr '\\0' a; echo last; sleep 60", timeout=3)
    assert res.timed_out and res.rc == 124 and "ran past its 3s timeout" in res.stderr
    assert res.stdout.startswith("a" * 1000) and res.stdout.endswith("a" * 1000 + "last\n")
    assert "bytes of output dropped" in res.stdout and len(res.stdout) < 10 * 1024 * 1024


def test_a_graded_runs_reply_is_never_cut_by_the_exec_cap(sandbox):
    """A graded run's reply is its own head + tail of the test output plus section lines (and the record): the exec
    cap leaves room for it (GRADED_REPLY_ROOM), so an output of exactly HEAD_BYTES + TAIL_BYTES comes back whole and
    uncut. A guard for the cap's size (it also passes with no cap at all)."""
    from graph_planner.grading.graded_command import HEAD_BYTES, TAIL_BYTES, build_script, parse_output

    size = HEAD_BYTES + TAIL_BYTES
    script = build_script(f"{sandbox._grading_dir_parent()}/graded", f"yes | head -c {size}", "", None, {})
    graded = parse_output(sandbox.exec(script.script).stdout, script.token)
    assert graded is not None and graded.output_bytes == size and not graded.truncated
    assert graded.log == "y\n" * (size // 2)
