"""The inspector's report as text for a terminal."""

from __future__ import annotations

from spark_state_observer.offline.checkpoint.footprint import render_footprints
from spark_state_observer.offline.checkpoint.report import CheckpointReport


def printable(text: str) -> str:
    """``text`` that any terminal encoding takes: file names read from disk may hold undecodable bytes
    (``os.listdir`` keeps them as lone surrogates), which ``print`` would raise on."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def render_text(report: CheckpointReport) -> str:
    """The report for a terminal."""
    lines = [
        f"checkpoint {report.path}",
        f"  query id: {report.query_id}",
        f"  last planned batch: {report.last_planned_batch}, last committed: {report.last_committed_batch}"
        + (f", batch {report.uncommitted_batch} planned but not committed" if report.uncommitted_batch is not None else ""),
        f"  provider: {report.provider}, shuffle partitions: {report.shuffle_partitions}",
    ]
    for source in report.sources:
        lines.append(f"  source offset: {source[:120]}")
    for op in report.operators:
        lines.append(f"  operator {op.operator_id} {op.name or '?'} stores={','.join(op.stores) or '?'} partitions={op.num_partitions}")
        for p in op.partitions:
            w = p.restore
            restore = (
                f"restore: snapshot v{w.snapshot_version} ({w.snapshot_bytes} B) + {w.replay_files} files ({w.replay_bytes} B)"
                if w
                else "restore: -"
            )
            lines.append(
                f"    p{p.partition}/{p.store} {p.provider}: {len(p.files)} files, newest snapshot v{p.newest_snapshot}, "
                f"latest v{p.latest_version}, {p.sst_files} SSTs ({p.sst_bytes} B); {restore}"
            )
    e = report.estimate
    if e:
        lines.append(
            f"  restore estimate: {e.seconds:.2f} s over {e.stores} stores ({e.files} files, {e.bytes} B; rates from {e.basis}); "
            f"slowest {e.slowest_partition}" + (f", skew {e.skew:.1f}x" if e.skew else "")
        )
    lines += render_footprints(report.footprint)
    c = report.checksums
    if c is not None:
        lines.append(
            f"  checksums: {c.checked} verified, {len(c.mismatches)} mismatched, {c.unreadable_count} could not be verified"
            + (" (stopped: too many checksum files)" if c.truncated else "")
        )
        lines += [f"  checksum mismatch: {m}" for m in c.mismatches]
        lines += [f"  checksum unreadable: {m}" for m in c.unreadable]
    for problem in report.problems:
        lines.append(f"  problem: {problem}")
    return printable("\n".join(lines))
