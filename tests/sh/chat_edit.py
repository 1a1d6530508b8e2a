#!/usr/bin/env python3
"""tern chat's line editor on a pseudo-terminal: cursor keys, Backspace and history.

Types "/hxelp", three Left arrows, Backspace (drops the x), Enter: the chat must run /help. Then
Up and Enter: /help again from the history. Then Ctrl-D. No raw escape sequence may be echoed.

usage: chat_edit.py TERN MODEL     (prints ok/FAIL lines; exit 1 on a failure)
"""
import os
import pty
import select
import sys
import time

TERN, MODEL = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(TERN, [TERN, "chat", "-m", MODEL, "-t", "1", "-n", "4"])
out = b""


def read_until(pattern, timeout):
    global out
    end = time.time() + timeout
    while out.count(pattern[0]) < pattern[1]:
        left = end - time.time()
        if left <= 0:
            return False
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return False
            if not data:
                return False
            out += data
    return True


failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures += 1
        print("     output: %r" % out[-800:])


HELP = b"forget the conversation"
check(read_until((b"chat ready", 1), 30), "chat starts")
read_until((b"> ", 1), 5)
os.write(fd, b"/hxelp" + b"\x1b[D" * 3 + b"\x7f" + b"\r")
check(read_until((HELP, 1), 10), "Left arrows and Backspace edit the line: /hxelp -> /help")
# keys typed before the editor reads are the cooked terminal's (echoed as ^[[A): wait for the prompt
read_until((b"\r> \x1b[K", 2), 10)
os.write(fd, b"\x1b[A\r")
check(read_until((HELP, 2), 10), "Up recalls the last line")
check(b"^[[" not in out, "no escape sequence is echoed as text")
# Ctrl-D once the third empty prompt is drawn: typed before the editor is reading, a ^D would be
# the cooked terminal's end-of-file, not a key
check(read_until((b"\r> \x1b[K", 3), 10), "the prompt comes back")
os.write(fd, b"\x04")
end = time.time() + 10
status = None
while time.time() < end:
    if select.select([fd], [], [], 0.05)[0]:
        try:
            os.read(fd, 65536)
        except OSError:
            pass
    p, status = os.waitpid(pid, os.WNOHANG)
    if p:
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
check(status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "Ctrl-D quits with 0")
sys.exit(1 if failures else 0)
