# Sourced by tests/run.sh and tests/support/checks.sh.
# lsan_tracer_failed FILE: the output in FILE says the sanitizer runtime's own tracer could not
# stop the threads at exit ("LeakSanitizer has encountered a fatal error", an intermittent fault
# of the runtime: google/sanitizers issue 1353; seen after tests passed and after PoCL builds)
# and reports no leak. Such a run says nothing about tern: the callers run it once more. A leak
# report ("detected memory leaks") or any other failure counts at once.
lsan_tracer_failed() {
    grep -q "LeakSanitizer has encountered a fatal error" "$1" && ! grep -q "detected memory leaks" "$1"
}
