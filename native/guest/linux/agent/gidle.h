// The guest's idle and steal time per CPU, for the live probe (gidle.c says what it reports).
#ifndef UNHALT_AGENT_GIDLE_H
#define UNHALT_AGENT_GIDLE_H

#include "../workloads/workloads.h"

/** Forgets every CPU's baseline and takes new ones for the CPUs online now (at `probe on`). */
void gidle_begin(void);

/**
 * One `@u1 gidle ...` line per online CPU: the differences since its baseline, which then
 * moves to now; nothing when the last round (or gidle_begin) was less than 0.9 s ago. A CPU
 * without a baseline (it came online) gets one and no line this time.
 */
void gidle_report(wl_emit_fn emit);

#endif
