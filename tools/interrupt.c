#include "tools/interrupt.h"

volatile sig_atomic_t tern_cli_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    tern_cli_interrupted = 1;
}

void tern_cli_catch_interrupt(void) {
    struct sigaction sa = {.sa_handler = on_sigint, .sa_flags = SA_RESETHAND | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    tern_cli_interrupted = 0;
    sigaction(SIGINT, &sa, NULL);
}
