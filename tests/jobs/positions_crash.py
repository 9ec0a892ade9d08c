"""The reference job's position steps (jobs/reference/), crashing on purpose: $CRASH_AFTER is a comma-separated list (default "3"); its i-th run (counted in the file $CRASH_COUNT, required) answers the list's i-th number less one records, writes the detect lines of the next one but not the line that ends it, flushes and exits 1; runs past the list answer everything. Json framing, position steps only (jobs/README.md, "Positions")."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "jobs", "reference"))

import mfstream_job  # noqa: E402


def crash_at():
    """The line this run crashes at, if it does: CRASH_AFTER's entry for it."""
    path = os.environ["CRASH_COUNT"]
    try:
        with open(path) as f:
            runs = int(f.read() or "0")
    except FileNotFoundError:
        runs = 0
    with open(path, "w") as f:
        f.write(str(runs + 1))
    after = [int(n) for n in os.environ.get("CRASH_AFTER", "3").split(",")]
    return after[runs] if runs < len(after) else None


def main(args):
    out = sys.stdout.buffer
    step = mfstream_job.position_step(args, os.environ.get("MFSTREAM_FRAMING", "value"))
    crash = crash_at()
    for number, line in mfstream_job.lines(out):
        answer = mfstream_job.answer_position(step, line)
        if number == crash:
            # Its detections, not its end: the job dies in the middle of it.
            out.write("".join(answer.splitlines(keepends=True)[:-1]).encode())
            out.flush()
            return 1
        out.write(answer.encode())
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
