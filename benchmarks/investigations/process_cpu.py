"""Where a job's CPU goes, process by process: a command's whole process tree sampled while it runs.

A job started as ``python jobs/X.py`` is a client Python process, the JVM it starts (the local
mini-cluster, with the replicas' Python inside it when ``python_in="jvm"``) and any Python worker
processes Flink starts; a shell's ``time`` sees only the client, since the JVM is killed rather
than waited for. This samples every process of the tree every 0.2 s and prints each one's CPU
(user + system) and lifetime (a process that lives less than 0.2 s may be missed, and none is
sampled after the command itself ends); ``--timeline`` also prints the tree's CPU every second::

    python -m benchmarks.investigations.process_cpu -- python jobs/quickstart.py --replicas 2 --batches 60
    python -m benchmarks.investigations.process_cpu --timeline -- python jobs/quickstart.py --replicas 2 --batches 60

A one-off (issue 27's CI cost): its answer is in docs/measurements.md, "2026-12-07 (evening): where CI's time goes".
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Dict


def sample_tree(root, since: float, seen: Dict[int, dict]) -> None:
    """Adds the CPU and the time seen of ``root`` and each of its descendants to ``seen``."""
    import psutil

    try:
        processes = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for process in processes:
        try:
            times, command = process.cpu_times(), " ".join(process.cmdline())
        except psutil.Error:  # ended between the listing and the reading
            continue
        record = seen.setdefault(process.pid, {"command": command, "first_s": time.time() - since})
        record.update(cpu_s=times.user + times.system, last_s=time.time() - since)
        if len(command) > len(record["command"]):
            record["command"] = command


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeline", action="store_true", help="print the tree's CPU every second as it runs")
    parser.add_argument("--log", default="process_cpu.log", help="the command's output (default: process_cpu.log)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    import psutil

    since, seen, printed = time.time(), {}, 0.0
    with open(args.log, "w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        root = psutil.Process(child.pid)
        while child.poll() is None:
            sample_tree(root, since, seen)
            if args.timeline and time.time() - since >= printed + 1:
                printed = time.time() - since
                alive = ", ".join(f"{r['command'].split()[0].rsplit('/', 1)[-1]} {r['cpu_s']:.1f}"
                                  for r in seen.values() if r["last_s"] >= printed - 0.5)
                print(f"[{printed:5.1f} s] CPU s so far: {alive}", flush=True)
            time.sleep(0.2)
    wall = time.time() - since
    print(f"{'seen from-to s':>16}  {'CPU s':>6}  command")
    for record in sorted(seen.values(), key=lambda r: r["first_s"]):
        if record["cpu_s"] >= 0.3:
            print(f"{record['first_s']:7.1f}-{record['last_s']:6.1f}  {record['cpu_s']:6.1f}  {record['command'][:100]}")
    total = sum(r["cpu_s"] for r in seen.values())
    print(f"wall {wall:.1f} s, CPU {total:.1f} s in all (each process as last sampled: up to 0.2 s of it missed); "
          f"exit code {child.returncode}, output in {args.log}")
    return child.returncode if child.returncode >= 0 else 128 - child.returncode  # a signal's number, as a shell says


if __name__ == "__main__":
    sys.exit(main())
