"""Where the driver JVM's CPU goes: Java Flight Recorder (the JDK's own profiler) around a piece
of work, read back as shares of its execution samples.

The event log (``many_tables.parse_event_log``) times Spark's jobs; it does not see the driver's
work between and around them: planning each query, generating and compiling code for it, Delta's
log reading, Py4J. A JFR recording does. With JFR's ``profile`` settings every running Java thread
is sampled every 10-20 ms; a share below is the part of all samples whose stack holds a frame of
that kind (the kinds overlap: compiling happens inside planning).

A recording costs time of its own (the profiled run is slower than an unprofiled one), so the
profiled run is never one of a benchmark's timed runs.

Catalyst's own metering (``RuleExecutor``) times the analyser's and optimiser's rules instead, at
no cost worth measuring, so a timed run reads it: how much of the driver's work between jobs is
analysing and optimising each query's plan, and in which rules.

    shares, top = profile_shares(Path("driver.jfr"))
    reset_rule_times(spark); work(); rules = rule_times(spark)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# kind of work: substrings of a frame's "package.Class.method" that mark it
KINDS: dict[str, tuple[str, ...]] = {
    "compiling generated code (Janino, its class loading)": (
        "org.codehaus.janino.",
        "org.codehaus.commons.compiler.",
        "codegen.CodeGenerator$.doCompile",
    ),
    "generating code (whole-stage and expression codegen)": (
        ".doProduce(",
        ".doConsume(",
        ".doGenCode(",
        ".genCode(",
        "codegen.CodegenContext.",
    ),
    "Catalyst rules (analysis, optimisation, planning)": ("catalyst.rules.RuleExecutor.execute(",),
    "Spark tasks (the executor's threads)": ("org.apache.spark.executor.Executor$TaskRunner.run(",),
    "Delta's own code": ("org.apache.spark.sql.delta.",),
    "Py4J (calls from Python)": ("py4j.",),
    # each class Python names through py4j's JVM view is looked up by name on every call, trying
    # the view's imports in turn: a lookup that fails builds a ClassNotFoundException
    "Py4J's lookups of classes by name": ("py4j.commands.ReflectionCommand.getUnknownMember(",),
    # Spark serialises a closure to check it before each RDD operation that cleans one, and each
    # stage's task binary: an operator's closure holds its whole plan below, expressions included
    "Java serialisation (closure checks, task binaries)": ("java.io.ObjectOutputStream.",),
    # the operator of a typed Dataset's deserialiser (Delta's state, its tombstones, its VACUUM's
    # typed steps), on any thread: outside whole-stage code generation each task generates the
    # deserialiser's code anew; on the driver, the operator plans the RDD below it
    "typed Datasets' deserialisers (DeserializeToObjectExec)": ("execution.DeserializeToObjectExec.",),
    "S3A and the AWS SDK": ("org.apache.hadoop.fs.s3a.", "software.amazon.awssdk.", "com.amazonaws."),
}


def record(spark: Any, work: Callable[[], T]) -> tuple[T, Path]:
    """Run ``work`` under a JFR recording of the driver JVM (``profile`` settings); return its
    result and the recording's file (in a new temporary directory)."""
    jvm = spark._jvm
    recording = jvm.jdk.jfr.Recording(jvm.jdk.jfr.Configuration.getConfiguration("profile"))
    recording.start()
    try:
        result = work()
    finally:
        recording.stop()
    path = Path(tempfile.mkdtemp(prefix="driver-profile-")) / "driver.jfr"
    recording.dump(jvm.java.io.File(str(path)).toPath())
    recording.close()
    return result, path


# kind of thread a sample ran in: patterns of its name (the first that matches)
THREADS: dict[str, re.Pattern[str]] = {
    "in the threads Python calls the JVM in (Py4J's)": re.compile(r"Thread-\d+"),
    "in Spark's task threads": re.compile(r"Executor task "),
    "in Spark's scheduler (DAGScheduler)": re.compile(r"dag-scheduler-event-loop"),
}


def _jfr_tool() -> str:
    home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(home) / "bin" / "jfr")] if home else []
    candidates.append(shutil.which("jfr") or "")
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise RuntimeError("the JDK's jfr tool is not found (JAVA_HOME/bin/jfr or jfr on PATH)")


def profile_shares(
    path: Path, depth: int = 2048, top: int = 10
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """({samples, kind: share}, the ``top`` frames the CPU was in most, with their shares), from
    the execution samples of the recording at ``path`` (read up to ``depth`` frames from the
    running one: the whole of what the recording kept, whose stacks JFR marks ``...`` where it
    cut them)."""
    command = [
        _jfr_tool(),
        "print",
        "--events",
        "jdk.ExecutionSample",
        "--stack-depth",
        str(depth),
        str(path),
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as printer:
        assert printer.stdout is not None
        result = shares_of(printer.stdout, top)
    if printer.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed with exit code {printer.returncode}")
    return result


# the share of samples whose stack the recording cut (``jfr print`` ends it with ``...``): JFR keeps
# 64 frames from the running one unless the JVM starts with -XX:FlightRecorderOptions:stackdepth=N,
# and a deep stack's bottom frames (where Python's call or Catalyst's rule that led to it sits) are
# then missing, so every kind's share counts only the stacks that reach it
CUT = "stacks cut short (the kinds above miss what lies below the cut)"


def shares_of(lines: Iterable[str], top: int = 10) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`profile_shares` of the text ``jfr print --events jdk.ExecutionSample`` writes."""
    kinds: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    samples = cut = 0
    threads: Counter[str] = Counter()
    frames: list[str] | None = None
    for line in lines:
        text = line.strip()
        if text.startswith("sampledThread = "):
            name = text.split('"')[1] if text.count('"') >= 2 else ""
            threads[next((kind for kind, pattern in THREADS.items() if pattern.match(name)), "")] += 1
        elif text == "stackTrace = [":
            frames = []
            truncated = False
        elif frames is not None and text == "]":
            samples += 1
            cut += truncated
            if frames:
                leaves[frames[0].split("(", 1)[0]] += 1
            for kind, marks in KINDS.items():
                if any(mark in frame for frame in frames for mark in marks):
                    kinds[kind] += 1
            frames = None
        elif frames is not None and text == "...":
            truncated = True
        elif frames is not None:
            frames.append(text)
    shares: dict[str, Any] = {"samples": samples}
    shares.update({kind: round(kinds[kind] / max(1, samples), 3) for kind in KINDS})
    shares[CUT] = round(cut / max(1, samples), 3)
    shares.update({kind: round(threads[kind] / max(1, samples), 3) for kind in THREADS})
    frames_top = [
        {"frame": frame, "share": round(count / max(1, samples), 3)}
        for frame, count in leaves.most_common(top)
    ]
    return shares, frames_top


# a rule's line in RuleExecutor.dumpTimeSpent(): its name, effective / total nanoseconds, effective /
# total runs
_RULE_LINE = re.compile(r"^(\S+)\s+(\d+) / (\d+)\s+(\d+) / (\d+)\s*$")
# rules whose time is mostly waiting rather than Catalyst's work: resolving a Delta table reads its
# log, and Delta's PrepareDeltaScan runs its file skipping's Spark job inside the rule
WAITING_RULES = ("ResolveDataSource", "Analyzer$ResolveRelations", "PrepareDeltaScan")


def reset_rule_times(spark: Any) -> None:
    """Start Catalyst's rule metering afresh (``RuleExecutor``'s, JVM-wide: every thread's queries)."""
    spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.resetMetrics()


def rule_times(spark: Any, top: int = 5) -> dict[str, Any]:
    """Time inside Catalyst's rules since :func:`reset_rule_times`: :func:`rule_times_of`
    ``RuleExecutor.dumpTimeSpent()``."""
    return rule_times_of(spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.dumpTimeSpent(), top)


def rule_times_of(text: str, top: int = 5) -> dict[str, Any]:
    """{seconds, runs, waiting_seconds, analyser_seconds, top: the ``top`` rules by time, each
    {rule, seconds, runs, effective_runs}} from the text of ``RuleExecutor.dumpTimeSpent()``.

    ``seconds`` is Spark's total, the sum of every rule's time: an upper bound on Catalyst's own
    work, as a rule's time includes whatever it waits for (:data:`WAITING_RULES`, whose sum is
    ``waiting_seconds``) and a rule run inside another counts in both. ``analyser_seconds`` sums
    the analyser's other rules, which run on every DataFrame as it is built. Raises ValueError on
    text that is not such a dump, or whose rules do not add up to its total (a line not read)."""
    rules: list[dict[str, Any]] = []
    seconds = runs = None
    analyser = 0.0
    for line in text.splitlines():
        text_line = line.strip()
        if text_line.startswith("Total time:"):
            seconds = float(text_line.split(":", 1)[1].split()[0])
        elif text_line.startswith("Total number of runs:"):
            runs = int(text_line.split(":", 1)[1])
        elif match := _RULE_LINE.match(text_line):
            name, _, total_ns, effective_runs, total_runs = match.groups()
            short = name.rsplit(".", 1)[-1]
            rules.append(
                {
                    "rule": short,
                    "seconds": int(total_ns) / 1e9,
                    "runs": int(total_runs),
                    "effective_runs": int(effective_runs),
                }
            )
            if (".catalyst.analysis." in name or "Analyzer$" in name) and short not in WAITING_RULES:
                analyser += int(total_ns) / 1e9
    if seconds is None or runs is None:
        raise ValueError("not the text of RuleExecutor.dumpTimeSpent(): no total time or runs")
    if abs(sum(rule["seconds"] for rule in rules) - seconds) > 0.001 + seconds * 1e-6:
        raise ValueError("RuleExecutor.dumpTimeSpent(): its rules' lines do not add up to its total time")
    rules.sort(key=lambda rule: -rule["seconds"])
    waiting = sum(rule["seconds"] for rule in rules if rule["rule"] in WAITING_RULES)
    return {
        "seconds": seconds,
        "runs": runs,
        "waiting_seconds": round(waiting, 3),
        "analyser_seconds": round(analyser, 3),
        "top": rules[:top],
    }


def rules_markdown(runs: list[dict[str, Any]]) -> list[str]:
    """A line per run on the time inside Catalyst's rules, when the run measured it."""
    lines: list[str] = []
    for r in runs:
        rules = r["events"].get("rules")
        if not rules:
            continue
        tables = max(1, rules["tables"])
        top = "; ".join(
            f"{rule['rule']} {rule['seconds'] / tables:.2f} s ({rule['runs'] / tables:,.0f} runs)"
            for rule in rules["top"][:3]
        )
        parts = ""
        if "waiting_seconds" in rules:
            parts = (
                f", {rules['waiting_seconds'] / tables:.2f} s of it in rules that read a Delta table's log "
                f"or run Delta's file skipping ({', '.join(WAITING_RULES)}) and "
                f"{rules['analyser_seconds'] / tables:.2f} s in the analyser's other rules"
            )
        lines.append(
            f"At --parallel {r['parallel']}, Catalyst's rules took at most {rules['seconds'] / tables:.2f} s "
            f"a table{parts} ({rules['runs'] / tables:,.0f} rule runs a table; `RuleExecutor`'s "
            f"metering, the sum of its rules' times over every thread); the most: {top}. A rule's time "
            "includes what it waits for, a core too when more tables run at a time than the machine "
            "has, and a rule run inside another counts in both."
        )
    return ["", *lines] if lines else []
