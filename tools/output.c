#include "tools/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"

/* Whether a write to stdout failed, the first errno seen with it (0: stdio knew no reason, as when
 * a command's own fflush failed unchecked and a later flush found nothing left to write), and
 * whether stdout was closed when tern started. */
static bool failed;
static int first_errno;
static bool stdout_was_closed;

void tern_out_guard_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        /* open() takes the lowest free descriptor, which is fd, as the lower ones are open by now */
        const int got = open("/dev/null", O_RDONLY);
        if (got >= 0 && got != fd) {
            dup2(got, fd);
            close(got);
        }
        if (fd == 1)
            stdout_was_closed = true;
    }
}

static void note_failure(void) {
    if (!failed)
        first_errno = errno;
    failed = true;
}

bool tern_out_write(const char *s, size_t len) {
    if (!tern_out_ok())
        return false;
    errno = 0;
    if (fwrite(s, 1, len, stdout) != len || fflush(stdout) != 0) {
        note_failure();
        return false;
    }
    return true;
}

bool tern_out_ok(void) {
    return !failed && !ferror(stdout);
}

int tern_out_finish(const char *cmd, int status) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        note_failure();
    errno = 0;
    if (fclose(stdout) != 0)
        note_failure();
    if (!failed || status != TERN_EXIT_OK)
        return status;
    fprintf(stderr, "tern%s%s: cannot write to stdout: %s\n", cmd ? " " : "", cmd ? cmd : "",
            stdout_was_closed ? "it is closed" : first_errno ? strerror(first_errno) : "a write failed");
    return TERN_EXIT_FAIL;
}
