"""What a person watches while a job runs: its result files followed as they grow, one progress
line every few seconds, the probes' reports and, with ``--logdir``, TensorBoard.

Example::

    >>> from pyflink_tensair.core.events import Metrics
    >>> record = Metrics(replica=0, phase="batch", time=1.0, local_step=5, model_version=5, loss=0.25, accuracy=0.9,
    ...                  staleness=1, batches_per_s=2.0, held_batches=0, messages_sent=5, batch_id=4)
    >>> progress_line([record], total=10, elapsed=3.0)
    '[    3.0s] batches 5/10 | loss 0.2500 | acc 0.900 | 2.0 batches/s | staleness 1 | msgs 5'
"""

from __future__ import annotations

import glob
import json
import os
from typing import Dict, List, Optional

from ..core.events import Metrics
from ..core.prequential import sliding_mean
from ..core.summary import last_value, latest_per_replica


class LinesFollower:
    """Reads ``<prefix>-*.jsonl`` files in a folder as the job appends to them.

    A restore may cut a file back to its length at the checkpoint and write on from there
    (``write_json_lines``, exactly once): a follower that finds the last line it read changed, or
    the file shorter, reads on from the last line it read that is still there. The records read
    beyond the cut stay in :attr:`records`; the replay's come again."""

    def __init__(self, folder: str, prefix: str, parse=json.loads):
        self._folder = folder
        self._prefix = prefix
        self._parse = parse
        self._read: Dict[str, List] = {}  # per file: (end offset, hash) of each line read
        self.records: List = []

    @staticmethod
    def _still_there(f, lines: List) -> int:
        """How many of the lines read are still the file's first lines."""
        f.seek(0)
        kept, start = 0, 0
        for end, digest in lines:
            if hash(f.read(end - start)) != digest:
                break
            kept, start = kept + 1, end
        return kept

    def poll(self) -> List:
        """The records appended since the last call (also kept in :attr:`records`)."""
        new = []
        for path in sorted(glob.glob(os.path.join(self._folder, f"{self._prefix}-*.jsonl"))):
            lines = self._read.setdefault(path, [])
            with open(path, "rb") as f:
                offset = lines[-1][0] if lines else 0
                if lines:
                    last_start = lines[-2][0] if len(lines) > 1 else 0
                    f.seek(last_start)
                    if os.fstat(f.fileno()).st_size < offset or hash(f.read(offset - last_start)) != lines[-1][1]:
                        del lines[self._still_there(f, lines):]  # cut back at a restore
                        offset = lines[-1][0] if lines else 0
                f.seek(offset)
                chunk = f.read()
            complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written waits for next time
            for line in complete.splitlines(keepends=True):
                offset += len(line)
                lines.append((offset, hash(line)))
                if line.strip():
                    new.append(self._parse(line.decode("utf-8")))
        self.records.extend(new)
        return new


def progress_line(records: List[Metrics], total: Optional[int], elapsed: float, window: int = 50) -> str:
    """One line: batches done, prequential loss and accuracy over the last ``window`` batches,
    batches per second of all replicas, the largest current staleness, messages sent."""
    latest = latest_per_replica(records)
    if not latest:
        return f"[{elapsed:7.1f}s] waiting for the first trained batch ..."
    done = sum(m.local_step for m in latest.values())
    batch_records = [m for m in records if m.phase == "batch"]
    parts = [f"[{elapsed:7.1f}s] batches {done}/{total if total else '?'}"]
    loss = last_value(sliding_mean(batch_records, "loss", window=window))
    if loss is not None:
        parts.append(f"loss {loss:.4f}")
    accuracy = last_value(sliding_mean(batch_records, "accuracy", window=window))
    if accuracy is not None:
        parts.append(f"acc {accuracy:.3f}")
    parts.append(f"{sum(m.batches_per_s for m in latest.values()):.1f} batches/s")
    parts.append(f"staleness {max(m.staleness for m in latest.values())}")
    delays = [m.delay_s for m in latest.values() if m.delay_s is not None]
    if delays:
        parts.append(f"delay {max(delays):.2f}s")
    parts.append(f"msgs {sum(m.messages_sent for m in latest.values())}")
    return " | ".join(parts)


def show_probe(record: dict) -> str:
    """The default line for a probe's report."""
    body = record.get("error") or json.dumps(record.get("result"), default=float)
    return f"probe ({record['phase']}, replica {record['replica']} at step {record['local_step']}): {body}"


class Progress:
    """Follows a running job's metrics and probes under ``outdir``: prints probe reports as they
    come, writes TensorBoard scalars (with ``logdir``), and makes the progress line."""

    def __init__(self, outdir: str, *, total: Optional[int], window: int, logdir: Optional[str] = None,
                 show_probe=show_probe, score_prefixes=()):
        self.metrics = LinesFollower(outdir, "metrics", Metrics.from_json)
        self.probes = LinesFollower(outdir, "probes")
        self.scores = [LinesFollower(outdir, prefix) for prefix in score_prefixes]  # score()'s window reports
        self._total, self._window, self._show_probe = total, window, show_probe
        self._tensorboard = None
        if logdir:
            from .tensorboard import TensorBoardLog

            self._tensorboard = TensorBoardLog(logdir)

    def poll(self) -> None:
        new = self.metrics.poll()
        for record in self.probes.poll():
            print(self._show_probe(record), flush=True)
        for follower in self.scores:
            reports = follower.poll()
            if self._tensorboard is not None and reports:
                self._tensorboard.add_score_windows(reports)
        if self._tensorboard is not None and new:
            self._tensorboard.add(new)
            batch_records = [m for m in self.metrics.records if m.phase == "batch"]
            self._tensorboard.add_job_scalars(
                len(batch_records),
                window_accuracy=last_value(sliding_mean(batch_records, "accuracy", window=self._window)),
                window_loss=last_value(sliding_mean(batch_records, "loss", window=self._window)))

    def line(self, elapsed: float) -> str:
        text = progress_line(self.metrics.records, self._total, elapsed, self._window)
        for follower in self.scores:
            if follower.records and follower.records[-1].get("accuracy") is not None:
                last = follower.records[-1]
                text += f" | {last['name']} accuracy {last['accuracy']:.3f} ({last['scored']} scored)"
        return text

    def close(self) -> None:
        if self._tensorboard is not None:
            self._tensorboard.close()
