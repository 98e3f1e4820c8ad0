"""The command line explains itself and keeps the terminal for the answer."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core.session import QUICK_JIT_CODE_CACHE_OPTION, QUICK_JIT_OPTION, THROUGHPUT_GC_OPTION
from jobs.cli import build_parser
from jobs.commands import COMMANDS
from jobs.output.units import money

REPO = Path(__file__).resolve().parents[1]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.spark_independent
def test_every_option_of_every_command_says_what_it_does_and_each_command_has_an_example():
    subparsers = _subparsers()
    assert set(subparsers) == {c.NAME for c in COMMANDS}
    for name, parser in subparsers.items():
        silent = [
            a.option_strings[0]
            for a in parser._actions
            if a.option_strings and a.help is None  # SUPPRESS is a choice: a hidden option
        ]
        assert not silent, f"{name}: options without help: {silent}"
        help_text = parser.format_help()
        assert f"example:\n  inventory-vacuum {name}" in help_text, help_text
    vacuum_help = subparsers["vacuum"].format_help()
    assert "(default: 72.0)" in vacuum_help and "(default: 4)" in vacuum_help  # defaults shown
    assert "examples:" in build_parser().format_help()


@pytest.mark.spark_independent
def test_json_works_on_every_command():
    for name, parser in _subparsers().items():
        assert any("--json" in a.option_strings for a in parser._actions), name


@pytest.mark.spark_independent
@pytest.mark.parametrize(
    "amount, exact, console",
    [
        (2.55e-06, "$0.0000026", "< $0.01"),
        (0.00252, "$0.0025", "< $0.01"),
        (0.0, "$0.00", "$0.00"),
        (1234.5, "$1,234.50", "$1,234.50"),
        (0.01, "$0.01", "$0.01"),
    ],
)
def test_money_reads_as_people_read_it(amount, exact, console):
    assert money(amount) == exact
    assert money(amount, exact=False) == console
    assert "e-" not in money(amount)


def _command(*argv: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """``inventory-vacuum ARGV`` in a process of its own, as a user runs it in a terminal."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYSPARK", "INVENTORY_VACUUM_JVM_LOG", "INVENTORY_VACUUM_QUICK_JIT"))
        # a collector chosen for every JVM of the machine would change what the tests assert
        and k not in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")
    }
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        # fetch-jars builds the class-data archive, running the demo in the archiving JVM: 5 min
        # on a 2-core machine alone, over 10 beside another test run
        timeout=1800,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.own_jvms
def test_a_warm_machine_starts_spark_without_ivy_and_the_terminal_shows_only_answers(tmp_path):
    """fetch-jars resolves with Ivy and keeps the list of jar files, and makes the JVM's
    class-data archive of them (S3A's and the AWS SDK's classes too); the JVM's output (Ivy's resolution report, JDK and log4j
    warnings) goes to the log file and the terminal shows the answer only. The next command loads
    the jars directly (no Ivy report in its log), maps their classes from the archive, and runs
    Delta, compiling with C1 only for one table's vacuum and not for another job; a jar changed
    since sends it back to Ivy."""
    cache = tmp_path / "cache"
    fetched = _command("fetch-jars", "--log-file", str(tmp_path / "fetch.log"), XDG_CACHE_HOME=str(cache))
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    assert fetched.stderr == "", fetched.stderr[-3000:]
    assert ":: resolution report ::" in (tmp_path / "fetch.log").read_text()  # Ivy's, kept
    [kept] = (cache / "inventory-vacuum").glob("jars-*.json")
    jars = json.loads(kept.read_text())["jars"]
    assert any("delta-spark" in jar["path"] for jar in jars) and all(Path(j["path"]).is_file() for j in jars)
    [archive] = (cache / "inventory-vacuum").glob("classes-*.jsa")
    # one line: the packages, and where their classes are archived
    assert fetched.stdout.count("\n") == 1 and "io.delta:delta-spark" in fetched.stdout, fetched.stdout
    assert fetched.stdout.rstrip().endswith(f"archived in {archive}"), fetched.stdout
    assert not list((cache / "inventory-vacuum").glob(".classes-*")), "a temporary file left behind"

    def vacuum_start(log: Path, tables: int = 1) -> str:
        registry = tmp_path / "tables.yaml"
        registry.write_text(
            "tables:\n"
            + "".join(
                f"  - {{name: t{i}, path: 's3://nowhere-bucket/t{i}', owner: team}}\n" for i in range(tables)
            )
        )
        completed = _command(
            "vacuum", "--inventory-table", f"file://{tmp_path}/no-inventory", "--tables", str(registry),
            "--dry-run", "--log-file", str(log), XDG_CACHE_HOME=str(cache),
        )  # fmt: skip
        # the session started, with the tested Delta (checked at start), and reached the inventory
        assert completed.returncode == 2 and "error: inventory table" in completed.stderr, completed.stderr
        return log.read_text()

    warm = vacuum_start(tmp_path / "warm.log")
    assert ":: resolution report ::" not in warm
    # one table's vacuum is a short-lived JVM: it compiles with C1 only, with the code cache the
    # JVM reserves with both compilers (48 MB C1 only), and keeps the JVM's collector (the JVM's
    # own options); two tables' is not, and gets the parallel collector
    c1_and_archive = (
        f"started with {QUICK_JIT_OPTION} (C1 only), with a code cache of 240 MB,"
        f" without the parallel collector option and the class-data archive {archive}"
    )
    assert c1_and_archive in warm, warm[-3000:]
    two = vacuum_start(tmp_path / "two.log", tables=2)
    # (the JVM's own code cache size: 240 MB on Java 17, 4 KB more on Java 25)
    long_run = re.compile(
        r"started without the C1-only option, with a code cache of [\d,]+ [MK]B,"
        + re.escape(f" with {THROUGHPUT_GC_OPTION} and the class-data archive {archive}")
    )
    assert long_run.search(two), two[-3000:]
    # a warm local session loads the jars where Ivy keeps them, after Spark's own on the JVM's
    # class path: none is copied into Spark's temporary folder (about 750 MB a start), a library
    # both have (Jackson) loads from Spark's, and Delta and S3A load
    probe = (
        "import json, os; from pyspark import SparkFiles; from core.session import build_spark_session;"
        "s = build_spark_session('probe'); c = s.sparkContext.getConf();"
        "print(json.dumps({'jars': c.get('spark.jars', ''), 'copied': os.listdir(SparkFiles.getRootDirectory()),"
        " 'classpath': s._jvm.java.lang.System.getProperty('java.class.path'),"
        " 's3a': s._jvm.org.apache.hadoop.fs.s3a.S3AFileSystem.__class__.__name__,"
        " 'sdk': s._jvm.software.amazon.awssdk.services.s3.S3Client.__class__.__name__,"
        " 'jackson': s._jvm.com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION.toString(),"
        " 'options': [str(o) for o in s._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()"
        ".getInputArguments()]}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    loaded = tmp_path / "classes-loaded.txt"  # the JVM's own record of where each class came from
    started = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO,
        env={**env, "XDG_CACHE_HOME": str(cache),
             "PYSPARK_SUBMIT_ARGS": f"--driver-java-options -Xlog:class+load=info:file={loaded} pyspark-shell"},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr[-3000:]
    session = json.loads(started.stdout.strip().splitlines()[-1])
    assert session["jars"] == "" and session["copied"] == [], session
    from_archive = [
        line for line in loaded.read_text().splitlines() if "source: shared objects file (top)" in line
    ]
    assert any(" io.delta.sql.DeltaSparkSessionExtension " in line for line in from_archive), from_archive[:5]
    assert len(from_archive) > 1000, len(from_archive)  # Spark's own, not only Delta's
    # fetch-jars ran the demo's steps over S3A in the archiving JVM: S3A and the AWS SDK map too
    for name in ("org.apache.hadoop.fs.s3a.S3AFileSystem", "software.amazon.awssdk.services.s3.S3Client"):
        assert any(f" {name} source: shared objects file" in line for line in from_archive), name
    classpath = session["classpath"].split(os.pathsep)
    ours = [i for i, entry in enumerate(classpath) if "delta-spark" in entry or "hadoop-aws" in entry]
    spark_core = [i for i, entry in enumerate(classpath) if "spark-core" in entry or entry.endswith("jars/*")]
    assert len(ours) == 2 and spark_core and max(spark_core) < min(ours), classpath
    assert session["s3a"] == session["sdk"] == "JavaClass", session
    assert not session["jackson"].startswith("2.13"), session
    # another job keeps the JVM's own compilers (a long run gets C2's code back), and runs the
    # parallel collector, with the archive's classes still mapped (checked above)
    assert QUICK_JIT_OPTION not in session["options"], session["options"]
    assert not [o for o in session["options"] if o.startswith("-XX:ReservedCodeCacheSize=")], session[
        "options"
    ]
    assert THROUGHPUT_GC_OPTION in session["options"], session["options"]
    document = json.loads(kept.read_text())
    document["jars"][0]["size"] += 1  # as if the jar had been downloaded again since
    kept.write_text(json.dumps(document))
    assert ":: resolution report ::" in vacuum_start(tmp_path / "changed.log")


@pytest.mark.spark_independent
def test_a_long_run_gets_the_parallel_collector_unless_a_collector_is_already_chosen(monkeypatch):
    """Not for a short run; and never a second collector where the user, the environment or the
    caller already chose one: the JVM would refuse to start with two."""
    from core import session

    for name in (
        "JAVA_TOOL_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "_JAVA_OPTIONS",
        "PYSPARK_SUBMIT_ARGS",
        "SPARK_SUBMIT_OPTS",
    ):
        monkeypatch.delenv(name, raising=False)
    assert session.collector_options(True) == []
    assert session.collector_options(False) == [THROUGHPUT_GC_OPTION]
    assert session.collector_options(False, {"spark.executor.extraJavaOptions": "-XX:+UseG1GC"}) == [
        THROUGHPUT_GC_OPTION  # the executors' options are not the local JVM's
    ]
    assert session.collector_options(False, {"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseZGC"}) == []
    assert session.collector_options(False, own=["-XX:+UseSerialGC"]) == []
    for name in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS"):
        with monkeypatch.context() as env:
            env.setenv(name, "-XX:+UseG1GC")
            assert session.collector_options(False) == [], name
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -XX:+UseShenandoahGC pyspark-shell")
    assert session.collector_options(False) == []
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -XX:+PrintGCDetails pyspark-shell")
    assert session.collector_options(False) == [THROUGHPUT_GC_OPTION]  # a GC option, not a choice
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    # options read from a file may choose one too
    for options in (
        "-XX:Flags=/etc/jvm.flags",
        "-XX:VMOptionsFile=/etc/jvm.options",
        "-Xss4m @/etc/jvm.args",
    ):
        assert session.collector_options(False, own=[options]) == [], options
    monkeypatch.setenv("JDK_JAVA_OPTIONS", "@/etc/jvm.args")
    assert session.collector_options(False) == []
    monkeypatch.delenv("JDK_JAVA_OPTIONS")
    assert session.collector_options(False, {"spark.driver.host": "user@host"}) == [THROUGHPUT_GC_OPTION]


@pytest.mark.spark_independent
def test_the_launchers_conf_folder_is_the_spark_home_pyspark_starts_from(tmp_path, monkeypatch):
    """PySpark looks for a Spark distribution in the current directory's parent before its own
    folder: a spark-defaults.conf there is one the tool must not override."""
    import pyspark

    from core.class_archive import launcher_conf_folder

    for name in ("SPARK_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert launcher_conf_folder() == os.path.join(os.path.dirname(pyspark.__file__), "conf")
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text("")
    (home / "jars").mkdir()
    (home / "python").mkdir()
    monkeypatch.chdir(home / "python")
    assert launcher_conf_folder() == str(home / "conf")
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert launcher_conf_folder() == "/opt/spark/conf"
    monkeypatch.setenv("SPARK_CONF_DIR", "/etc/spark")
    assert launcher_conf_folder() == "/etc/spark"


@pytest.mark.spark_independent
def test_the_quick_jit_follows_the_command_unless_the_environment_says_otherwise(monkeypatch):
    """C1 only for what the command calls a short run (a one-table vacuum);
    INVENTORY_VACUUM_QUICK_JIT=1 or 0 decides for every command, and any other value is a clear
    error, before a JVM starts."""
    from core import session
    from core.errors import ConfigError

    quick = [QUICK_JIT_OPTION, QUICK_JIT_CODE_CACHE_OPTION]
    for name in session._JAVA_OPTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(session.QUICK_JIT_VARIABLE, raising=False)
    assert session.quick_jit_options(True) == quick
    assert session.quick_jit_options(False) == []
    monkeypatch.setenv(session.QUICK_JIT_VARIABLE, "0")
    assert session.quick_jit_options(True) == []
    monkeypatch.setenv(session.QUICK_JIT_VARIABLE, "1")
    assert session.quick_jit_options(False) == quick
    monkeypatch.setenv(session.QUICK_JIT_VARIABLE, "yes")
    with pytest.raises(ConfigError, match="INVENTORY_VACUUM_QUICK_JIT='yes': give 1"):
        session.quick_jit_options(True)


@pytest.mark.spark_independent
def test_a_c1_only_jvm_gets_the_code_cache_of_both_compilers_unless_the_user_sets_one(monkeypatch):
    """C1 only, the JVM reserves 48 MB for compiled code, which one table's real run filled; the
    tool gives it the 240 MB it reserves with both compilers, but never over a size the user's
    options set (JAVA_TOOL_OPTIONS and JDK_JAVA_OPTIONS come before the tool's on the JVM's command
    line, and would lose to them) or a file of options that may set one."""
    from core import session

    for name in session._JAVA_OPTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(session.QUICK_JIT_VARIABLE, raising=False)
    assert session.quick_jit_options(True) == [QUICK_JIT_OPTION, QUICK_JIT_CODE_CACHE_OPTION]
    for name in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS"):
        monkeypatch.setenv(name, "-Xss4m -XX:ReservedCodeCacheSize=96m")
        assert session.quick_jit_options(True) == [QUICK_JIT_OPTION], name
        monkeypatch.delenv(name)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmaxjitcodesize96m")  # the JVM's other name for it
    assert session.quick_jit_options(True) == [QUICK_JIT_OPTION]
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")
    # the sizes of the cache's heaps: beside the tool's size, the JVM refused to start with three
    # that do not add up to it, and Java 25 with the pair of the non-method and non-profiled heaps
    heaps = "-XX:+SegmentedCodeCache -XX:NonNMethodCodeHeapSize=8m -XX:ProfiledCodeHeapSize=0m"
    for option in (
        "-XX:+SegmentedCodeCache -XX:NonNMethodCodeHeapSize=8m -XX:NonProfiledCodeHeapSize=40m",
        f"{heaps} -XX:NonProfiledCodeHeapSize=40m",
        "-XX:ProfiledCodeHeapSize=0m",
        "-XX:NonNMethodCodeHeapSize=8m",
    ):
        monkeypatch.setenv("JDK_JAVA_OPTIONS", option)
        assert session.quick_jit_options(True) == [QUICK_JIT_OPTION], option
    monkeypatch.setenv("JDK_JAVA_OPTIONS", "@/etc/jvm.args")
    assert session.quick_jit_options(True) == [QUICK_JIT_OPTION]
    monkeypatch.delenv("JDK_JAVA_OPTIONS")
    conf = {"spark.driver.extraJavaOptions": "-XX:ReservedCodeCacheSize=64m"}
    assert session.quick_jit_options(True, conf) == [QUICK_JIT_OPTION]
    assert session.quick_jit_options(True, own=["-XX:VMOptionsFile=/etc/jvm.opts"]) == [QUICK_JIT_OPTION]
    # other options, and other settings of Spark's, leave it in
    other = {"spark.executor.extraJavaOptions": "-XX:ReservedCodeCacheSize=64m"}
    assert session.quick_jit_options(True, other, ["-Xss4m"]) == [
        QUICK_JIT_OPTION,
        QUICK_JIT_CODE_CACHE_OPTION,
    ]
    assert session.quick_jit_options(False, conf) == []


@pytest.mark.spark_independent
def test_the_tools_java_options_never_replace_the_users(tmp_path, monkeypatch):
    """The C1 option (and the archive's) goes as spark.driver.defaultJavaOptions only where no user
    setting of it can exist; a master or jars given to the launcher as --conf count as given."""
    from core import class_archive, session

    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no conf"))
    monkeypatch.setenv(class_archive.SWITCH_VARIABLE, "0")  # the archive's own rules are tested above
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    assert session.local_driver_options([QUICK_JIT_OPTION], [], "4.2.0") == [QUICK_JIT_OPTION]
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--properties-file /etc/spark.conf pyspark-shell")
    assert session.local_driver_options([QUICK_JIT_OPTION], [], "4.2.0") == []
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.driver.defaultJavaOptions -Djavax.net.ssl.trustStore=/t\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert session.local_driver_options([QUICK_JIT_OPTION], [], "4.2.0") == []
    for given, setting in [
        ("--conf spark.master=spark://h:7077 pyspark-shell", "spark.master"),
        ('-c "spark.jars=/a b.jar" pyspark-shell', "spark.jars"),
        ("--conf spark.jars.packages=g:a:1 pyspark-shell", "spark.jars.packages"),
        ("--conf=spark.master=k8s://h:443 pyspark-shell", "spark.master"),
    ]:
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", given)
        assert setting in session._submitted_conf(), given
    for other in ("--conf spark.jars.ivy=/ivy pyspark-shell", "--conf=spark.jars.ivy=/ivy pyspark-shell"):
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", other)
        assert session._submitted_conf() == {}, other  # another setting of the same prefix is not the jars


@pytest.mark.spark_independent
def test_the_class_archive_is_named_only_after_a_clean_exit_and_used_only_where_it_can_be(
    tmp_path, monkeypatch, caplog
):
    """A child that fails leaves no archive and no temporary file, and its JVM's error is the
    reason logged; an archive is used only where the JVM can map it and no user option of the
    same setting exists (an empty Spark configuration folder, no properties file)."""
    from core import class_archive, session

    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no conf"))  # missing: nothing on the class path
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.SWITCH_VARIABLE, raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    # a child that writes half an archive and fails: a JVM that maps half an archive dies, so
    # nothing may carry the name
    child = tmp_path / "child"
    child.write_text(  # argv: -m core.class_archive FILE
        '#!/bin/sh\nprintf half > "$3"\necho "[0.1s][error][cds] Error: the JVM\'s reason"\necho last\nexit 1\n'
    )
    child.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(child))
    jars = [str(tmp_path / "some.jar")]
    assert class_archive.archive_file(jars, "4.2.0") is not None  # a Java is there
    assert class_archive.create(jars, "4.2.0") is None
    assert list((tmp_path / "cache" / "inventory-vacuum").iterdir()) == []
    assert "[error][cds] Error: the JVM's reason" in caplog.text
    assert class_archive.start_options(jars, "4.2.0") == []
    # an archive under the name is used, unless turned off
    archive = class_archive.archive_file(jars, "4.2.0")
    assert archive is not None
    archive.write_bytes(b"made by a JVM")
    assert class_archive.start_options(jars, "4.2.0") == [f"-XX:SharedArchiveFile={archive}"]
    monkeypatch.setenv(class_archive.SWITCH_VARIABLE, "0")
    assert class_archive.start_options(jars, "4.2.0") == []
    assert class_archive.driver_options_taken() is None  # the tool's other options still go
    monkeypatch.delenv(class_archive.SWITCH_VARIABLE)
    # the user's own default Java options, which the archive's setting (and C1's) would replace
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--properties-file /etc/spark.conf pyspark-shell")
    assert class_archive.start_options(jars, "4.2.0") == []
    assert "PYSPARK_SUBMIT_ARGS" in (class_archive.driver_options_taken() or "")
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    # a configuration folder with a file: Java neither writes nor maps an archive then, and the
    # file may set the driver's default Java options
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.driver.defaultJavaOptions -Xss4m\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert class_archive.start_options(jars, "4.2.0") == []
    assert "is not empty" in (class_archive.not_usable() or "")
    assert "is not empty" in (class_archive.driver_options_taken() or "")
    # a quote in the cache folder's path would break the launcher's option string
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no conf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "o'brien"))
    assert class_archive.start_options(jars, "4.2.0") == []
    assert session._driver_java_options(["-XX:SharedArchiveFile=/a b/c.jsa", "-Xlog:cds=error"]) == (
        '"-XX:SharedArchiveFile=/a b/c.jsa" -Xlog:cds=error'
    )


def test_a_failing_command_names_its_log_file(tmp_path):
    log_file = tmp_path / "command.log"
    registry = tmp_path / "tables.yaml"
    registry.write_text("tables:\n  - {name: t, path: 's3://nowhere-bucket/t', owner: team}\n")
    completed = _command(
        "vacuum",
        "--inventory-table",
        f"file://{tmp_path}/no-inventory",
        "--tables",
        str(registry),
        "--dry-run",
        "--log-file",
        str(log_file),
    )
    assert completed.returncode == 2, completed.stderr[-3000:]
    lines = completed.stderr.strip().splitlines()
    assert lines[0].startswith("inventory-vacuum vacuum: error: inventory table"), lines
    assert lines[-1] == f"inventory-vacuum vacuum: the log is in {log_file}", lines
    assert len(lines) == 2, lines


@pytest.mark.spark_independent
def test_a_log_file_that_cannot_be_written_is_a_one_line_usage_error(tmp_path):
    completed = _command(
        "iam-policy",
        "--tables",
        str(tmp_path / "tables.yaml"),
        "--inventory-table",
        "s3://meta/warehouse/inventory",
        "--log-file",
        str(tmp_path / "no-such-folder" / "command.log"),
    )
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"inventory-vacuum iam-policy: error: --log-file {tmp_path}/no-such-folder/command.log: "
        "cannot write there: No such file or directory"
    ]
    assert completed.stdout == ""


def test_the_demo_reaches_its_local_s3_only(spark, s3_server, monkeypatch, tmp_path):
    """The demo, and the class archive's training that runs its steps, writes and really deletes
    in its buckets: the local server's settings drop what would send boto3 or S3A to another
    store, and a setting left that would is refused before the first request."""
    from core.errors import ConfigError
    from core.s3 import driver_settings, s3_client
    from core.session import s3a_settings
    from jobs.demo import LAKE, _check_local, _demo

    for name, value in [
        ("AWS_ENDPOINT_URL_S3", "https://s3.us-east-1.amazonaws.com"),
        ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
        ("AWS_SESSION_TOKEN", "a-real-session"),
    ]:
        monkeypatch.setenv(name, value)
    s3_server.use_in_environment()
    endpoint = s3_server.endpoint
    assert s3_client().meta.endpoint_url == endpoint
    assert driver_settings()["endpoint_url"] == s3a_settings()["fs.s3a.endpoint"] == endpoint
    assert "AWS_SESSION_TOKEN" not in os.environ
    _check_local(spark, s3_client(), endpoint)

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value, refusal in [
        (
            f"fs.s3a.bucket.{LAKE}.endpoint",
            "https://s3.eu-west-1.amazonaws.com",
            f"S3A for {LAKE} would reach",
        ),
        (f"fs.s3a.bucket.{LAKE}.accesspoint.arn", "arn:aws:s3:eu-west-1:1:accesspoint/a", "access point"),
    ]:
        hadoop.set(key, value)
        s3_server.reset_counts()
        try:  # the demo's own steps stop before their first request
            with pytest.raises(ConfigError, match=refusal):
                _demo(spark, tmp_path, endpoint=endpoint, age_garbage=False)
        finally:
            hadoop.unset(key)
        assert not s3_server.counts(), s3_server.counts()
    elsewhere = s3_client({"endpoint_url": "https://s3.us-east-1.amazonaws.com"})
    with pytest.raises(ConfigError, match="but boto3 would reach https://s3.us-east-1.amazonaws.com"):
        _check_local(spark, elsewhere, endpoint)


@pytest.mark.slow
@pytest.mark.own_jvms
def test_a_failing_archive_workload_leaves_the_archive_of_what_loaded(spark, tmp_path, monkeypatch, caplog):
    """The caller's workload failing in the archiving child costs its classes only: the small
    Delta workload runs after it, the archive of the classes loaded is made under its name, a
    warning says why, and no temporary file is left (the JVM has exited before the file is looked
    at)."""
    import logging

    import pyspark

    from core import class_archive
    from core.jar_cache import cached_jars, remember_jars
    from core.session import jvm_packages
    from tests.support.archive_workload import ERROR

    # the jars of this run's session, kept in a cache of the test's own: the child starts on them
    packages = jvm_packages()
    jars = cached_jars(packages, pyspark.__version__) or spark.sparkContext.getConf().get("spark.jars").split(
        ","
    )
    monkeypatch.chdir(REPO)  # the child imports the workload by its module name
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(class_archive.SWITCH_VARIABLE, raising=False)
    # the JVM's output to a file, as the command's is: the child's pipe then does not wait for it
    monkeypatch.setenv("INVENTORY_VACUUM_JVM_LOG", str(tmp_path / "jvm.log"))
    assert remember_jars(packages, pyspark.__version__, ",".join(jars)) is not None
    with caplog.at_level(logging.WARNING, logger="inventory_vacuum"):
        archive = class_archive.create(jars, pyspark.__version__, workload="tests.support.archive_workload")
    assert archive == class_archive.archive_file(jars, pyspark.__version__), caplog.text
    assert archive is not None and archive.stat().st_size > 0
    # the small Delta workload ran after the failed one: Delta's classes are archived all the same
    assert (
        "loaded before tests.support.archive_workload's workload failed, and the small Delta "
        f"workload's run after it: {ERROR}"
    ) in caplog.text, caplog.text
    assert not list(archive.parent.glob(".classes-*")), "a temporary file left behind"
