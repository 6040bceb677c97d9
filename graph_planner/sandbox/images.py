"""Task images built here: bundled sample tasks (their source tree at the base commit, FROM the debootstrap base
image) and custom tasks (a BuildSpec: base image, repo as git URL or local path, commit, setup commands).
SWE-bench / R2E images are prebuilt and pulled instead (graph_planner.sandbox.prepull)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from graph_planner.data.gitrepo import GitError, deterministic_git_env, head_commit, init_deterministic_repo, run_git
from graph_planner.sandbox.history import trim_history_script

if TYPE_CHECKING:
    import docker

    from graph_planner.data.record import BuildSpec, TaskRecord

log = logging.getLogger(__name__)

BASE_IMAGE = "graph-planner/base:bookworm"
#: docker/ at the repository root holds the Dockerfiles (not shipped in wheels: build from a checkout).
DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"
#: Content digest of what an image was built from; an image whose label matches is not rebuilt.
LABEL_SOURCE = "graph-planner.source-digest"
_IGNORED = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc", ".git")
_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[\w.-]+@[\w.-]+:)", re.IGNORECASE)

BuildStatus = Literal["built", "cached", "skipped", "failed"]
#: A git repository with commits under this prefix is a task repository (synth/taskrepo.py: one root commit per task):
#: one image holds all of them, shared by its tasks.
TASK_REFS = "refs/tasks/"


class ImageBuildError(RuntimeError):
    """An image could not be built; the message names the image, the task(s) and the failing step."""


@dataclass
class ImageBuild:
    """Outcome for one image (sample images cover every task sharing a source tree)."""

    tags: list[str]
    status: BuildStatus
    task_ids: list[str] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0


def _dockerfile(name: str) -> Path:
    path = DOCKER_DIR / name
    if not path.is_file():
        raise ImageBuildError(f"{path} is missing: image builds need a checkout of graph-planner (docker/)")
    return path


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths, executable bits and contents of a source tree (caches ignored)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not _ignored(p.relative_to(root))):
        rel = path.relative_to(root).as_posix()
        digest.update(f"{rel}\0{os.access(path, os.X_OK)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _ignored(rel: Path) -> bool:
    return any(part in ("__pycache__", ".pytest_cache", ".git") for part in rel.parts) or rel.suffix == ".pyc"


def _image_id(client: docker.DockerClient, tag: str) -> str | None:
    import docker.errors

    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


def _all_tagged_with(client: docker.DockerClient, tags: list[str], digest: str) -> bool:
    import docker.errors

    for tag in tags:
        try:
            if client.images.get(tag).labels.get(LABEL_SOURCE) != digest:
                return False
        except docker.errors.ImageNotFound:
            return False
    return True


def _build(client: docker.DockerClient, context: Path, dockerfile: Path, tags: list[str],
           buildargs: dict[str, str], labels: dict[str, str], network: bool) -> None:
    """docker build (classic builder, like DOCKER_BUILDKIT=0) of ``context`` tagged with every tag."""
    import docker.errors

    shutil.copyfile(dockerfile, context / "Dockerfile")
    previous = {image_id for image_id in (_image_id(client, tag) for tag in tags) if image_id}
    try:
        image, _ = client.images.build(path=str(context), dockerfile="Dockerfile", tag=tags[0], buildargs=buildargs,
                                       labels=labels, rm=True, forcerm=True, pull=False,
                                       network_mode=None if network else "none")
    except docker.errors.BuildError as exc:
        tail = "".join(str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log)[-1500:]
        raise ImageBuildError(f"docker build of {tags[0]} failed: {exc.msg}\n{tail}") from None
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"docker build of {tags[0]} failed: {exc}") from None
    for tag in tags[1:]:
        repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        image.tag(repository, version)
    for old_id in previous - {image.id}:
        _remove_if_untagged(client, old_id)


def _remove_if_untagged(client: docker.DockerClient, image_id: str) -> None:
    """A rebuild leaves the old image without tags: remove it so rebuilds do not pile up on disk (kept when a
    container still uses it)."""
    import docker.errors

    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
    except docker.errors.APIError as exc:  # in use, or removed meanwhile
        log.debug("old image %s kept: %s", image_id, exc)


def build_sample_images(records: Iterable[TaskRecord], dataset_dir: str | Path,
                        client: docker.DockerClient | None = None, base_image: str = BASE_IMAGE,
                        force: bool = False) -> list[ImageBuild]:
    """One image per distinct source tree (``repo_path``) holding it at the deterministic base commit, tagged with
    the ``image`` of every task using that tree. Skips an image whose source digest label already matches."""
    from graph_planner.sandbox.docker import docker_client

    client = client or docker_client()
    dockerfile = _dockerfile("Dockerfile.sample")
    base_id = _image_id(client, base_image)
    groups: dict[tuple[Path, str, str | None], list[TaskRecord]] = defaultdict(list)
    results: list[ImageBuild] = []
    task_repos: dict[Path, bool] = {}
    for task in records:
        source = task.resolve_repo_path(dataset_dir)
        if task.build is not None or source is None or not task.image:
            continue
        # a plain tree gets one deterministic commit; a real repository is checked out at each task's base; a task
        # repository (commits under refs/tasks/, synth) is one image for all its tasks
        commit = task.base_commit if (source / ".git").exists() else None
        if commit is not None:
            if source not in task_repos:
                try:
                    task_repos[source] = bool(_task_refs(source))
                except GitError:
                    task_repos[source] = False  # the build below reports the broken repository
            if task_repos[source]:
                commit = TASK_REFS
        groups[(source, task.workdir, commit)].append(task)
    for (source, workdir, commit), tasks in groups.items():
        tags = sorted({t.image for t in tasks if t.image})
        ids = [t.task_id for t in tasks]
        started = time.monotonic()
        if base_id is None:
            results.append(ImageBuild(tags, "failed", ids, f"base image {base_image} is missing: run "
                                      "scripts/docker-up.sh (it builds it with debootstrap)"))
            continue
        if not source.is_dir():
            results.append(ImageBuild(tags, "failed", ids, f"repo_path {source} is not a directory"))
            continue
        try:
            if commit == TASK_REFS:
                content = "tasks:" + _digest(*_task_refs(source))
            else:
                content = f"git:{commit or head_commit(source)}" if (source / ".git").exists() else tree_digest(source)
            digest = _digest(content, dockerfile.read_text(), base_id, workdir)
            if not force and _all_tagged_with(client, tags, digest):
                results.append(ImageBuild(tags, "cached", ids, seconds=time.monotonic() - started))
                continue
            with tempfile.TemporaryDirectory(prefix="gp-image-") as tmp:
                repo = Path(tmp) / "repo"
                if commit == TASK_REFS:
                    held = _task_repo_copy(source, repo)
                    missing = [t.task_id for t in tasks if t.base_commit not in held]
                    if missing:
                        raise ImageBuildError(f"task repository {source} holds no {TASK_REFS} commit for the "
                                              f"base_commit of {', '.join(missing)} (re-run `gp data synth`)")
                else:
                    head = _source_at_commit(source, commit, repo)
                    wrong = [f"{t.task_id} expects {t.base_commit}" for t in tasks if t.base_commit and
                             t.base_commit != head]
                    if wrong:
                        raise ImageBuildError(f"{source} commits as {head}, but " + "; ".join(wrong) +
                                              " (re-run `gp data prepare` or datasets/sample/build_rows.py)")
                _build(client, Path(tmp), dockerfile, tags, {"BASE_IMAGE": base_image, "WORKDIR": workdir},
                       {LABEL_SOURCE: digest}, network=False)
        except (ImageBuildError, GitError, OSError) as exc:
            results.append(ImageBuild(tags, "failed", ids, str(exc), time.monotonic() - started))
            continue
        log.info("built %s for %d task(s) from %s", ", ".join(tags), len(tasks), source)
        results.append(ImageBuild(tags, "built", ids, seconds=time.monotonic() - started))
    return results


def _task_refs(source: Path) -> list[str]:
    """Sorted commit ids under refs/tasks/ of a git repository (a task repository's tasks; empty for others)."""
    listing = run_git(source, "for-each-ref", "--format=%(objectname)", TASK_REFS)
    return sorted({line.strip() for line in listing.splitlines() if line.strip()})


def _task_repo_copy(source: Path, dest: Path) -> set[str]:
    """A task repository's commits (refs/tasks/*, nothing else) in a fresh repository at ``dest``, checked out at
    the first; returns the commit ids it holds. Every task of the repository shares the image: a container checks
    out its task's base and drops the other tasks' objects when it starts (sandbox/history.py)."""
    dest.mkdir(parents=True)
    run_git(dest, "init", "--quiet")
    run_git(dest, "fetch", "--quiet", "--no-tags", str(source), f"+{TASK_REFS}*:{TASK_REFS}*")
    held = set(_task_refs(dest))
    if not held:
        raise ImageBuildError(f"{source}: no commit under {TASK_REFS}")
    run_git(dest, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", min(held))
    run_git(dest, "repack", "-a", "-d", "-q")
    run_git(dest, "prune", "--expire=now")
    return held


def _source_at_commit(source: Path, commit: str | None, dest: Path) -> str:
    """Copy a plain tree and commit it deterministically, or clone a repository at ``commit``; return HEAD."""
    if not (source / ".git").exists():
        shutil.copytree(source, dest, symlinks=True, ignore=_IGNORED)
        return init_deterministic_repo(dest)
    run_git(source.parent, "clone", "--quiet", "--no-hardlinks", str(source), str(dest))
    if commit:
        run_git(dest, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit)
    head = head_commit(dest)
    # the image keeps no commit, tag or object past the task's base (the fix must not be in a layer)
    trimmed = subprocess.run(["bash", "-c", trim_history_script(head)], cwd=dest, capture_output=True, text=True,
                             env=deterministic_git_env(), check=False)
    if trimmed.returncode != 0:
        raise ImageBuildError(f"could not remove history past {head} in the image source: {trimmed.stderr[-600:]}")
    return head


def _checkout_repo(spec: BuildSpec, base_dir: Path, dest: Path) -> str:
    """Put the spec's repository at ``dest`` (with .git) at ``spec.commit`` (default HEAD); return HEAD."""
    local = None if _URL.match(spec.repo) else Path(spec.repo)
    if local is not None and not local.is_absolute():
        local = (base_dir / local).resolve()
    if local is not None:
        if not local.is_dir():
            raise ImageBuildError(f"build.repo {spec.repo!r}: {local} is not a directory (nor a git URL)")
        head = _source_at_commit(local, spec.commit, dest)
        if spec.commit and spec.commit != head:
            raise ImageBuildError(f"build.repo {local} is a plain tree that commits as {head}, "
                                  f"not build.commit {spec.commit}")
        return head
    run_git(base_dir, "clone", "--quiet", spec.repo, str(dest))
    if spec.commit:
        run_git(dest, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", spec.commit)
    return head_commit(dest)


def build_custom_image(spec: BuildSpec, tag: str, base_dir: str | Path = ".",
                       client: docker.DockerClient | None = None, network: bool = False) -> ImageBuild:
    """Build a custom task's image from its BuildSpec (``base_dir`` resolves a relative local ``repo``). Setup
    commands run without network unless ``network`` (e.g. they pip install)."""
    from graph_planner.sandbox.docker import docker_client

    client = client or docker_client()
    started = time.monotonic()
    try:
        dockerfile = _dockerfile("Dockerfile.custom")
        with tempfile.TemporaryDirectory(prefix="gp-image-") as tmp:
            context = Path(tmp)
            head = _checkout_repo(spec, Path(base_dir), context / "repo")
            script = "set -eux\n" + "\n".join(spec.setup_commands) + "\n"
            (context / "setup.sh").write_text(script, encoding="utf-8")
            digest = _digest(spec.model_dump_json(), head, dockerfile.read_text())
            _build(client, context, dockerfile, [tag], {"BASE_IMAGE": spec.base_image, "WORKDIR": spec.workdir},
                   {LABEL_SOURCE: digest}, network=network)
    except (ImageBuildError, GitError, OSError) as exc:
        return ImageBuild([tag], "failed", reason=str(exc), seconds=time.monotonic() - started)
    return ImageBuild([tag], "built", seconds=time.monotonic() - started)


def build_task_images(records: Iterable[TaskRecord], dataset_dir: str | Path,
                      client: docker.DockerClient | None = None, network: bool = False,
                      force: bool = False) -> list[ImageBuild]:
    """Every image this dataset can build here: sample images (tasks with ``repo_path``) and custom images
    (tasks with ``build``); tasks that only name a prebuilt image are reported as skipped (prepull them)."""
    from graph_planner.sandbox.docker import docker_client

    records = list(records)
    client = client or docker_client()
    results = build_sample_images(records, dataset_dir, client=client, force=force)
    for task in records:
        if task.build is not None:
            if not task.image:
                results.append(ImageBuild([], "failed", [task.task_id], "custom task has a build spec but no "
                                          "`image` name to tag"))
                continue
            built = build_custom_image(task.build, task.image, dataset_dir, client=client, network=network)
            built.task_ids = [task.task_id]
            results.append(built)
        elif task.resolve_repo_path(dataset_dir) is None:
            reason = "prebuilt image: use `gp images prepull`" if task.image else "no image and no repo_path"
            results.append(ImageBuild([task.image] if task.image else [], "skipped", [task.task_id], reason))
    return results
