"""The command line: ``python -m pyflink_tensair.cluster COMMAND --dir FOLDER``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from ..errors import TensairError
from .configuration import DEFAULT_DIR
from .lifecycle import add_taskmanager, kill_taskmanager, recorded_pids, start, stop, submit
from .rest import savepoint, stop_with_savepoint
from . import __doc__ as _PACKAGE_DOC


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run_command(args)
    except TensairError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (``tests/test_docs.py`` checks the documented commands with it)."""
    parser = argparse.ArgumentParser(prog="python -m pyflink_tensair.cluster", description=(_PACKAGE_DOC or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start a JobManager and TaskManagers")
    p_start.add_argument("--taskmanagers", type=_int_in("taskmanagers", 1), default=2)
    p_start.add_argument("--slots", type=_int_in("slots", 1), default=2, help="slots per TaskManager")
    p_start.add_argument("--rest-port", type=_int_in("rest_port", 1, 65535), default=18081)
    p_start.add_argument("--rpc-port", type=_int_in("rpc_port", 1, 65535 - 60), default=16123,
                         help="the JobManager's; the TaskManagers and the blob server take ports up to 60 above it")
    p_start.add_argument("--metrics-fetcher-interval-ms", type=_int_in("metrics_fetcher_interval_ms", 0), default=1000,
                         help="how often, at most, the REST API asks the TaskManagers for metrics (0: on every query)")
    p_stop = sub.add_parser("stop", help="stop the processes recorded in the PID files")
    p_kill = sub.add_parser("kill-taskmanager", help="SIGKILL a TaskManager and its Python workers (a crash)")
    p_kill.add_argument("--pid", type=_int_in("pid", 1), help="which TaskManager (default: the first one alive)")
    p_add = sub.add_parser("add-taskmanager", help="start one more TaskManager")
    p_submit = sub.add_parser("submit", help="flink run -py SCRIPT [ARGS...] on this cluster")
    p_submit.add_argument("--detached", action="store_true")
    p_submit.add_argument("script_args", nargs=argparse.REMAINDER)
    p_save = sub.add_parser("savepoint", help="take a savepoint of the running job (it keeps running)")
    p_halt = sub.add_parser("stop-with-savepoint", help="stop the running job with a savepoint, without draining")
    for p in (p_save, p_halt):
        p.add_argument("--job", help="the job's id (default: the one running)")
        p.add_argument("--target", default="savepoints", help="the folder savepoints go to (default: ./savepoints)")
    p_resume = sub.add_parser("resume", help="flink run -py SCRIPT [ARGS...] from a savepoint")
    p_resume.add_argument("--savepoint", required=True, help="the path savepoint/stop-with-savepoint printed")
    p_resume.add_argument("--detached", action="store_true")
    p_resume.add_argument("script_args", nargs=argparse.REMAINDER)
    for p in (p_start, p_stop, p_submit, p_kill, p_add, p_save, p_halt, p_resume):
        p.add_argument("--dir", default=DEFAULT_DIR, help=f"the cluster's folder (default: {DEFAULT_DIR})")
    return parser


def _int_in(name: str, minimum: int, maximum: Optional[int] = None):
    """An argparse ``type``: an int in ``minimum .. maximum``; argparse answers anything else with
    the usage, the rule and exit status 2.

        >>> _int_in("rest_port", 1, 65535)("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: rest_port must be an int in 1 .. 65535. Received: rest_port=0
    """

    def parse(text: str) -> int:
        value = int(text)  # a ValueError: argparse's "invalid int value"
        if value < minimum or (maximum is not None and value > maximum):
            rule = f"an int in {minimum} .. {maximum}" if maximum is not None else f"an int >= {minimum}"
            raise argparse.ArgumentTypeError(f"{name} must be {rule}. Received: {name}={value}")
        return value

    parse.__name__ = "int"
    return parse


def _run_command(args) -> int:
    if args.command == "start":
        url = start(args.dir, taskmanagers=args.taskmanagers, slots=args.slots, rest_port=args.rest_port,
                    rpc_port=args.rpc_port, metrics_fetcher_interval_ms=args.metrics_fetcher_interval_ms)
        print(f"cluster up: {url} (PIDs {recorded_pids(os.path.abspath(args.dir))})")
    elif args.command == "stop":
        print(f"stopped PIDs {stop(args.dir)}")
    elif args.command == "kill-taskmanager":
        print(f"killed PIDs {kill_taskmanager(args.dir, args.pid)}")
    elif args.command == "add-taskmanager":
        print(f"TaskManager up: PID {add_taskmanager(args.dir)}")
    elif args.command in ("savepoint", "stop-with-savepoint"):
        take = savepoint if args.command == "savepoint" else stop_with_savepoint
        print(take(args.dir, args.target, job_id=args.job))
    else:
        script_args = [a for a in args.script_args if a != "--"]
        result = submit(args.dir, script_args, detached=args.detached, savepoint=getattr(args, "savepoint", None))
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        return result.returncode
    return 0
