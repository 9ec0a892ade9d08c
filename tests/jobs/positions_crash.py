"""The reference job's position steps (jobs/reference/), crashing on purpose: each of the first $CRASH_RUNS runs (default 1; counted in the file $CRASH_COUNT, required) answers $CRASH_AFTER - 1 records (default 3), writes the detect lines of the next one but not the line that ends it, flushes and exits 1; later runs answer everything. Json framing, position steps only (jobs/README.md, "Positions")."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "jobs", "reference"))

import mfstream_job  # noqa: E402


def crashes():
    """Whether this run crashes: one of the first CRASH_RUNS."""
    path = os.environ["CRASH_COUNT"]
    try:
        with open(path) as f:
            runs = int(f.read() or "0")
    except FileNotFoundError:
        runs = 0
    with open(path, "w") as f:
        f.write(str(runs + 1))
    return runs < int(os.environ.get("CRASH_RUNS", "1"))


def main(args):
    out = sys.stdout.buffer
    step = mfstream_job.position_step(args, os.environ.get("MFSTREAM_FRAMING", "value"))
    crash_at = int(os.environ.get("CRASH_AFTER", "3")) if crashes() else None
    for number, line in mfstream_job.lines(out):
        answer = mfstream_job.answer_position(step, line)
        if number == crash_at:
            # Its detections, not its end: the job dies in the middle of it.
            out.write("".join(answer.splitlines(keepends=True)[:-1]).encode())
            out.flush()
            return 1
        out.write(answer.encode())
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
