"""``python -m bench study list`` (bench/study/cli.py): every study of pipelines/studies/ with its description, the
list docs/guide.md points to instead of keeping one by hand."""

from __future__ import annotations

from support import REPO, bench_cli

from bench.study.spec import load_study, study_names


def test_study_list_prints_every_study_with_its_description():
    proc = bench_cli("study", "list", timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    names = study_names()
    assert [line.split()[0] for line in lines] == names  # one line a study, in name order, nothing else
    for name, line in zip(names, lines):
        description = load_study(name).spec.description
        assert description and line.endswith(description), (name, line)


def test_the_guide_points_to_the_command_instead_of_listing_studies():
    guide = (REPO / "docs" / "guide.md").read_text()
    assert "python -m bench study list" in guide
    names = study_names()
    for paragraph in guide.split("\n\n"):  # a study named as an example is fine; a run of them is a hand-kept list
        named = [name for name in names if f"`{name}`" in paragraph]
        assert len(named) <= 2, f"docs/guide.md lists studies by hand ({named}): point to `python -m bench study list`"
