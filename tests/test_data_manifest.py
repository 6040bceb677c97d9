"""The one image-manifest reader (data/manifest.py), used by `gp data manifest`, prepull before a run, `gp images
prepull` and the Prefect flow: it accepts every format either of the two former readers did (text lines with
whole-line or trailing ``#`` comments, a JSON list) and refuses anything else naming the file and line / item."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graph_planner.cli import app
from graph_planner.data.manifest import ManifestError, read_manifest

IMAGES = ["swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest", "127.0.0.1:5000/gp/sample@sha256:ab12",
          "python:3.11"]


@pytest.mark.parametrize(("text", "why"), [
    ("# images of the test split\n\n{0}\n  {1}  \n{2}\n{0}\n", "lines, whole-line comment, blanks, a repeat"),
    ("{0}  # prebuilt\n{1}\n# {2} is built, not pulled\n{2}\n", "trailing comments (prepull's old reader)"),
    (json.dumps(["{0}", "{1}", "{2}", "{1}"]), "a JSON list (prepull's old reader)"),
])
def test_every_format_either_reader_accepted(tmp_path, text, why):
    path = tmp_path / "docker_images.txt"
    path.write_text(text.format(*IMAGES))
    assert read_manifest(path) == IMAGES, why


@pytest.mark.parametrize(("text", "error"), [
    ("ok/image:1\nnot one image\n", r"docker_images.txt:2: 'not one image' is not an image name"),
    ('["ok/image:1", 3]', r"docker_images.txt: item 1: 3 is not an image name"),
    ('["ok/image:1",', r"docker_images.txt: not a JSON list of image names"),
])
def test_a_bad_entry_names_the_file_and_the_line_or_item(tmp_path, text, error):
    path = tmp_path / "docker_images.txt"
    path.write_text(text)
    with pytest.raises(ManifestError, match=error):
        read_manifest(path)


def test_a_missing_manifest_names_the_file(tmp_path):
    with pytest.raises(ManifestError, match=r"cannot read image manifest .*absent.txt: No such file"):
        read_manifest(tmp_path / "absent.txt")


def test_gp_images_prepull_refuses_a_bad_manifest_before_any_pull(tmp_path):
    path = tmp_path / "images.txt"
    path.write_text("ok/image:1\nbad image\n")
    result = CliRunner().invoke(app, ["images", "prepull", "--manifest", str(path)])
    assert result.exit_code == 2
    # rich wraps at 80 columns, at a space or (a long tmp path, as under pytest-xdist) mid-word: the message is
    # compared with all whitespace taken out of both sides
    assert "".join("images.txt:2: 'bad image' is not an image name".split()) in "".join(result.output.split())
