// The user's own guest command over the agent (exec.c says what it answers).
#ifndef UNHALT_AGENT_EXEC_H
#define UNHALT_AGENT_EXEC_H

#include "../workloads/workloads.h"

/** `exec hex=ARGV [timeout_ms=N]`: runs the vector, sends its output and its status. */
void exec_command(int argc, char **argv, wl_emit_fn emit);

#endif
