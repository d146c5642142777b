"""The on-disk layout has one owner (`mtbio.run_dir`) and `mtbio report` picks a registered report kind."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.reports import REPORT_KINDS, ReportOptions, register_report, render_report
from mtbio.run_dir import STUDY_LAYOUTS, RunDir, SweepDir, register_study


def _run(path: Path, weights: bool = True, finished: bool = True) -> Path:
    path.mkdir(parents=True)
    if weights:
        (path / "encoder").mkdir()
    if finished:
        RunDir(path).write_results({"stage": "single-task", "dev": {}})
    return path


def test_run_dirs_are_found_at_their_depths(tmp_path: Path) -> None:
    single = _run(tmp_path / "single")
    assert RunDir.find(single) == [RunDir(single)] and RunDir(single).stage == "single-task"
    a, b = _run(tmp_path / "ft" / "chemprot" / "seed-42"), _run(tmp_path / "ft" / "ddi")
    unfinished = _run(tmp_path / "ft" / "hoc", finished=False)
    assert RunDir.find(tmp_path / "ft") == [RunDir(b), RunDir(a)]
    assert RunDir(unfinished) in RunDir.find(tmp_path / "ft", weights=True) and RunDir(unfinished).stage == "unknown"
    with pytest.raises(MtbioError, match="no results.json here or one or two levels down"):
        RunDir.find(tmp_path / "nothing")
    assert RunDir(single).config() == {}


def test_a_study_registers_its_layout_and_a_sweep_dir_finds_it(tmp_path: Path) -> None:
    from mtbio.reporting.relations import PAIRWISE, STILT

    sweep = SweepDir(tmp_path)
    cell = _run(tmp_path / "pairs" / "a+b" / "seed-42")
    _run(tmp_path / "pairs" / "a+b" / "seed-43", finished=False)
    (tmp_path / "relations.json").write_text("{}")
    assert PAIRWISE.found_in(tmp_path) and not STILT.found_in(tmp_path)
    assert sweep.cell_runs(PAIRWISE.cells) == [RunDir(cell)]
    assert sweep.summary_file(STILT) == tmp_path / "stilt.json"
    loo = register_study("leave-one-out", "leave_one_out.json", ("without",))  # a new kind: one registration
    assert STUDY_LAYOUTS["leave-one-out"] == loo and register_study("leave-one-out", "leave_one_out.json",
                                                                    ("without",)) == loo
    with pytest.raises(MtbioError, match="already registered with another layout"):
        register_study("leave-one-out", "other.json")


def test_report_kinds_are_tried_in_order_and_a_new_kind_is_one_registration(tmp_path: Path) -> None:
    assert [k.name for k in REPORT_KINDS.in_order() if k.fallback] == ["runs"]  # whatever no other kind takes
    marker = tmp_path / "loo"
    marker.mkdir()
    (marker / "leave_one_out.json").write_text(json.dumps({"gain": 1.5}))

    @register_report("leave-one-out-test", lambda paths, options: any((p / "leave_one_out.json").is_file() for p in paths))
    def render(paths: list[Path], options: ReportOptions) -> list[str]:
        return [f"gain {json.loads((paths[0] / 'leave_one_out.json').read_text())['gain']}"]

    try:
        assert render_report([marker], ReportOptions()) == ["gain 1.5"]
        result = CliRunner().invoke(main, ["report", str(marker)])
        assert result.exit_code == 0 and result.output.strip() == "gain 1.5"
    finally:
        REPORT_KINDS.unregister("leave-one-out-test")
