"""Run one stateful query written in Scala, in the installed PySpark's own ``spark-shell``, and record it as
``scenario_job.py`` records a Python one.

    python scripts/scala_job.py --out DIR --checkpoint DIR --query fmgws_no_timeout --duration 240 [--event-log]

Some of Spark's stateful operators exist only in its Scala API: ``flatMapGroupsWithState`` /
``mapGroupsWithState`` (``GroupState``, with or without a timeout) and Scala's ``transformWithState``
(``StatefulProcessor``, Spark 4.0+). Their progress names them ``flatMapGroupsWithState`` and
``transformWithStateExec``, operators no PySpark pipeline produces. The PySpark package ships ``spark-shell`` and
the Scala compiler, so each query below is a Scala script run by it (``-i``, on 4.0 a ``:paste`` on its input; the
script exits the shell). The same scripts run on PySpark 3.5 (Scala 2.12; no ``transformWithState``: only the
``flatMapGroupsWithState`` queries), 4.0 and 4.1+ (Scala 2.13): they use no API whose Scala versions differ.

Writes into ``--out`` (the Scala script too while it runs): ``progress.jsonl`` (each ``StreamingQueryProgress.json`` of the run, as
``scenario_job.py`` writes ``query.recentProgress``), ``run.json`` (the same facts ``scenario_job.py`` writes:
``process_started`` before the shell starts, ``process_ended`` when the query's time is over, before it is stopped),
an empty ``signals.jsonl`` (no Python listener runs in a Scala driver; the recordings are judged by replay) and
Spark's event log under ``--out/eventlog`` with ``--event-log``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"

_IMPORTS = """
import org.apache.spark.sql.streaming._
import org.apache.spark.sql.functions._
import org.apache.spark.sql.Encoders
import spark.implicits._
"""

# the growth queries' input: a rate source, a new key every 10 rows (``value / 10``), so keys keep coming
_RATE = """
val rate = spark.readStream.format("rate").option("rowsPerSecond", {rows}).load()
val keyed = rate.select((col("value") / 10).cast("long").as("key"), col("timestamp").as("ts")).as[(Long, java.sql.Timestamp)]
"""

# 100 fixed keys (``value % 100``): the state's rows stop at 100
_FIXED_KEYS = """
val rate = spark.readStream.format("rate").option("rowsPerSecond", {rows}).load()
val keyed = rate.select((col("value") % 100).as("key"), col("timestamp").as("ts")).as[(Long, java.sql.Timestamp)]
"""

# the restore queries' input, as ``scripts/restore_queries.py`` makes it: ``rows_per_batch`` rows a batch however
# long it took, each exploded into ``fanout`` rows over ``keys`` keys (a state that fills up to ``keys`` entries)
_FILLING = """
val source = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", {rows_per_batch}).load()
val keyed = source
  .select(explode(sequence(col("value") * {fanout}, col("value") * {fanout} + {fanout} - 1)).as("n"), col("timestamp").as("ts"))
  .select((col("n") % {keys}).as("key"), col("ts")).as[(Long, java.sql.Timestamp)]
"""

# a count per key in a GroupState; with the timeout, a key idle 3 s is removed when its timeout fires
_FMGWS = """
val timeout = {timeout}
def countRows(key: Long, rows: Iterator[(Long, java.sql.Timestamp)], state: GroupState[Long]): Iterator[(Long, Long)] = {
  if (state.hasTimedOut) { state.remove(); Iterator.empty }
  else {
    val n = state.getOption.getOrElse(0L) + rows.size
    state.update(n)
    if (timeout) state.setTimeoutDuration("3 seconds")
    Iterator((key, n))
  }
}
val out = keyed.groupByKey(_._1).flatMapGroupsWithState(
  OutputMode.Update, if (timeout) GroupStateTimeout.ProcessingTimeTimeout else GroupStateTimeout.NoTimeout)(countRows _)
"""

# a count per key in a ValueState; with the TTL, a value not updated for 3 s expires
_TWS = """
class Counter(ttl: Boolean) extends StatefulProcessor[Long, (Long, java.sql.Timestamp), (Long, Long)] {
  @transient private var count: ValueState[Long] = _
  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    count = getHandle.getValueState[Long]("count", Encoders.scalaLong,
      if (ttl) TTLConfig(java.time.Duration.ofSeconds(3)) else TTLConfig.NONE)
  }
  override def handleInputRows(key: Long, rows: Iterator[(Long, java.sql.Timestamp)], timerValues: TimerValues): Iterator[(Long, Long)] = {
    val n = (if (count.exists()) count.get() else 0L) + rows.size
    count.update(n)
    Iterator((key, n))
  }
}
val out = keyed.groupByKey(_._1).transformWithState(new Counter({ttl}), TimeMode.ProcessingTime(), OutputMode.Update())
"""

# every row of each key kept in its GroupState (a list of times, no timeout): 100 rows whose values grow for ever
_FMGWS_COLLECT = """
def collectRows(key: Long, rows: Iterator[(Long, java.sql.Timestamp)], state: GroupState[Seq[Long]]): Iterator[(Long, Int)] = {
  val all = state.getOption.getOrElse(Seq.empty[Long]) ++ rows.map(_._2.getTime)
  state.update(all)
  Iterator((key, all.size))
}
val out = keyed.groupByKey(_._1).flatMapGroupsWithState(OutputMode.Update, GroupStateTimeout.NoTimeout)(collectRows _)
"""

# every row of each key appended to a ListState (no TTL): one list per key, growing for ever
_TWS_LIST = """
class Collector extends StatefulProcessor[Long, (Long, java.sql.Timestamp), (Long, Long)] {
  @transient private var seen: ListState[Long] = _
  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    seen = getHandle.getListState[Long]("seen", Encoders.scalaLong, TTLConfig.NONE)
  }
  override def handleInputRows(key: Long, rows: Iterator[(Long, java.sql.Timestamp)], timerValues: TimerValues): Iterator[(Long, Long)] = {
    val times = rows.map(_._2.getTime).toArray
    seen.appendList(times)
    Iterator((key, times.length.toLong))
  }
}
val out = keyed.groupByKey(_._1).transformWithState(new Collector(), TimeMode.None(), OutputMode.Update())
"""

# query -> (input, operator)
QUERIES = {
    "fmgws_timeout": (_RATE, _FMGWS.replace("{timeout}", "true")),
    "fmgws_no_timeout": (_RATE, _FMGWS.replace("{timeout}", "false")),
    "tws_scala_ttl": (_RATE, _TWS.replace("{ttl}", "true")),
    "tws_scala_no_ttl": (_RATE, _TWS.replace("{ttl}", "false")),
    "fmgws_collect_fixed_keys": (_FIXED_KEYS, _FMGWS_COLLECT),
    "tws_scala_list_fixed_keys": (_FIXED_KEYS, _TWS_LIST),
    "restore_fmgws": (_FILLING, _FMGWS.replace("{timeout}", "false")),
    "restore_tws_scala": (_FILLING, _TWS.replace("{ttl}", "false")),
}

# start, run for the duration (failing the script if the query dies), write what happened, stop, exit the shell
_RUN = """
val q = out.writeStream.format("noop").outputMode("update").queryName({name}).option("checkpointLocation", {checkpoint})
  .trigger(Trigger.ProcessingTime("1 second")).start()
val deadline = System.nanoTime() + ({seconds}L * 1000000000L)
while (System.nanoTime() < deadline && q.isActive && ({batches} == 0 || q.recentProgress.length < {batches})) Thread.sleep(200)
val ended = System.currentTimeMillis() / 1000.0
val progress = q.recentProgress.map(_.json.replace("\\n", " "))
val facts = s\"\"\"{{"spark_version": "${{spark.version}}", "query_id": "${{q.id}}", "run_id": "${{q.runId}}", "ended": $ended, "active": ${{q.isActive}}}}\"\"\"
java.nio.file.Files.write(java.nio.file.Paths.get({progress_path}), progress.mkString("", "\\n", "\\n").getBytes("UTF-8"))
java.nio.file.Files.write(java.nio.file.Paths.get({facts_path}), facts.getBytes("UTF-8"))
q.stop()
System.exit(if (q.exception.isEmpty) 0 else 3)
"""


def scala_string(text: str) -> str:
    """A Scala string literal of ``text``."""
    return json.dumps(text)  # JSON's escapes are Scala's for these paths and names


def script(query: str, name: str, checkpoint: str, out: str, seconds: int, batches: int, args: argparse.Namespace) -> str:
    """The whole Scala script of one run: ``seconds`` long, or until ``batches`` batches ran (at most ``seconds``)."""
    source, operator = QUERIES[query]
    return (
        _IMPORTS
        + source.format(rows=args.rows_per_second, rows_per_batch=args.rows_per_batch, fanout=args.fanout, keys=args.keys)
        + operator
        + _RUN.format(
            name=scala_string(name),
            checkpoint=scala_string(checkpoint),
            seconds=seconds,
            batches=batches,
            progress_path=scala_string(os.path.join(out, "progress.jsonl")),
            facts_path=scala_string(os.path.join(out, "scala_facts.json")),
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--query", required=True, choices=sorted(QUERIES))
    ap.add_argument("--duration", type=int, help="seconds the query runs")
    ap.add_argument("--batches", type=int, default=0, help="run until this many batches ran (restore queries)")
    ap.add_argument("--batches-timeout", type=int, default=1200, help="seconds --batches may take")
    ap.add_argument("--rows-per-second", type=int, default=50)
    ap.add_argument("--rows-per-batch", type=int, default=600, help="restore queries: rate-micro-batch rows a batch")
    ap.add_argument("--fanout", type=int, default=100, help="restore queries: rows each source row becomes")
    ap.add_argument("--keys", type=int, default=300_000, help="restore queries: distinct keys")
    ap.add_argument("--name", required=True)
    ap.add_argument("--provider", choices=("rocksdb", "hdfs"), default="rocksdb")
    ap.add_argument("--partitions", type=int, default=2, help="spark.sql.shuffle.partitions")
    ap.add_argument("--event-log", action="store_true")
    args = ap.parse_args()

    import pyspark  # the interpreter's PySpark: its spark-shell, its Spark version

    home = os.path.dirname(pyspark.__file__)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    source = os.path.join(out, "query.scala")
    with open(source, "w") as f:
        seconds = args.duration or args.batches_timeout
        f.write(script(args.query, args.name, os.path.abspath(args.checkpoint), out, seconds, args.batches, args))
    conf = {
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.ui.enabled": "false",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB if args.provider == "rocksdb" else HDFS,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "5",
        "spark.sql.streaming.stateStore.maintenanceInterval": "5s",
        "spark.sql.streaming.numRecentProgressUpdates": "100000",  # every progress of the run, not the last 100
    }
    if args.event_log:
        os.makedirs(os.path.join(out, "eventlog"), exist_ok=True)
        conf.update(
            {
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": os.path.join(out, "eventlog"),
                "spark.eventLog.compress": "true",
                "spark.eventLog.compression.codec": "zstd",
            }
        )
    cmd = [os.path.join(home, "bin", "spark-shell"), "--master", "local[2]", "--name", args.name]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    # Spark 4.0's shell (Scala 2.13) ignores -i, which the shells of 3.5 (2.12) and 4.1+ follow (SPARK-52587): 4.0 is
    # given what -i does there, a :paste of the script, on its input, which then ends as -i's closed stdin does
    pastes = pyspark.__version__.startswith("4.0.")
    if not pastes:
        cmd += ["-i", source]
    started = time.time()
    # stdin closed (after the :paste): the shell never waits at its prompt; Spark's log goes to this process's stderr
    done = subprocess.run(
        cmd,
        env=dict(os.environ, SPARK_HOME=home),
        input=f":paste {source}\n".encode() if pastes else None,
        stdin=None if pastes else subprocess.DEVNULL,
        stdout=sys.stderr,
    )
    os.remove(source)  # made from this file's QUERIES: the run's facts name the query
    facts_path = os.path.join(out, "scala_facts.json")
    if done.returncode != 0 or not os.path.exists(facts_path):
        raise SystemExit(f"spark-shell ended with {done.returncode}: the query did not run its time (Spark's log above)")
    with open(facts_path) as f:
        scala = json.load(f)
    os.remove(facts_path)
    with open(os.path.join(out, "progress.jsonl")) as f:
        batches = [json.loads(line) for line in f if line.strip()]
    if args.batches and len(batches) < args.batches:
        raise SystemExit(f"{len(batches)} of {args.batches} batches ran in {seconds} s")
    facts = {
        "spark_version": scala["spark_version"],
        "query_name": args.name,
        "query_id": scala["query_id"],
        "run_id": scala["run_id"],
        "process_started": started,
        "process_ended": scala["ended"],
        "first_batch_id": batches[0]["batchId"] if batches else None,
        "last_batch_id": batches[-1]["batchId"] if batches else None,
        "first_batch_timestamp": batches[0]["timestamp"] if batches else None,
        "batches": len(batches),
        "exception": None,
        "injected_at": None,
        "language": "scala",
        "scala_query": args.query,  # scripts/scala_job.py's QUERIES
    }
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(facts, f, indent=1)
    open(os.path.join(out, "signals.jsonl"), "w").close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
