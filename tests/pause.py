# SPDX-License-Identifier: BSD-3-Clause
# pause.py: the test side of the filter's pause points
# (filter/testpause.h), for tests that hold a thread of nbdkit at one
# exact step of a race.  Nothing sleeps: every wait is for an event
# (bounded, so that a test fails rather than hangs).
#
# The shell makes the FIFOs and names the points before nbdkit starts:
#
#   mkfifo freeze.reached freeze.release
#   export DIRTYBITMAP_TEST_PAUSE=freeze DIRTYBITMAP_TEST_PAUSE_DIR="$PWD"
#
# then, in Python:
#
#   p = Points(DIR, ["freeze"])     # before anything can reach them
#   job = Background(fn)            # fn() in a thread
#   got = p.wait(["freeze", job])   # the first that came: names, jobs
#   p.release("freeze")
#   job.join()                      # fn's value, or raises what it did
import os
import select
import sys
import threading

TIMEOUT = 60


def fail(msg):
    sys.exit("%s: %s" % (sys.argv[0].rsplit("/", 1)[-1], msg))


class Background:
    """fn() run in a thread; its pipe is readable once it has ended."""

    def __init__(self, fn):
        self.rfd, self.wfd = os.pipe()
        self.value = self.error = None
        self.t = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.t.start()

    def _run(self, fn):
        try:
            self.value = fn()
        except BaseException as e:      # handed to join()
            self.error = e
        os.close(self.wfd)

    def join(self, timeout=TIMEOUT):
        self.t.join(timeout)
        if self.t.is_alive():
            fail("a background job did not end in %d s" % timeout)
        if self.error is not None:
            raise self.error
        return self.value


class Points:
    """The pause points names, in directory d."""

    def __init__(self, d, names):
        self.d = d
        # Open for reading now, without waiting for a writer: the
        # filter's thread then opens its end without waiting, and its
        # close shows here as POLLHUP (once a writer has come and gone).
        self.fds = {n: os.open("%s/%s.reached" % (d, n),
                               os.O_RDONLY | os.O_NONBLOCK) for n in names}

    def wait(self, what, timeout=TIMEOUT):
        """Wait until a point named in what is reached, or a Background
        job in what has ended; returns all of them that have."""
        p = select.poll()
        fds = {}
        for w in what:
            fd = self.fds[w] if isinstance(w, str) else w.rfd
            fds[fd] = w
            p.register(fd, select.POLLIN)
        ready = p.poll(timeout * 1000)
        if not ready:
            fail("none of %r came in %d s" %
                 ([w if isinstance(w, str) else "job" for w in what], timeout))
        return [fds[fd] for fd, _ in ready]

    def release(self, name, timeout=TIMEOUT):
        """Let the thread held at point name go on."""
        path = "%s/%s.release" % (self.d, name)
        # Opening waits for the filter's end (it opens it as soon as it
        # has said it is there); closing is its end of file.
        t = threading.Thread(target=lambda: os.close(os.open(path,
                                                             os.O_WRONLY)),
                             daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            fail("pause point %s: nothing to release in %d s" %
                 (name, timeout))
