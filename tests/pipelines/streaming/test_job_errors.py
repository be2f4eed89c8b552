"""How a failed streaming query is reported: a model error raised in the source comes back as itself, with its
message (file, byte, offsets) and no Spark stack trace; anything else stays a Spark failure with its text."""

from __future__ import annotations

from jbod_model.errors import DecodeError, InputError, JbodError
from pipelines.streaming.job import job_failure

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
