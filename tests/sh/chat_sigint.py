#!/usr/bin/env python3
"""reliability.md case 28: Ctrl-C in `tern chat`, typed on a pseudo-terminal as a user would.

Ctrl-C during prompt processing and during generation stops the answer and returns to the
prompt; a second Ctrl-C, Ctrl-C at the prompt and Ctrl-D each end the program with status 0.
The terminal turns the typed ^C into SIGINT for the process, exactly as at a keyboard.

usage: chat_sigint.py TERN MODEL     (prints one ok/FAIL line per check; exit 1 on a failure)
"""
import os
import re
import pty
import select
import signal
import sys
import termios
import time

TERN, MODEL = sys.argv[1], sys.argv[2]
CTRL_C, CTRL_D = b"\x03", b"\x04"
failures = 0


def check(ok, what, detail=b""):
    global failures
    if ok:
        print("ok   " + what)
    else:
        failures += 1
        print("FAIL " + what)
        if detail:
            print("     output: %r" % detail[-600:])


class Chat:
    """tern chat on a pty; everything it prints (stdout and stderr) is read from the master."""

    def __init__(self, *extra, canonical=True):
        argv = [TERN, "chat", "-m", MODEL, "-t", "1", "--temp", "0.8", "--seed", "1", "-n", "-1"]
        argv += list(extra)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            if not canonical:
                # Lines longer than the 4 KiB a canonical-mode terminal holds; ^C still signals.
                attrs = termios.tcgetattr(0)
                attrs[3] &= ~(termios.ICANON | termios.ECHO)
                attrs[6][termios.VMIN], attrs[6][termios.VTIME] = 1, 0
                termios.tcsetattr(0, termios.TCSANOW, attrs)
            os.execv(TERN, argv)
        self.out = b""

    def read_until(self, pattern, timeout):
        """Reads until pattern appears after the current mark; returns whether it did."""
        end = time.time() + timeout
        while pattern not in self.out[self.mark:]:
            left = end - time.time()
            if left <= 0:
                return False
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return False
                if not data:
                    return False
                self.out += data
        return True

    def set_mark(self):
        self.mark = len(self.out)

    mark = 0

    def type(self, data):
        os.write(self.fd, data)

    def wait(self, timeout):
        """Exit status, or None if it is still running after timeout (then it is killed)."""
        end = time.time() + timeout
        while time.time() < end:
            self.read_until(b"\x00never", 0.05)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return status
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return None


def exited_zero(status):
    return status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def describe(status):
    if status is None:
        return "still running (hang)"
    if os.WIFSIGNALED(status):
        return "killed by signal %d" % os.WTERMSIG(status)
    return "exit %d" % os.WEXITSTATUS(status)


def ask_long_answer(c, text):
    """Types a message and waits until its answer has streamed for a second. A random model can
    still end its answer early (a sampled end-of-turn or the plain format's "User:" stop), which
    would leave the Ctrl-C at the prompt: then the next message is typed, up to three times."""
    for attempt in range(3):
        c.read_until(b"> ", 5)
        c.set_mark()
        c.type(text)
        # the line's end: the terminal's echo, or the line editor's redraws (carriage returns only)
        # and then its newline
        c.read_until(b"\r\n", 5)
        c.set_mark()
        time.sleep(1.0)  # -n -1: the answer would run to the end of the context (seconds)
        c.read_until(b"\x00never", 0.05)
        if b"\n\r> " not in c.out[c.mark:]:  # the prompt again (generated text has no bare \r)
            return True
    return False


# 1. Ctrl-C during generation: back at the prompt; the chat goes on; Ctrl-D quits with 0.
c = Chat()
check(c.read_until(b"chat ready", 30), "chat starts", c.out)
check(ask_long_answer(c, b"Tell me a long story about a fox\n"), "an answer is streaming", c.out)
c.set_mark()
c.type(CTRL_C)
check(c.read_until(b"(stopped)", 10), "Ctrl-C during generation stops the answer", c.out)
check(c.read_until(b"> ", 5), "... and returns to the prompt", c.out)
c.set_mark()
c.type(b"/stats\n")
check(c.read_until(b"context", 10), "the chat goes on after the stop", c.out)
c.read_until(b"> ", 5)
c.type(CTRL_D)
st = c.wait(10)
check(exited_zero(st), "Ctrl-D at the prompt exits with 0 (%s)" % describe(st), c.out)

# 2. Ctrl-C during prompt processing: a line of ~3000 tokens fed one token per batch takes
#    seconds even on a fast machine; the stop comes between batches.
c = Chat("-b", "1", canonical=False)
check(c.read_until(b"chat ready", 30), "chat starts (batch 1, a long line)", c.out)
c.read_until(b"> ", 5)
long_line = b" ".join([b"the quick brown fox jumps over the lazy dog"] * 300)
c.type(long_line + b"\n")
c.set_mark()
time.sleep(0.3)
t0 = time.time()
c.type(CTRL_C)
stopped = c.read_until(b"(stopped)", 20)
check(stopped, "Ctrl-C during prompt processing stops it (%.1f s)" % (time.time() - t0), c.out)
check(c.read_until(b"> ", 5), "... and returns to the prompt", c.out)
# /stats: "last answer: P prompt tokens ... context N of C used": stopped inside the prompt, N < P.
c.set_mark()
c.type(b"/stats\n")
c.read_until(b" used", 10)
m = re.search(rb"last answer: (\d+) prompt tokens.*context (\d+) of", c.out[c.mark:])
check(m is not None and int(m.group(2)) < int(m.group(1)),
      "... before the whole prompt was evaluated (%s)" % (repr(m.groups()) if m else "no /stats"), c.out)
c.set_mark()  # the editor's redraws of "> /stats" came before: wait for the next prompt
c.read_until(b"> ", 5)
# 3. Ctrl-C at the prompt exits with 0.
c.set_mark()
c.type(CTRL_C)
st = c.wait(10)
check(exited_zero(st), "Ctrl-C at the prompt exits with 0 (%s)" % describe(st), c.out)

# 4. Two Ctrl-C during generation: the second one exits with 0.
c = Chat()
check(c.read_until(b"chat ready", 30), "chat starts (twice)", c.out)
check(ask_long_answer(c, b"Tell me a long story\n"), "an answer is streaming (twice)", c.out)
c.type(CTRL_C)
time.sleep(0.05)
c.type(CTRL_C)
st = c.wait(15)
check(exited_zero(st), "a second Ctrl-C exits with 0 (%s)" % describe(st), c.out)
check(b"Traceback" not in c.out and b"Sanitizer" not in c.out, "no sanitizer report", c.out)

sys.exit(1 if failures else 0)
