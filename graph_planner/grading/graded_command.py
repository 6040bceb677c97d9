"""The graded test command as ONE shell script (one round trip to the sandbox, no extra Python process): it writes
the recorder plugin into a fresh dir outside the repository, appends the canaries to their modules, runs the
task's test command with its output streamed through `tee`/`wc`/`head`/`tail` into that dir, and
prints back, between lines holding a fresh token, the exit status, the byte count, the first ``HEAD_BYTES`` and
last ``TAIL_BYTES`` of the output, the record and the modules it could not append to.

The checks start no process of their own: the plugin and the canaries are written by bash's builtin printf, the
TestCase look-up is bash's builtin read (``grep`` only past ``SCAN_BYTES``), and every section comes back through
ONE ``cat`` (the separators are written to files first), checks on or off.

A test run that prints hundreds of MB (a loop in an RL rollout) never reaches the grader's memory: what comes
back is bounded, ``truncated`` says the middle was cut, and a cut log is only trusted when it still holds every
canary's result.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass, field

HEAD_BYTES = 256 * 1024
TAIL_BYTES = 4 * 1024 * 1024
#: how much of a module bash's builtin read scans for ``TestCase`` before it leaves the rest to grep (a builtin read
#: costs ~12 ns a byte, a grep ~2 ms to start: almost every test module is shorter)
SCAN_BYTES = 256 * 1024
_SECTIONS = ("rc", "bytes", "skip", "head", "tail", "record")


@dataclass
class GradedScript:
    """One run's script and what its output is parsed with."""

    script: str
    token: str
    workdir: str
    #: prints what a killed run left (the head; `tail` writes only at the end) and removes the dir
    collect: str = ""


@dataclass
class GradedOutput:
    rc: int | None  # None: the script did not get as far as the test command's end
    output_bytes: int | None
    log: str  # head + tail (with a marker between when cut)
    truncated: bool
    record_text: str = ""
    skipped_modules: set[str] = field(default_factory=set)


def _write(path: str, text: str, append: bool) -> str:
    """bash's builtin printf: no process started (a heredoc would start `cat`)."""
    return f"printf '%s' {shlex.quote(text)} {'>>' if append else '>'} {path}\n"


def _mentions_testcase(q: str) -> str:
    """A shell condition: the module (quoted path ``q``) mentions ``TestCase``. Its first ``SCAN_BYTES`` are read
    by the shell itself; grep runs only on a longer module that does not mention it there."""
    return (f"src=; IFS= read -r -N {SCAN_BYTES} src < {q}\n"
            f"if [[ $src == *TestCase* ]] || {{ [ ${{#src}} -ge {SCAN_BYTES} ] && grep -qs TestCase {q}; }}")


def _collect(token: str) -> str:
    """Print every section between token lines with ONE process: the separators are written to files by the
    shell's printf, missing sections made empty, then a single ``cat`` of all of them; the dir is removed."""
    parts = [f"for s in {' '.join(_SECTIONS)}; do printf '\\n%s %s\\n' {token} \"$s\" > \"$d/=$s\"; "
             "[ -f \"$d/$s\" ] || : > \"$d/$s\"; done\n",
             f"printf '\\n%s end\\n' {token} > \"$d/=end\"\n",
             "cat " + " ".join(f"\"$d/={s}\" \"$d/{s}\"" for s in _SECTIONS) + " \"$d/=end\"\n",
             "rm -rf \"$d\"\n"]
    return "".join(parts)


def build_script(workdir: str, command: str, env_prefix: str, plugin: tuple[str, str] | None,
                 canaries: dict[str, str], unittest_canaries: dict[str, str] | None = None) -> GradedScript:
    """``workdir``: a fresh path outside the repository (created here, removed at the end); ``command``: the test
    command with its targets; ``env_prefix``: shell statements run first (exports/unsets); ``plugin``: (module
    name, source) of the recorder (writing to ``<workdir>/record``) or None; ``canaries``: module -> text to append;
    ``unittest_canaries``: module -> text appended only when the module mentions ``TestCase`` (else the module is
    reported as ``module::unittest`` among the skipped)."""
    token = secrets.token_hex(16)
    d = shlex.quote(workdir)
    parts = [f"d={d}; mkdir -m 700 \"$d\" || exit 97\n", env_prefix, "\n"]
    if plugin is not None:
        name, source = plugin
        parts.append(_write(f"\"$d\"/{name}.py", source, append=False))
        parts.append(f"export PYTHONPATH=\"$d${{PYTHONPATH:+:$PYTHONPATH}}\" "
                     f"PYTEST_ADDOPTS=\"-p {name}${{PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}}\"\n")
    for module, text in canaries.items():
        q = shlex.quote(module)
        extra = ""
        if unittest_canaries and module in unittest_canaries:
            extra = (f"{_mentions_testcase(q)}\nthen\n{_write(q, unittest_canaries[module], append=True)}"
                     f"else printf '%s\\n' {shlex.quote(module + '::unittest')} >> \"$d/skip\"; fi\n")
        parts.append(f"if [ -f {q} ] && [ ! -L {q} ]; then\n{_write(q, text, append=True)}{extra}"
                     f"else printf '%s\\n' {q} >> \"$d/skip\"; fi\n")
    collect = _collect(token)
    parts.append(
        "mkfifo \"$d/f\" || exit 97\n{ wc -c < \"$d/f\" > \"$d/bytes\" & }\n"
        f"{{ (\n{command}\n) < /dev/null 2>&1; echo $? > \"$d/rc\"; }} "
        f"| tee \"$d/f\" | {{ head -c {HEAD_BYTES} > \"$d/head\"; tail -c {TAIL_BYTES} > \"$d/tail\"; }}\n"
        "wait\n" + collect)
    return GradedScript(script="".join(parts), token=token, workdir=workdir, collect=f"d={d}\n" + collect)


def parse_output(stdout: str, token: str) -> GradedOutput | None:
    """The sections the script printed (None when it never printed them: killed, or the shell failed)."""
    marker = f"\n{token} "
    if f"\n{token} end\n" not in stdout:
        return None
    sections: dict[str, str] = {}
    for chunk in stdout.split(marker)[1:]:
        name, _, body = chunk.partition("\n")
        sections[name.strip()] = body
    rc_text = sections.get("rc", "").strip()
    bytes_text = sections.get("bytes", "").strip()
    rc = int(rc_text) if rc_text.lstrip("-").isdigit() else None
    total = int(bytes_text) if bytes_text.isdigit() else None
    head, tail = sections.get("head", ""), sections.get("tail", "")
    truncated = total is not None and total > HEAD_BYTES + TAIL_BYTES
    log = head + (f"\n[... {total - HEAD_BYTES - TAIL_BYTES} bytes of output cut ...]\n" if truncated and total
                  else "") + tail
    skipped = {line for line in sections.get("skip", "").splitlines() if line}
    return GradedOutput(rc=rc, output_bytes=total, log=log, truncated=truncated,
                        record_text=sections.get("record", ""), skipped_modules=skipped)
