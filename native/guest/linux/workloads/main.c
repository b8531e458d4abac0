// unhalt-workload: the Linux workloads as a command (the host's bare-metal reference, and
// /bin/unhalt-workload in the guest's initramfs for the console):
//
//   unhalt-workload pipe [loops=N]
//   unhalt-workload messaging [groups=N] [fds=N] [loops=N]
//   unhalt-workload ctx [procs=N] [size_kb=N] [loops=N]
//   unhalt-workload probe [interval_ms=N] [rounds=N] [count=N]     (count=0: until killed)
//
// Prints the same `@u1` lines as the agent sends on ttyS1 (workloads.h), one per line on
// stdout; readable errors go to stderr. Exit status: 0 done, 1 the workload failed, 2 bad usage.
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "workloads.h"

static void emit_stdout(const char *fmt, ...) {
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  // One write per line, nothing left buffered when a workload forks.
  fwrite(line, 1, (size_t)n, stdout);
  fflush(stdout);
}

static int usage(FILE *to) {
  fprintf(to,
          "usage: unhalt-workload NAME [key=value ...]\n"
          "  pipe       loops=1000000                 like perf bench sched pipe\n"
          "  messaging  groups=10 fds=20 loops=100    like perf bench sched messaging\n"
          "  ctx        procs=2 size_kb=0 loops=10000 like lmbench lat_ctx\n"
          "  probe      interval_ms=1000 rounds=100 count=0 (0: forever)\n"
          "Prints @u1 protocol lines on stdout (see native/guest/linux/workloads/workloads.h).\n");
  return to == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) return usage(stderr);
  const char *name = argv[1];
  if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) return usage(stdout);
  if (strcmp(name, "probe") == 0) {
    struct wl_probe_opts o;
    if (wl_probe_parse(argc - 2, argv + 2, &o) != WL_OK) {
      fprintf(stderr, "unhalt-workload: bad arguments (see unhalt-workload --help)\n");
      return 2;
    }
    return wl_probe_loop(&o, emit_stdout) == WL_OK ? 0 : 1;
  }
  int status = wl_run(name, argc - 2, argv + 2, emit_stdout);
  if (status == WL_BAD_ARGS) {
    fprintf(stderr, "unhalt-workload: bad arguments (see unhalt-workload --help)\n");
    return 2;
  }
  return status == WL_OK ? 0 : 1;
}
