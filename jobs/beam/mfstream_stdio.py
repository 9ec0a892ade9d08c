"""The job's stdin and stdout, shared by the pipeline's steps.

The steps of the Beam pipeline are pickled and run by the runner's worker;
in the FnApiRunner that worker is in this process, so a module imported by
name (not __main__) is the same object for every step: the reader flushes
the writer's buffer before each read of stdin, as the protocol asks.
"""

import os
import shutil
import signal
import sys
import tempfile

CHUNK = 64 * 1024
MAX_LINE = 1024 * 1024

# Results go to a private copy of fd 1; fd 1 itself is pointed at stderr, so
# that nothing the runtime prints (banners, warnings) can reach the results.
_results_fd = None
_buffer = bytearray()


_tmp = None


def private_tmp():
    """Points the runtime's temporary files (Beam makes a `beam-pipeline-temp*`
    folder per pipeline) at a folder of this run's own, removed at every exit
    this process controls: the end, a failure, SIGTERM."""
    global _tmp
    _tmp = tempfile.mkdtemp(prefix="mfstream-beam-")
    tempfile.tempdir = _tmp
    os.environ["TMPDIR"] = _tmp
    signal.signal(signal.SIGTERM, lambda *_: exit_now(143))


def exit_now(status):
    sys.stderr.flush()
    if _tmp:
        shutil.rmtree(_tmp, ignore_errors=True)
    os._exit(status)


def claim_stdout():
    global _results_fd
    _results_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def write(text):
    _buffer.extend(text.encode())
    if len(_buffer) >= CHUNK:
        flush()


def flush():
    view = memoryview(_buffer)
    done = 0
    try:
        while done < len(view):
            done += os.write(_results_fd, view[done:])
    except BrokenPipeError:
        exit_now(0)  # the host stopped reading: nobody wants the answers
    finally:
        view.release()
    del _buffer[:]


def fail(status, message):
    """Delivers the answers so far, says why on stderr, and ends the job.

    Inside a pipeline an exception would be wrapped, maybe retried, by the
    runner; the protocol wants the message and the status, nothing more."""
    flush()
    sys.stderr.write(f"beam-job: {message}\n")
    sys.stderr.flush()
    exit_now(status)


def lines():
    """Yields (number, bytes) for stdin's lines; flushes the results before
    every read, since any read may block."""
    number, pending = 0, b""
    while True:
        flush()
        chunk = os.read(0, CHUNK)
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            number += 1
            yield number, line
        if len(pending) >= MAX_LINE:
            fail(2, f"line {number + 1}: no end of line within {MAX_LINE} bytes")
    if pending:
        yield number + 1, pending
