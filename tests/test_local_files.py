"""The local files a command writes (a vacuum's report and candidate list, a chargeback report)
are whole or as they were: an interrupt while one is written never leaves it cut short."""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest

from core.local_files import names_standard_output, written_whole

pytestmark = pytest.mark.spark_independent

REPO = Path(__file__).resolve().parents[1]


def _left_in(folder) -> list[str]:
    return sorted(os.listdir(folder))


def test_a_file_written_whole_replaces_the_old_one_with_its_permissions(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o640)
    with written_whole(target) as partial, open(partial, "w") as out:
        assert os.path.dirname(partial) == str(tmp_path) and partial.endswith(".json")
        out.write("new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert _left_in(tmp_path) == ["report.json"]


def test_an_interrupt_while_a_file_is_written_leaves_the_old_one_or_none(tmp_path):
    old = tmp_path / "report.json"
    old.write_text('{"whole": true}')
    new = tmp_path / "candidates.csv"
    for target in (old, new):
        with pytest.raises(KeyboardInterrupt), written_whole(target) as partial:
            with open(partial, "w") as out:
                out.write('{"cut')
            raise KeyboardInterrupt
    assert json.loads(old.read_text()) == {"whole": True}
    assert not new.exists()
    assert _left_in(tmp_path) == ["report.json"]  # no partial file left behind


def test_a_link_stays_a_link_and_its_target_is_replaced(tmp_path):
    real = tmp_path / "reports" / "today.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    with written_whole(link) as partial, open(partial, "w") as out:
        out.write("new")
    assert link.is_symlink() and real.read_text() == "new"


def test_the_vacuum_commands_files_stay_whole_when_the_report_is_cut_short(tmp_path, monkeypatch):
    """The command's own writing of --candidates and --report: a Ctrl-C in the middle of the
    report leaves the report of the run before, and the candidate list written in full."""
    from jobs.commands import vacuum as command
    from jobs.output import output_for
    from vacuum.results import VacuumResult

    report, candidates = tmp_path / "report.json", tmp_path / "candidates.csv"
    report.write_text('{"run_id": "yesterday"}')
    args = argparse.Namespace(report=str(report), candidates=str(candidates), json=True)

    def cut_short(value, stream, **kwargs):
        stream.write('{"run_id": "to')
        raise KeyboardInterrupt

    monkeypatch.setattr(command.json, "dump", cut_short)
    with pytest.raises(KeyboardInterrupt):
        command._write_and_show(args, VacuumResult([], "today"), output_for(args, io.StringIO()))
    assert json.loads(report.read_text()) == {"run_id": "yesterday"}
    assert pa_csv.read_csv(candidates).column_names == ["table", "path", "length", "partition"]
    assert _left_in(tmp_path) == ["candidates.csv", "report.json"]
    monkeypatch.undo()
    command._write_and_show(args, VacuumResult([], "today"), output_for(args, io.StringIO()))
    assert json.loads(report.read_text())["run_id"] == "today"
    assert isinstance(pa_csv.read_csv(candidates), pa.Table)


def test_a_device_is_written_in_place_not_replaced(tmp_path):
    """A device (``/dev/null``, ``/dev/stderr``): no rename can replace it, so it is written as before."""
    with written_whole("/dev/null") as partial, open(partial, "w") as out:
        out.write("the report")
    assert partial == "/dev/null" and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_check_before_a_run_leaves_no_file_and_keeps_a_link(tmp_path):
    from core.errors import UsageError
    from jobs.commands.common import check_writable

    check_writable("--report", str(tmp_path / "report.json"))
    (tmp_path / "reports").mkdir()
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "reports" / "today.json")  # to a file not there yet
    check_writable("--report", str(link))
    assert _left_in(tmp_path) == ["latest.json", "reports"] and link.is_symlink()
    assert _left_in(tmp_path / "reports") == []
    with pytest.raises(UsageError, match=r"^--report .*/gone/report.json: cannot write there"):
        check_writable("--report", str(tmp_path / "gone" / "report.json"))


def test_the_commands_own_output_as_a_file_is_written_in_place(tmp_path):
    """``/dev/stdout`` of a program whose output is sent to a file (a job's log): the file stays
    the one the program writes to, so what it prints after is not lost."""
    log = tmp_path / "run.log"
    script = (
        "from core.local_files import written_whole\n"
        "with written_whole('/dev/stdout') as partial, open(partial, 'w') as out:\n"
        "    out.write('the report\\n')\n"
        "print('printed after', flush=True)\n"
    )
    before = None
    with open(log, "w") as out:
        before = os.fstat(out.fileno()).st_ino
        subprocess.run([sys.executable, "-c", script], stdout=out, check=True, cwd=REPO)
    assert log.stat().st_ino == before and "printed after" in log.read_text()
    assert _left_in(tmp_path) == ["run.log"]


def test_a_file_of_another_owner_or_with_other_links_is_written_in_place(tmp_path):
    other = tmp_path / "theirs.json"
    other.write_text("old")
    os.chown(other, 4321, 4321)  # the tests run as root
    linked = tmp_path / "linked.json"
    linked.write_text("old")
    os.link(linked, tmp_path / "other-name.json")
    for target in (other, linked):
        inode = target.stat().st_ino
        with written_whole(target) as partial, open(partial, "w") as out:
            out.write("new")
        assert target.stat().st_ino == inode and target.read_text() == "new"
    assert other.stat().st_uid == 4321 and (tmp_path / "other-name.json").read_text() == "new"


def test_a_rename_the_file_system_refuses_falls_back_to_writing_in_place(tmp_path, monkeypatch):
    """A file bind-mounted into a container cannot be renamed onto (EBUSY): it is written as before."""
    import errno

    target = tmp_path / "report.json"
    target.write_text("old")

    def busy(source, destination):
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))

    monkeypatch.setattr(os, "replace", busy)
    with written_whole(target) as partial, open(partial, "w") as out:
        out.write("new")
    assert target.read_text() == "new" and _left_in(tmp_path) == ["report.json"]


def test_the_written_file_ends_as_the_name_given_not_a_links_target(tmp_path):
    data = tmp_path / "data"
    data.write_text("")
    link = tmp_path / "latest.csv"
    link.symlink_to(data)
    with written_whole(link) as partial:
        assert partial.endswith(".csv")
        with open(partial, "w") as out:
            out.write("a\n")
    assert link.is_symlink() and data.read_text() == "a\n"


def test_a_file_with_extended_attributes_is_written_in_place(tmp_path):
    """A new file would lose them: an access list, a team's tag."""
    target = tmp_path / "report.json"
    target.write_text("old")
    try:
        os.setxattr(target, "user.owner-team", b"storage")
    except OSError as error:
        pytest.skip(f"no extended attributes here: {error.strerror}")
    inode = target.stat().st_ino
    with written_whole(target) as partial, open(partial, "w") as out:
        out.write("new")
    assert target.stat().st_ino == inode and os.getxattr(target, "user.owner-team") == b"storage"


def test_a_name_that_is_only_a_suffix_keeps_its_format(tmp_path):
    with written_whole(tmp_path / ".csv") as partial:
        assert partial.endswith(".csv")


def test_a_file_that_cannot_be_written_leaves_the_others_and_the_outcome(tmp_path, capsys):
    """After the run (its deletes done), a --candidates that cannot be written is one line of the
    command's error; the report is still written and the outcome still shown."""
    from jobs.commands import vacuum as command
    from jobs.output import output_for
    from vacuum.results import VacuumResult

    report = tmp_path / "report.json"
    args = argparse.Namespace(report=str(report), candidates=str(tmp_path / "gone" / "c.csv"), json=True)
    shown = io.StringIO()
    problems = command._write_and_show(args, VacuumResult([], "today"), output_for(args, shown))
    assert [p.split(": not written: ")[0] for p in problems] == [f"--candidates {tmp_path}/gone/c.csv"]
    assert json.loads(report.read_text())["run_id"] == "today"
    assert json.loads(shown.getvalue())["run_id"] == "today"


def test_the_standard_outputs_names_are_known_by_name_and_through_links(tmp_path):
    """The command line points descriptor 1 at its log, so where descriptor 1 points says nothing:
    the names say it."""
    link = tmp_path / "out.json"
    link.symlink_to("/dev/stdout")
    chain = tmp_path / "chain.json"
    chain.symlink_to(link)
    folder = tmp_path / "devices"
    folder.symlink_to("/dev")
    for named in (
        "/dev/stdout",
        "/dev/fd/1",
        "/proc/self/fd/1",
        f"/proc/{os.getpid()}/fd/1",
        "/dev/fd/../stdout",
    ):
        assert names_standard_output(named), named
    for named in (link, chain, folder / "stdout", "/proc/thread-self/fd/1"):
        assert names_standard_output(named), named
    for other in (
        "/dev/stderr",
        "/dev/fd/2",
        "/dev/null",
        "/proc/1/fd/1",
        tmp_path / "r.json",
        "stdout",
        folder / "fd" / "2",
    ):
        assert not names_standard_output(other), other


def test_a_report_to_the_standard_output_comes_before_the_result_on_it(tmp_path):
    """``--report /dev/stdout``: the report on the command's own output (the stream the result is
    shown on), not on descriptor 1, which the command line points at its log."""
    from jobs.commands import vacuum as command
    from jobs.output import output_for
    from vacuum.results import VacuumResult

    link = tmp_path / "latest.json"
    link.symlink_to("/dev/stdout")
    for report in ("/dev/stdout", str(link)):
        args = argparse.Namespace(report=report, candidates=None, json=True)
        shown = io.StringIO()
        assert command._write_and_show(args, VacuumResult([], "today"), output_for(args, shown)) == []
        written, result = shown.getvalue().split("\n}\n")
        assert json.loads(written + "}")["run_id"] == "today" and json.loads(result)["run_id"] == "today"
    assert _left_in(tmp_path) == ["latest.json"] and link.is_symlink()


def test_a_report_to_the_file_results_are_shown_on_goes_on_their_stream(tmp_path):
    """``--report out.json > out.json``: the command line shows its results on a copy of its
    standard output (descriptor 1 points at its log). Opened by the report's own writer, the file
    would be emptied and the result written over the report from its start; renamed onto, the
    result would go to the replaced file. The report goes on the results' stream, before them."""
    from core import local_files
    from jobs.commands import vacuum as command
    from jobs.output import output_for
    from vacuum.results import VacuumResult

    shown = tmp_path / "out.json"
    other = tmp_path / "other.json"
    other.write_text("")
    with open(shown, "w") as results, local_files.results_shown_on(results.fileno()):
        assert local_files.is_results_output(shown) and not local_files.is_results_output(other)
        args = argparse.Namespace(report=str(shown), candidates=None, json=False)
        assert command._write_and_show(args, VacuumResult([], "today"), output_for(args, results)) == []
    assert not local_files.is_results_output(shown)  # only while the command runs
    report, summary = shown.read_text().split("\n}\n", 1)
    console = io.StringIO()
    output_for(args, console).show("vacuum", VacuumResult([], "today"))
    assert json.loads(report + "}")["run_id"] == "today" and summary == console.getvalue()
    assert _left_in(tmp_path) == ["other.json", "out.json"]


def test_candidates_or_a_json_report_to_the_standard_output_is_a_usage_error(tmp_path, capsys):
    from tests.support.helpers import cli

    link = tmp_path / "candidates.csv"
    link.symlink_to("/dev/stdout")
    code, shown = cli(
        "vacuum", "--inventory-table", "s3://meta/inventory", "--tables", str(tmp_path / "tables.yaml"),
        "--dry-run", "--candidates", str(link),
    )  # fmt: skip
    assert code == 2 and shown == ""
    assert capsys.readouterr().err == (
        f"inventory-vacuum vacuum: error: --candidates {str(link)!r} is where the results are shown: "
        "give another file\n"
    )
    # --json writes the report on stdout already: a second document there would break its reader
    code, shown = cli(
        "vacuum", "--inventory-table", "s3://meta/inventory", "--tables", str(tmp_path / "tables.yaml"),
        "--dry-run", "--report", "/dev/stdout", "--json",
    )  # fmt: skip
    assert code == 2 and shown == ""
    assert capsys.readouterr().err == (
        "inventory-vacuum vacuum: error: --report '/dev/stdout' is where --json writes the report already\n"
    )
