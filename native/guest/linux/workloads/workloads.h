// Unhalt's Linux workloads: one source, two builds.
//
//   - inside the guest: linked into the agent (unhalt-agent, static, in the initramfs), which
//     runs them on `run NAME key=value ...` from ttyS1 and the live probe on `probe on|off`;
//   - on the host: linked into unhalt-workload (`unhalt-workload NAME key=value ...`), the
//     bare-metal reference, printing the same `@u1` lines on stdout.
//
// Workloads (integers only, units in key names; defaults like the reference tools):
//
//   pipe       loops=1000000        like `perf bench sched pipe`: two processes ping-pong one
//                                   int over two pipes; total time includes fork and wait, as
//                                   perf's "Total time" does.
//              -> @u1 pipe loops=N total_ns=N per_op_ns=N
//   messaging  groups=10 fds=20 loops=100
//                                   like `perf bench sched messaging` (processes, socketpairs):
//                                   per group `fds` receivers and `fds` senders; every sender
//                                   writes `loops` 100-byte messages to every receiver of its
//                                   group; timed from "all ready" to the last child reaped.
//              -> @u1 messaging groups=N fds=N loops=N total_ns=N
//   ctx        procs=2 size_kb=0 loops=10000
//                                   like lmbench lat_ctx: a token ring of `procs` processes,
//                                   each summing its own `size_kb` KiB between passes; the
//                                   per-switch latency has the single-process pipe and summing
//                                   overhead subtracted, as lat_ctx does (raw value beside it).
//              -> @u1 ctx procs=N size_kb=N loops=N per_switch_ns=N raw_per_switch_ns=N
//                     overhead_ns=N total_ns=N
//
// Every run ends with exactly one `@u1 done workload=ID status=S elapsed_ns=N`, where ID is
// WL_ID_* below (the protocol carries integers only) and S is WL_OK, WL_BAD_ARGS or WL_FAILED.
// A failure is reported before it as `@u1 error workload=ID bad_args=1` or
// `@u1 error workload=ID errno=N`, with a readable message on stderr.
//
// The live context-switch probe (`probe`): every `interval_ms` (default 1000) a burst of
// `rounds` (default 100) pipe round trips with a partner process, each timed on its own:
//   -> @u1 ctxprobe rounds=N p50_ns=N p99_ns=N max_ns=N
// `count` bursts (0 = until stopped). After each burst's line (and before the sleep to the
// next) the optional `after_burst` hook runs: the agent's per-CPU idle report (agent/gidle.c).
#ifndef UNHALT_WORKLOADS_H
#define UNHALT_WORKLOADS_H

#include <sys/types.h>

enum { WL_OK = 0, WL_BAD_ARGS = 1, WL_FAILED = 2 };
enum { WL_ID_UNKNOWN = 0, WL_ID_PIPE = 1, WL_ID_MESSAGING = 2, WL_ID_CTX = 3, WL_ID_PROBE = 4 };

/** Writes one protocol line (the newline is the emitter's); must be a single write(). */
typedef void (*wl_emit_fn)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** The workloads' names, for help texts: "pipe, messaging, ctx". */
extern const char *const WL_NAMES;

/**
 * Runs workload `name` with `argc` "key=value" tokens: emits its result event (or an error
 * line), then the `done` line. Returns WL_OK, WL_BAD_ARGS or WL_FAILED.
 */
int wl_run(const char *name, int argc, char *const *argv, wl_emit_fn emit);

struct wl_probe_opts {
  long long interval_ms, rounds, count;
  /** Called after burst `burst` (0, 1, ...) has emitted its line; NULL: nothing. */
  void (*after_burst)(long long burst, wl_emit_fn emit);
};

/** Parses the probe's "key=value" tokens (after_burst NULL); WL_BAD_ARGS with a message on stderr. */
int wl_probe_parse(int argc, char *const *argv, struct wl_probe_opts *out);

/**
 * Runs the probe in this process (it forks its own partner): `count` bursts, forever when 0.
 * Returns WL_OK or WL_FAILED (with `@u1 error workload=4 errno=N`).
 */
int wl_probe_loop(const struct wl_probe_opts *o, wl_emit_fn emit);

#endif
