// The workloads disk's tools as agent workloads (tools.c says which and what they report).
#ifndef UNHALT_AGENT_TOOLS_H
#define UNHALT_AGENT_TOOLS_H

#include "../workloads/workloads.h"

/** The `@u1 done workload=ID` ids of the tools (after workloads.h's WL_ID_*). */
enum { TOOL_ID_PERF_PIPE = 10, TOOL_ID_PERF_MESSAGING = 11, TOOL_ID_CYCLICTEST = 12, TOOL_ID_IPERF3_TCP = 13, TOOL_ID_STRESS_SWITCH = 14,
       TOOL_ID_SOCKPERF_RR = 15 };

/**
 * Runs tool workload `name` when it is one (then returns 1, after its result or error line and
 * its `done` line); returns 0 for any other name.
 */
int tool_run(const char *name, int argc, char *const *argv, wl_emit_fn emit);

#endif
