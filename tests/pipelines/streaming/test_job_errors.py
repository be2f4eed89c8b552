"""How a failed streaming query is reported: a model error raised in the source comes back as itself, with its
message (file, byte, offsets) and no Spark stack trace; anything else stays a Spark failure with its text. A driver
JVM that stops under the job (out of memory: it is told to stop rather than hang) is named as such."""

from __future__ import annotations

import pytest

from jbod_model.errors import DecodeError, InputError, JbodError
from pipelines.streaming.job import job_failure, jvm_stopped
from pipelines.streaming.session import EXIT_ON_OOM, JIT_OPTIONS, with_exit_on_oom

SPARK_TEXT = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted.
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/pipelines/streaming/source.py", line 360, in _missing
    raise DecodeError(...)
jbod_model.errors.DecodeError: cluster c: offsets 25..28 cannot be read from /in/00000000000000000000.log at byte 2040
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:100)
"""


def test_a_decode_error_in_the_source_is_raised_as_itself() -> None:
    err = job_failure(SPARK_TEXT, " (Spark's own log: /t/spark-driver.log)")
    assert type(err) is DecodeError
    assert str(err) == ("cluster c: offsets 25..28 cannot be read from /in/00000000000000000000.log at byte 2040"
                        " (Spark's own log: /t/spark-driver.log)")


def test_an_input_error_too_and_the_last_one_wins() -> None:
    text = ("jbod_model.errors.InputError: first\n...\n"
            "jbod_model.errors.InputError: cluster x was in the stream but its input is gone\n")
    err = job_failure(text, "")
    assert type(err) is InputError and str(err) == "cluster x was in the stream but its input is gone"


def test_anything_else_stays_a_spark_failure() -> None:
    err = job_failure("java.lang.OutOfMemoryError: Java heap space", "")
    assert type(err) is JbodError and str(err).startswith("the Spark job failed: java.lang.OutOfMemoryError")


OOM_LOG = """26/11/25 08:36:12 ERROR Utils: Uncaught exception in thread task-result-getter-2
java.lang.OutOfMemoryError: Java heap space
Terminating due to java.lang.OutOfMemoryError: Java heap space
"""


def test_a_driver_jvm_out_of_memory_names_the_memory_and_what_the_next_run_needs() -> None:
    err = jvm_stopped(3, OOM_LOG, "3g", 650000, " (Spark's own log: /t/spark-driver.log)")
    assert type(err) is JbodError
    text = str(err)
    assert text.startswith("Spark's driver JVM ran out of memory (Java heap space; spark.driver.memory 3g)")
    # The micro-batch that ran out is run again as planned: the way out is a larger heap, not a smaller cap alone.
    assert "larger spark.driver.memory" in text and "this run's: 650000" in text
    assert "resumes from its checkpoint" in text and text.endswith("(Spark's own log: /t/spark-driver.log)")


def test_a_driver_jvm_stopped_otherwise_says_so_with_its_exit_code() -> None:
    err = jvm_stopped(-9, "WARN something else\n", "3g", 250000, "")
    assert str(err) == ("Spark's driver JVM stopped (exit code -9) during the run. What the job wrote stays; the "
                        "next run resumes from its checkpoint.")


@pytest.mark.parametrize(("options", "expected"), [
    ("", EXIT_ON_OOM),
    (f"{JIT_OPTIONS}", f"{JIT_OPTIONS} {EXIT_ON_OOM}"),
    # An operator's own choice of what the JVM does on running out of memory stands.
    ("-XX:OnOutOfMemoryError='kill -9 %p'", "-XX:OnOutOfMemoryError='kill -9 %p'"),
    ("-XX:+CrashOnOutOfMemoryError", "-XX:+CrashOnOutOfMemoryError"),
])
def test_the_driver_jvm_stops_on_running_out_of_memory_unless_told_otherwise(options: str, expected: str) -> None:
    assert with_exit_on_oom(options) == expected
