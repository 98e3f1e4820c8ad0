"""What a Spark or JVM error becomes in a table's reason and a job's one-line error."""

from __future__ import annotations

import pytest

from core.errors import spark_error_summary

pytestmark = pytest.mark.spark_independent


class Py4JLike(Exception):
    """An error whose text is laid out as Py4J lays out a Java exception's."""


def test_py4js_colon_never_starts_the_summary():
    read = Py4JLike(
        "An error occurred while calling o12.collectToPython.\n"
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while "
        "reading file s3a://inv/t/part-1.parquet. File does not exist. SQLSTATE: KD001\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.fileNotExistError(QueryExecutionErrors.scala:1)\n"
    )
    summary = spark_error_summary(read)
    assert summary.startswith("[FAILED_READ_FILE.FILE_NOT_EXIST]") and "s3a://inv/t/part-1.parquet" in summary
    # only Py4J's one ": " goes: the message's own text is kept as it is
    assert spark_error_summary(Py4JLike(": java.io.IOException: ::1 refused the connection")) == (
        "::1 refused the connection"
    )


def test_py4js_call_line_is_never_the_summary_when_the_java_error_follows():
    corrupt_orc = Py4JLike(
        "An error occurred while calling o73.orc.\n"
        ": com.google.protobuf.InvalidProtocolBufferException: Protocol message tag had invalid wire type.\n"
        "\tat com.google.protobuf.InvalidProtocolBufferException.invalidWireType(X.java:1)\n"
    )
    assert spark_error_summary(corrupt_orc) == "Protocol message tag had invalid wire type."
    # alone, it is all there is to say
    assert spark_error_summary(Py4JLike("An error occurred while calling o43.save.")) == (
        "An error occurred while calling o43.save."
    )


def test_a_wrapper_of_several_failures_is_summarised_by_the_first_it_lists():
    cancelled = Py4JLike(
        "An error occurred while calling o2210.first.\n"
        ": org.apache.spark.SparkException: [STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) "
        "in stage materialization: \n"
        "  1. SparkException: [SPARK_JOB_CANCELLED] Job 7922 cancelled part of cancelled job tags "
        "inventory-vacuum-deletes-def6 SQLSTATE: XXKDA\n"
        "  2. SparkException: [SPARK_JOB_CANCELLED] Job 7923 cancelled part of cancelled job tags "
        "inventory-vacuum-deletes-def6 SQLSTATE: XXKDA SQLSTATE: XX000\n"
        "\tat org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec.cleanUpAndThrowException(X.scala:1)\n"
    )
    assert spark_error_summary(cancelled) == (
        "[SPARK_JOB_CANCELLED] Job 7922 cancelled part of cancelled job tags inventory-vacuum-deletes-def6 "
        "SQLSTATE: XXKDA"
    )


def test_the_first_listed_failure_speaks_for_a_wrapper_even_when_a_cancellation_follows():
    aborted = (
        "Job aborted due to stage failure: Task 0 in stage 12.0 failed 1 times, most recent failure: "
        "org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "s3a://inv/t/part-7.parquet. SQLSTATE: KD001\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(X.scala:1)\n"
        "Caused by: java.nio.file.AccessDeniedException: s3a://inv/t/part-7.parquet: 403 Forbidden\n"
    )
    denied_then_cancelled = Py4JLike(
        "An error occurred while calling o2210.first.\n"
        ": org.apache.spark.SparkException: [STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) "
        "in stage materialization: \n"
        f"  1. SparkException: {aborted}"
        "  2. SparkException: [SPARK_JOB_CANCELLED] Job 7923 cancelled part of cancelled job tags t SQLSTATE: XXKDA\n"
        "\tSuppressed: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 7923 cancelled SQLSTATE: XXKDA\n"
    )
    assert spark_error_summary(denied_then_cancelled) == "s3a://inv/t/part-7.parquet: 403 Forbidden"
    # a first failure with no error condition is itself the summary, not the wrapper's line
    no_condition = Py4JLike(
        "[STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) in stage materialization: \n"
        "  1. IOException: No space left on device\n"
        "  2. SparkException: [SPARK_JOB_CANCELLED] Job 12 cancelled SQLSTATE: XXKDA"
    )
    assert spark_error_summary(no_condition) == "No space left on device"
    # a wrapper listed first in a wrapper: its own first failure
    nested = Py4JLike(
        "[STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) in stage materialization: \n"
        "  1. SparkException: [STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) in stage "
        "materialization: \n"
        "  1. IOException: No space left on device\n"
        "  2. SparkException: [SPARK_JOB_CANCELLED] Job 12 cancelled SQLSTATE: XXKDA\n"
        "  2. SparkException: [SPARK_JOB_CANCELLED] Job 13 cancelled SQLSTATE: XXKDA"
    )
    assert spark_error_summary(nested) == "No space left on device"
    # a wrapper listed first whose own list is cut off: the next item is the outer's second
    cut_off = Py4JLike(
        "[STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) in stage materialization: \n"
        "  1. SparkException: [STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (1) in stage "
        "materialization: \n"
        "  2. SparkException: [SPARK_JOB_CANCELLED] Job 13 cancelled SQLSTATE: XXKDA"
    )
    assert "cancelled" not in spark_error_summary(cut_off)
    # Spark's earlier wrapper: the first failure is its cause, the others are suppressed
    earlier = Py4JLike(
        ": org.apache.spark.SparkException: Multiple failures in stage materialization.\n"
        "\tSuppressed: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 2 cancelled SQLSTATE: XXKDA\n"
        "Caused by: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 1 cancelled SQLSTATE: XXKDA\n"
    )
    assert spark_error_summary(earlier) == "[SPARK_JOB_CANCELLED] Job 1 cancelled SQLSTATE: XXKDA"
    # nor the causes of a suppressed failure, indented below it
    read_and_cancelled = Py4JLike(
        ": org.apache.spark.SparkException: Multiple failures in stage materialization.\n"
        "\tat org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec.x(X.scala:1)\n"
        "\tSuppressed: org.apache.spark.SparkException: Job aborted due to stage failure\n"
        "\t\tat org.apache.spark.scheduler.DAGScheduler.x(DAGScheduler.scala:1)\n"
        "\tCaused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] reading s3a://inv/part-9\n"
        "\t\tat x(y:1)\n"
        "Caused by: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 1 cancelled SQLSTATE: XXKDA\n"
    )
    assert spark_error_summary(read_and_cancelled) == "[SPARK_JOB_CANCELLED] Job 1 cancelled SQLSTATE: XXKDA"
    # a message of its own that begins with a number is no list
    assert spark_error_summary(Py4JLike("3. [NOT_LISTED] step 3 failed")) == "3. [NOT_LISTED] step 3 failed"
