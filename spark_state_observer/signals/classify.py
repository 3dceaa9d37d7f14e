"""Why a query failed: the root-cause line of its exception, and the cause class an on-call engineer acts on.

Spark hands over the whole exception as text. What an engineer needs is buried in it: PySpark wraps a
``foreachBatch`` or UDF error in a py4j or ``PythonException`` whose first line is ``Traceback (most
recent call last):``; a JVM failure's real cause is its innermost ``Caused by:``. So the text is kept
bounded (its head and tail, ``bounded_text``), its root-cause line extracted (``root_cause``) and the
failure put into one of ``kinds.EXCEPTION_CLASSES`` (``classify_exception``): the vocabulary lives in
``spark_state_observer.model.signal_kinds`` so the catalog's help text, the mixin and the browser read the same list.
"""

from __future__ import annotations

import re

from spark_state_observer.model import signal_kinds as kinds

HEAD_CHARS = 4096
TAIL_CHARS = 4096
ROOT_CAUSE_CHARS = 1000
TRACEBACK_HEADER = "Traceback (most recent call last):"

# "RuntimeError: ...", "MemoryError", "pyspark.errors.exceptions.base.PySparkRuntimeError: ..." at column 0
_PY_ERROR = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)\b(?::.*)?$")
_CAUSED_BY = re.compile(r"^\s*Caused by:\s*(.+)$")
_FRAME = re.compile(r"^\s+at ")
_EXCEPTION_LINE = re.compile(r"^\s*(Caused by: )?[\w.$]+(Exception|Error|Failed)\b")
_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]{2,100}(?:\.[A-Z0-9_]{1,100})?)\]")

# (class, needles in the error class / root cause / exception lines, needles in JVM stack frames);
# rules are tried in order and the first that matches wins, so the specific ones come first.
_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    # the state in the checkpoint does not fit the query any more (schema or operators changed)
    (
        kinds.EXC_STATE_SCHEMA,
        (
            "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
            "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
            "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
            "StateSchemaNotCompatible",
            "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION",
            "schema is not compatible",
        ),
        (),
    ),
    (
        kinds.EXC_OUT_OF_MEMORY,
        ("OutOfMemoryError", "Java heap space", "exceeding memory limits", "Container killed", "GC overhead limit", "MemoryError"),
        (),
    ),
    # the Python side cannot even load the user's code: a missing or mismatched package on the workers
    (
        kinds.EXC_PYTHON_DEPENDENCY,
        ("ModuleNotFoundError", "ImportError", "No module named", "PYTHON_VERSION_MISMATCH", "PYTHON_WORKER_UNEXPECTEDLY_EXITED"),
        (),
    ),
    # the job asks for something the runtime cannot give: a class, a setting, a mode that does not fit
    (
        kinds.EXC_CONFIGURATION,
        (
            "ClassNotFoundException",
            "NoClassDefFoundError",
            "INVALID_CONF",
            "CONFIG_NOT_AVAILABLE",
            "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE",
            "STATEFUL_PROCESSOR_CANNOT",
            "STATE_STORE_INVALID_CONFIG_AFTER_RESTART",  # 4.x: a pinned state setting changed between restarts
            "STREAM_STREAM_JOIN_INCOMPATIBLE_STATE_STORE_CONFIGS",  # 4.2: join state format vs merge operator
            "UNSUPPORTED_STATE_STORE_PROVIDER",
            "STATE_STORE_PROVIDER",
            "ConfigException",
        ),
        (),
    ),
    (
        kinds.EXC_CHECKPOINT_CORRUPTION,
        (
            "CANNOT_LOAD_STATE_STORE",
            "CANNOT_READ_STREAMING_STATE_FILE",
            "CANNOT_READ_CHECKPOINT",
            "STREAMING_CHECKPOINT",
            "CANNOT_READ_DELTA_FILE",
            "CANNOT_READ_SNAPSHOT_FILE",
            # 4.1-4.3: checksums, checkpoint ids (format v2), a missing metadata file, an unfinished repartition
            "CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED",
            "STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED",
            "STATE_STORE_BASE_CHECKPOINT_ID_MISMATCH",
            "STATE_STORE_COMMIT_VALIDATION_FAILED",
            "STATE_STORE_UNEXPECTED_EMPTY_FILE_IN_ROCKSDB_ZIP",
            "MISSING_METADATA_FILE",
            "STATE_REPARTITION_INVALID_CHECKPOINT",
            "STREAMING_UNFINISHED_REPARTITION_DETECTED",
            "ChecksumException",
            "Stream is corrupted",
            # 3.5 has none of the classes above: its state stores throw these messages (a legacy error class or
            # none), naming the file but not the checkpoint
            "Error reading delta file",
            "Error reading snapshot file",
            "Error reading streaming state file",
            "checkpoint",
            "Checkpoint",
        ),
        # a state store loading its files from the checkpoint (3.5 wraps a missing RocksDB zip in nothing)
        (
            "RocksDBFileManager.loadCheckpointFromDfs",
            "StateStoreChangelogReader",
            "HDFSBackedStateStoreProvider.updateFromDeltaFile",
            "HDFSBackedStateStoreProvider.readSnapshotFile",
        ),
    ),
    (kinds.EXC_SINK, (), ("KafkaWriteTask", "KafkaWriter")),  # a Kafka error while writing, before Kafka means source
    (
        kinds.EXC_SOURCE,
        (
            "FAILED_READ_FILE",
            "org.apache.kafka",
            "KAFKA_DATA_LOSS",
            "OffsetOutOfRange",
            "CANNOT_READ_FILE",
            "not a Parquet file",
            "STREAM_FAILED",
            "DATA_SOURCE",
        ),
        ("FileScanRDD", "KafkaMicroBatchStream", "KafkaSource", "FileStreamSource", "MicroBatchStream.planInputPartitions"),
    ),
    # the user's own function raised: foreachBatch (through py4j or Scala) or a UDF in a Python worker
    # Spark 4.0 and older give a Python worker's error no error class: its ``PythonException`` carries the
    # worker's traceback as its message (4.1 added ``[PYTHON_EXCEPTION]``), so the traceback after it says so
    (
        kinds.EXC_USER_CODE,
        (
            "FOREACH_BATCH_USER_FUNCTION_ERROR",
            "PYTHON_EXCEPTION",
            "Python Proxy",
            "UDF_USER_CODE_ERROR",
            "FAILED_EXECUTE_UDF",
            "PythonException: Traceback (most recent call last):",
        ),
        ("PythonForeachBatchHelper", "ForeachBatchSink"),
    ),
    (
        kinds.EXC_SINK,
        ("TASK_WRITE_FAILED", "KafkaWriter", "FileAlreadyExistsException"),
        ("FileStreamSink", "FileFormatWriter", "KafkaWriteTask", "ForeachWriter", "DataSourceV2 write"),
    ),
)


def bounded_text(text: str | None, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str | None:
    """The exception's head and tail with a marker of what was cut between them: the first lines name the
    wrapper and the failed batch, the last ones the innermost cause; the plan in the middle is expendable."""
    if text is None:
        return None
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n[... {len(text) - head - tail} characters omitted ...]\n{text[-tail:]}"


_REASON = "Reason: "
_REASON_LINES = 12  # the message's own lines, before the query's description and the plan


def root_cause(error_class: str | None, text: str | None) -> str | None:
    """The one line that says what went wrong: the last error line of a Python traceback (the user's own
    error inside the py4j / PythonException wrappers), else the innermost ``Caused by:`` of a JVM trace,
    else the first line; prefixed with ``[ERROR_CLASS]`` when Spark gave one the line does not show."""
    if not text or not text.strip():
        return f"[{error_class}]" if error_class else None
    lines = text.splitlines()
    line: str | None = None
    if any(TRACEBACK_HEADER in candidate for candidate in lines):
        errors = [c.strip() for c in lines if not c.startswith((" ", "\t")) and _PY_ERROR.match(c.strip())]
        if errors:
            line = errors[-1]
    if line is None:
        causes = [m.group(1).strip() for m in (_CAUSED_BY.match(c) for c in lines) if m]
        line = causes[-1] if causes else next((c.strip() for c in lines if c.strip()), "")
        # an exception with no cause whose message says why on a line of its own (Spark's Kafka data loss:
        # "Reason: Partition events-0 offset was changed from 427 to 27."): that line is what went wrong
        reason = next((c.strip() for c in lines[:_REASON_LINES] if c.startswith(_REASON)), None)
        if not causes and reason:
            line = f"{line} {reason}"
    if error_class and error_class.split(".")[0] not in line:
        line = f"[{error_class}] {line}"
    return line[:ROOT_CAUSE_CHARS]


def cause_error_class(text: str | None) -> str | None:
    """The error class of the innermost ``Caused by:`` that names one: what Spark found under the class it
    reports (``CANNOT_LOAD_STATE_STORE.UNCATEGORIZED`` over ``CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED``)."""
    found = None
    for line in (text or "").splitlines():
        m = _CAUSED_BY.match(line)
        c = _ERROR_CLASS.search(m.group(1)) if m else None
        if c is not None:
            found = c.group(1)
    return found


def classify_exception(error_class: str | None, message: str | None, cause: str | None = None) -> str:
    """One of ``kinds.EXCEPTION_CLASSES`` for a termination.

    Checked against the error class, the root-cause line (``cause``; extracted from ``message`` when not
    given) and the message's exception lines (its first line and lines naming an exception), then, for the
    rules that need it, the JVM stack frames (a file sink's writer, a file source's scan). Spark appends the
    query's plan, whose ``checkpointLocation=`` and source names would otherwise match every rule, so plan
    lines never count.
    """
    lines = (message or "").splitlines()
    cause = cause if cause is not None else root_cause(error_class, message)
    texts = [t for t in [error_class or "", cause or ""] + [c for i, c in enumerate(lines) if i == 0 or _EXCEPTION_LINE.match(c)] if t]
    frames = [c for c in lines if _FRAME.match(c)]
    for name, needles, frame_needles in _RULES:
        if any(n in t for t in texts for n in needles) or any(n in f for f in frames for n in frame_needles):
            return name
    return kinds.EXC_OTHER
