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
