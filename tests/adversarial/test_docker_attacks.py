"""The attacks of test_local_attacks.py on the DOCKER backend (real engine, the attack repo built into an image):
steering the grade, links out of the repository, hidden tests smuggled past a test run, future history in the
image, and the host's secrets."""

from __future__ import annotations

import uuid

import pytest
from attack_repo import FORCE_PASS_HOOK, HIDDEN_MARK, STEERING_ATTACKS, AttackRepo
from docker_fixtures import base_image, docker_client, docker_config  # noqa: F401 - pytest fixtures
from forgeries import BREAKS_COLLECTION, FORGERIES, HUGE_OUTPUT

from graph_planner.sandbox.base import SandboxError
from graph_planner.sandbox.docker import DockerSandbox
from graph_planner.validation.grade import grade_patch

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def attack(docker_client, base_image, tmp_path_factory) -> AttackRepo:  # noqa: F811
    from graph_planner.sandbox.images import build_sample_images

    repo = AttackRepo(tmp_path_factory.mktemp("attack-docker"))
    repo.image = f"gp-test/attack-calc:{repo.base[:12]}"
    [result] = build_sample_images([_task(repo)], repo.root, client=docker_client)
    assert result.status in ("built", "cached"), result.reason
    return repo


def _task(repo: AttackRepo):
    return repo.task(image=getattr(repo, "image", None), test_cmd="python3 -m pytest -rA")


def _sandbox(repo: AttackRepo) -> DockerSandbox:
    return DockerSandbox(_task(repo), docker_config().sandbox, repo.root, f"adv-{uuid.uuid4().hex[:6]}")


@pytest.mark.parametrize("name", ["new root conftest.py", "new nested tests/conftest.py",
                                  "pyproject.toml addopts -p plugin", "pytest.ini addopts -p plugin"])
def test_steering_attacks_fail_on_docker(attack, name):
    changes, _ = STEERING_ATTACKS[name]
    grade = grade_patch(_task(attack), attack.patch(changes), docker_config(), attack.root, backend="docker")
    assert grade.status == "unresolved" and grade.guard, grade
    assert "tests/test_add.py::test_add" in grade.fail_to_pass["failure"]


def test_gold_resolves_and_gold_plus_force_pass_is_graded_on_the_fix(attack):
    task = _task(attack)
    assert grade_patch(task, attack.gold, docker_config(), attack.root, backend="docker").status == "resolved"
    mixed = grade_patch(task, attack.patch({"conftest.py": FORCE_PASS_HOOK}, with_gold=True), docker_config(),
                        attack.root, backend="docker")
    assert mixed.status == "resolved" and mixed.guard


def test_docker_reads_never_follow_links_out_of_the_repository(attack):
    with _sandbox(attack) as sb:
        sb.exec("ln -s /etc/passwd pw && ln -s / rootdir && ln -s calc/ops.py inside.py")
        for path in ("pw", "rootdir/etc/passwd", "/etc/passwd", "/tmp/.gp-start"):
            with pytest.raises(SandboxError):
                sb.read_file(path)
        assert "def add" in sb.read_file("inside.py")
        with pytest.raises(SandboxError):
            sb.write_file("pw", "root::0:0::/:/bin/sh\n")  # writes do not go through links either
        assert "root::0:0" not in sb.exec("cat /etc/passwd").stdout


def test_docker_hidden_tests_copied_during_a_test_run_do_not_survive_it(attack):
    smuggle = ("import pathlib, shutil\n"
               "src = pathlib.Path('tests/test_add.py')\n"
               "if src.exists():\n"
               "    for dest in ('calc/__pycache__/leak.txt', 'build/leak.txt', '/tmp/leak.txt'):\n"
               "        pathlib.Path(dest).parent.mkdir(parents=True, exist_ok=True)\n"
               "        shutil.copy(src, dest)\n")
    with _sandbox(attack) as sb:
        sb.apply_patch(attack.patch({"calc/__init__.py": "from calc.ops import add, sub\n" + smuggle}))
        assert sb.run_tests().statuses
        for path in ("calc/__pycache__/leak.txt", "build/leak.txt", "tests/test_add.py"):
            with pytest.raises(SandboxError):
                sb.read_file(path)
        assert HIDDEN_MARK not in sb.exec("cat /tmp/leak.txt calc/__pycache__/* build/* 2>/dev/null; true").stdout


def test_docker_container_holds_no_history_past_the_base_commit(attack):
    with _sandbox(attack) as sb:
        log = sb.exec("git log --all --format=%H; git tag; git stash list; git for-each-ref; git remote")
        assert log.ok and set(log.stdout.split()) == {attack.base}, log.stdout
        for obj in (attack.future, attack.future_blob):
            assert not sb.exec(f"git cat-file -e {obj}").ok


def test_docker_commands_never_see_the_hosts_secrets(attack, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_planted_docker_secret")
    monkeypatch.setenv("WANDB_API_KEY", "planted-docker-wandb")
    with _sandbox(attack) as sb:
        env = sb.exec("env").stdout
        network = sb.exec("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)\"")
    assert "planted" not in env and not network.ok


def test_the_image_itself_keeps_no_future_history(attack, docker_client):  # noqa: F811
    out = docker_client.containers.run(attack.image, ["sh", "-c", "cd /testbed && git log --all --format=%H"],
                                       remove=True).decode()
    assert out.split() == [attack.base]


PERSIST = ("import os, site\n"
           "for d in site.getsitepackages():\n"
           "    try:\n"
           "        open(os.path.join(d, 'gp_forcepass.py'), 'w').write(FORCE)\n"
           "        open(os.path.join(d, 'zz_gp.pth'), 'w').write(\"import os; os.environ['PYTEST_PLUGINS'] = "
           "'gp_forcepass'\\n\")\n"
           "        break\n"
           "    except OSError:\n"
           "        pass\n")


def test_state_planted_outside_the_repo_cannot_steer_the_final_grade(attack):
    """Code run by an in-episode test run plants a .pth + plugin in the container's site-packages: later runs in
    that container are forced to pass, the fresh sandbox that grades the submission is not."""
    code = "FORCE = " + repr(FORCE_PASS_HOOK) + "\n" + PERSIST
    patch = attack.patch({"calc/__init__.py": "from calc.ops import add, sub\n" + code})
    with _sandbox(attack) as sb:
        sb.apply_patch(patch)
        sb.run_tests()  # plants
        steered = sb.run_tests()
        # the planted plugin forces every report to pass inside the episode's own container: the canaries see it
        assert steered.tampered and not steered.resolved, steered
        final = sb.grade_fresh(sb.diff())
    assert not final.resolved and final.statuses["tests/test_add.py::test_add"] == "FAILED"


@pytest.mark.slow
def test_forgeries_from_inside_the_test_process_are_caught_on_docker(attack):
    """Every forgery of forgeries.py (each shown real in test_forgery.py) graded tampered in a container; the real
    fix resolved and an honest patch that breaks collection unresolved, neither with tamper evidence."""
    task, config = _task(attack), docker_config()
    gold = grade_patch(task, attack.gold, config, attack.root, backend="docker")
    assert gold.status == "resolved" and not gold.tamper_evidence, gold
    broken = grade_patch(task, attack.patch(BREAKS_COLLECTION.files), config, attack.root, backend="docker")
    assert broken.status == "unresolved" and not broken.tamper_evidence, broken
    verdicts = {name: grade_patch(task, attack.patch(forgery.files), config, attack.root, backend="docker")
                for name, forgery in FORGERIES.items()}
    assert {name: grade.status for name, grade in verdicts.items()} == dict.fromkeys(FORGERIES, "tampered"), verdicts


@pytest.mark.slow
def test_300_mb_printed_in_a_container_is_cut_and_unresolved(attack):
    with _sandbox(attack) as sb:
        sb.apply_patch(attack.patch(HUGE_OUTPUT.files))
        report = sb.run_tests()
    assert report.truncated and report.output_bytes > 300 * (1 << 20), report
    assert not report.resolved and not report.tampered, report
