/*
 * tern doctor: checks of the machine and a model for the write-up's six pitfalls (design.md),
 * each with a verdict, the evidence in numbers and the fix as a command. doctor_checks.c holds
 * the checks, cmd_doctor.c the command, the short measurement and the output.
 */
#ifndef TERN_TOOLS_DOCTOR_H
#define TERN_TOOLS_DOCTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "tools/opencl_icd.h"
#include "tools/sysdesc.h"

typedef enum tern_verdict {
    TERN_VERDICT_SKIP = -1, /* could not be checked here (no model given, ...): not counted */
    TERN_VERDICT_OK = 0,
    TERN_VERDICT_WARN = 1,
    TERN_VERDICT_FAIL = 2,
} tern_verdict;

const char *tern_verdict_name(tern_verdict v);

#define TERN_DOCTOR_MAX_FACTS 10

typedef struct tern_doctor_fact {
    const char *key; /* a JSON key: "float_share", "mem_available_bytes", ... */
    double value;
} tern_doctor_fact;

typedef struct tern_doctor_check {
    const char *name;  /* "model format", "backend", ... */
    int pitfall;       /* design.md's table row, 1..6; 0 for none */
    tern_verdict verdict;
    char evidence[1024]; /* what was found, in numbers */
    char fix[768];      /* a command (several: one per line), or "" when nothing needs fixing */
    /* How much this could slow decode (1 = not at all), for ranking the causes of a slow run. */
    double impact;
    bool explains_gap; /* slows the run below its own roofline (threads, clocks, swap), rather than
                          raising the roofline's bytes or leaving a faster device idle */
    int n_facts;
    tern_doctor_fact facts[TERN_DOCTOR_MAX_FACTS];
} tern_doctor_check;

/* What the user is about to run: the model (may be NULL) and the options as given. */
typedef struct tern_doctor_input {
    const char *model_path;
    tern_model *model; /* loaded, or NULL */
    int64_t n_ctx;     /* 0: the default */
    tern_kv_type type_k, type_v; /* -ctk, -ctv (default F16) */
    int n_threads;     /* 0: auto */
    tern_backend_kind backend;
    const tern_sysdesc *sys;
    const tern_icd_registry *icd; /* the OpenCL ICD registry and vendor libraries, or NULL */
} tern_doctor_input;

enum { TERN_DOCTOR_N_CHECKS = 6 };

/* Runs the six checks in the order of design.md's table into checks[]. */
void tern_doctor_run_checks(const tern_doctor_input *in, tern_doctor_check checks[TERN_DOCTOR_N_CHECKS]);

#endif
