/*
 * tern_internal.h — what the tern command (tools/) uses of the library beyond tern.h, declared in
 * one place (style rule 22). Not installed: a program outside this repository has tern.h only.
 *
 * tools/ includes nothing else of the library (tests/sh/layers.py checks it). Each header below
 * says which commands need it; a line that many commands need is an interface tern.h lacks, and a
 * new internal need is added here, where a reviewer sees it.
 */
#ifndef TERN_INTERNAL_H
#define TERN_INTERNAL_H

#include "tern.h"

/* Status messages (tern_error_set), the log callback type and the clock and median every
 * measurement uses: bench, kbench, chat's timings, perplexity, quantize's progress. */
#include "base/error.h"
#include "base/timing.h"

/* Reading and writing GGUF files directly: info's tensor table, quantize and mkmodel. */
#include "gguf/gguf.h"

/* Block formats and the quantizers: quantize, mkmodel, kbench's inputs, bench's ladder of model
 * types, doctor's weight-format check. */
#include "quant/fp16.h"
#include "quant/quant.h"

/* The CPU kernel table and its features (kbench times kernels one by one; info and the bench
 * record name the ISA), and the OpenCL device list and kernel profile (info, doctor, kbench, bench). */
#include "kernels/kernels.h"
#include "kernels/opencl/opencl.h"

/* The machine: the thread pool (kbench, quantize, mkmodel), its description (sysinfo: the bench
 * record, doctor), heat and power during a run (telemetry: bench) and the read bandwidth the
 * roofline is drawn from (bench, kbench, doctor). */
#include "platform/roofline.h"
#include "platform/sysinfo.h"
#include "platform/telemetry.h"
#include "platform/threadpool.h"

/* Chat's conversation history (chat edits and replays turns). */
#include "text/chat_history.h"

/* The model's internals: the bytes a decode step reads (bench, doctor), the weight mix (doctor)
 * and a backend made alone to list a device (info). */
#include "engine/backend.h"
#include "engine/forward.h"
#include "engine/model.h"

#endif
