// The workloads disk's tools as agent workloads: `run perf-pipe loops=N` and the others below
// run Debian's own program from the disk (mounted at /opt/workloads by the kit's /init;
// $UNHALT_WORKLOADS overrides it, for host tests of the same path), read its printed result and
// report it as `@u1` lines like the built-in workloads:
//
//   perf-pipe        loops=N               perf bench sched pipe -l N
//                    -> @u1 perf_pipe loops=N total_ns=N per_op_ns=N
//   perf-messaging   groups=N loops=N      perf bench sched messaging -g N -l N
//                    -> @u1 perf_messaging groups=N loops=N total_ns=N
//   cyclictest       loops=N interval_us=N threads=N
//                                          cyclictest -q -m -l N -i N -t N -h 10000
//                    -> @u1 cyclictest samples=N p50_ns=N p99_ns=N max_ns=N avg_ns=N overflows=N
//   iperf3-tcp       mbytes=N len_kb=N     iperf3 server and client over the guest's loopback
//                    -> @u1 iperf3_tcp bytes=N elapsed_ns=N bits_per_s=N
//   stress-ng-switch workers=N ops=N       stress-ng --switch N --switch-ops N --metrics-brief
//                    -> @u1 stress_switch workers=N ops=N real_ns=N ops_per_s=N
//   sockperf-tcp-rr  seconds=N msg_bytes=N mps=N
//                                          sockperf server and ping-pong client over the guest's
//                                          loopback: TCP request-response, sockperf pp --tcp -t N
//                                          -m N --full-rtt (mps=0: back to back; else N requests
//                                          a second, so the vCPUs idle between them)
//                    -> @u1 sockperf_rr observations=N avg_ns=N p50_ns=N p99_ns=N max_ns=N
//
// each followed by `@u1 done workload=ID status=S elapsed_ns=N` (IDs in tools.h). Without the
// disk: `@u1 error workload=ID no_workloads_disk=1`; a tool that fails or prints no result:
// `@u1 error workload=ID exit_status=N` (its last output line on stderr, the guest's console).
#define _GNU_SOURCE
#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OUT_MAX (512 * 1024)
#define HIST_BUCKETS 10000

static long long tool_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *workloads_dir(void) {
  const char *d = getenv("UNHALT_WORKLOADS");
  return d && *d ? d : "/opt/workloads";
}

struct param {
  const char *key;
  long long value, min, max;
};

/** key=integer tokens into `p` (defaults kept); -1 with a message on stderr on a bad one. */
static int parse_params(int argc, char *const *argv, struct param *p, int n, const char *tool) {
  for (int i = 0; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    int found = 0;
    for (int j = 0; eq && j < n; j++) {
      if (strlen(p[j].key) != (size_t)(eq - argv[i]) || strncmp(p[j].key, argv[i], (size_t)(eq - argv[i])) != 0) continue;
      char *end;
      errno = 0;
      long long v = strtoll(eq + 1, &end, 10);
      if (errno || *end || end == eq + 1 || v < p[j].min || v > p[j].max) {
        fprintf(stderr, "unhalt-agent: %s: %s must be from %lld to %lld\n", tool, p[j].key, p[j].min, p[j].max);
        return -1;
      }
      p[j].value = v;
      found = 1;
    }
    if (!found) {
      fprintf(stderr, "unhalt-agent: %s: unknown argument %s\n", tool, argv[i]);
      return -1;
    }
  }
  return 0;
}

/** In a forked child: execs bin/TOOL from the workloads dir with `args` (at most 30); never returns. */
static void exec_tool(const char *tool, char *const *args) {
  char path[512];
  snprintf(path, sizeof path, "%s/bin/%s", workloads_dir(), tool);
  char *argv[32];
  int n = 0;
  argv[n++] = path;
  for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
  argv[n] = NULL;
  execv(path, argv);
  _exit(127);
}

/** Runs bin/TOOL from the workloads dir with `args`; its stdout+stderr in `out`; the exit status or -1. */
static int capture(const char *tool, char *const *args, char *out, size_t cap) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    exec_tool(tool, args);
  }
  close(fds[1]);
  size_t len = 0;
  for (;;) {
    char sink[4096];
    char *to = len + 1 < cap ? out + len : sink;
    size_t room = len + 1 < cap ? cap - 1 - len : sizeof sink;
    ssize_t r = read(fds[0], to, room);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (to != sink) len += (size_t)r;
  }
  out[len] = 0;
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/** The number after `label` in `text` (e.g. "Total time:"), or -1. */
static double number_after(const char *text, const char *label) {
  const char *at = strstr(text, label);
  if (!at) return -1;
  return strtod(at + strlen(label), NULL);
}

static void last_line_to_stderr(const char *tool, const char *out) {
  size_t n = strlen(out);
  while (n > 0 && out[n - 1] == '\n') n--;
  size_t s = n;
  while (s > 0 && out[s - 1] != '\n') s--;
  fprintf(stderr, "unhalt-agent: %s: %.*s\n", tool, (int)(n - s), out + s);
}

static char outbuf[OUT_MAX];

static int failed(wl_emit_fn emit, int id, const char *tool, int status) {
  last_line_to_stderr(tool, outbuf);
  emit("@u1 error workload=%d exit_status=%d", id, status);
  return WL_FAILED;
}

static int perf_pipe(int argc, char *const *argv, wl_emit_fn emit) {
  struct param p[] = {{"loops", 1000000, 1, 1000000000}};
  if (parse_params(argc, argv, p, 1, "perf-pipe") != 0) return WL_BAD_ARGS;
  char loops[32];
  snprintf(loops, sizeof loops, "%lld", p[0].value);
  char *args[] = {"bench", "sched", "pipe", "-l", loops, NULL};
  int st = capture("perf", args, outbuf, sizeof outbuf);
  double total = number_after(outbuf, "Total time:"), per_op = -1;
  const char *u = strstr(outbuf, "usecs/op");
  if (u) {
    const char *s = u;
    while (s > outbuf && s[-1] != '\n') s--;
    per_op = strtod(s, NULL);
  }
  if (st != 0 || total < 0 || per_op < 0) return failed(emit, TOOL_ID_PERF_PIPE, "perf-pipe", st);
  emit("@u1 perf_pipe loops=%lld total_ns=%lld per_op_ns=%lld", p[0].value, (long long)(total * 1e9), (long long)(per_op * 1e3));
  return WL_OK;
}

static int perf_messaging(int argc, char *const *argv, wl_emit_fn emit) {
  struct param p[] = {{"groups", 10, 1, 200}, {"loops", 100, 1, 10000000}};
  if (parse_params(argc, argv, p, 2, "perf-messaging") != 0) return WL_BAD_ARGS;
  char groups[32], loops[32];
  snprintf(groups, sizeof groups, "%lld", p[0].value);
  snprintf(loops, sizeof loops, "%lld", p[1].value);
  char *args[] = {"bench", "sched", "messaging", "-g", groups, "-l", loops, NULL};
  int st = capture("perf", args, outbuf, sizeof outbuf);
  double total = number_after(outbuf, "Total time:");
  if (st != 0 || total < 0) return failed(emit, TOOL_ID_PERF_MESSAGING, "perf-messaging", st);
  emit("@u1 perf_messaging groups=%lld loops=%lld total_ns=%lld", p[0].value, p[1].value, (long long)(total * 1e9));
  return WL_OK;
}

static long long hist[HIST_BUCKETS];

static int cyclictest(int argc, char *const *argv, wl_emit_fn emit) {
  struct param p[] = {{"loops", 10000, 1, 100000000}, {"interval_us", 1000, 50, 1000000}, {"threads", 1, 1, 64}};
  if (parse_params(argc, argv, p, 3, "cyclictest") != 0) return WL_BAD_ARGS;
  char loops[32], interval[32], threads[32], buckets[32];
  snprintf(loops, sizeof loops, "%lld", p[0].value);
  snprintf(interval, sizeof interval, "%lld", p[1].value);
  snprintf(threads, sizeof threads, "%lld", p[2].value);
  snprintf(buckets, sizeof buckets, "%d", HIST_BUCKETS);
  char *args[] = {"-q", "-m", "-l", loops, "-i", interval, "-t", threads, "-h", buckets, NULL};
  int st = capture("cyclictest", args, outbuf, sizeof outbuf);
  // The histogram: "BUCKET COUNT COUNT ..." per microsecond, one count per thread.
  memset(hist, 0, sizeof hist);
  long long samples = 0, overflows = 0, max_us = -1, avg_sum = 0, avg_n = 0;
  for (char *line = outbuf, *next; line && *line; line = next) {
    // One line at a time: strtoll skips newlines as white space.
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (line[0] >= '0' && line[0] <= '9') {
      char *end;
      long long bucket = strtoll(line, &end, 10);
      for (char *q = end;;) {
        long long c = strtoll(q, &end, 10);
        if (end == q) break;
        if (bucket >= 0 && bucket < HIST_BUCKETS) hist[bucket] += c, samples += c;
        q = end;
      }
    } else if (strncmp(line, "# Max Latencies:", 16) == 0 || strncmp(line, "# Avg Latencies:", 16) == 0
               || strncmp(line, "# Histogram Overflows:", 22) == 0) {
      int which = line[2] == 'M' ? 0 : line[2] == 'A' ? 1 : 2;
      char *q = strchr(line, ':') + 1, *end;
      for (;;) {
        long long v = strtoll(q, &end, 10);
        if (end == q) break;
        if (which == 0 && v > max_us) max_us = v;
        if (which == 1) avg_sum += v, avg_n++;
        if (which == 2) overflows += v;
        q = end;
      }
    }
  }
  long long total = samples + overflows;
  if (st != 0 || total == 0 || max_us < 0) return failed(emit, TOOL_ID_CYCLICTEST, "cyclictest", st);
  // Percentiles over every sample; those past the histogram count as its maximum.
  long long p50 = max_us, p99 = max_us, seen = 0;
  int have50 = 0;
  for (int b = 0; b < HIST_BUCKETS; b++) {
    seen += hist[b];
    if (!have50 && seen * 2 >= total) p50 = b, have50 = 1;
    if (seen * 100 >= total * 99) { p99 = b; break; }
  }
  emit("@u1 cyclictest samples=%lld p50_ns=%lld p99_ns=%lld max_ns=%lld avg_ns=%lld overflows=%lld", total, p50 * 1000,
       p99 * 1000, max_us * 1000, avg_n ? avg_sum * 1000 / avg_n : 0, overflows);
  return WL_OK;
}

/** Starts bin/TOOL from the workloads dir with `args`, its output dropped; its pid, or -1. */
static pid_t start_quiet(const char *tool, char *const *args) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int nul = open("/dev/null", O_RDWR);
  if (nul >= 0) dup2(nul, 0), dup2(nul, 1), dup2(nul, 2);
  exec_tool(tool, args); // the wrapper execs the tool itself: this pid is the server's
  return -1;
}

/**
 * A client run (capture()) against a server just started: the server needs a moment to listen,
 * so the client runs again while its output says `refused` (for up to 30 s: a loaded host or an
 * emulated guest can take seconds to start it) and the server is still there. Its status; *server
 * becomes -1 when the server had exited (one that could not bind its port).
 */
static int capture_from_new_server(const char *tool, char *const *args, pid_t *server, const char *refused) {
  for (long long give_up = tool_now_ns() + 30000000000LL;;) {
    int st = capture(tool, args, outbuf, sizeof outbuf);
    if (st == 0 || !strstr(outbuf, refused) || tool_now_ns() > give_up) return st;
    if (waitpid(*server, NULL, WNOHANG) == *server) {
      fprintf(stderr, "unhalt-agent: %s: its server exited (is its port in use?)\n", tool);
      *server = -1;
      return st;
    }
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
  }
}

static int iperf3_tcp(int argc, char *const *argv, wl_emit_fn emit) {
  struct param p[] = {{"mbytes", 1024, 1, 1000000}, {"len_kb", 128, 1, 1024}};
  if (parse_params(argc, argv, p, 2, "iperf3-tcp") != 0) return WL_BAD_ARGS;
  char bytes[32], len[32];
  snprintf(bytes, sizeof bytes, "%lldM", p[0].value);
  snprintf(len, sizeof len, "%lldK", p[1].value);
  // The server: one test, then it exits (-1); its output is not ours to read.
  char *server_args[] = {"-s", "-1", "-p", "5201", "-B", "127.0.0.1", NULL};
  pid_t server = start_quiet("iperf3", server_args);
  if (server < 0) return failed(emit, TOOL_ID_IPERF3_TCP, "iperf3-tcp", -1);
  char *args[] = {"-c", "127.0.0.1", "-p", "5201", "-n", bytes, "-l", len, "-f", "k", NULL};
  int st = capture_from_new_server("iperf3", args, &server, "Connection refused");
  if (server > 0) {
    kill(server, SIGTERM);
    while (waitpid(server, NULL, 0) < 0 && errno == EINTR) {}
  }
  // "[  5]   0.00-1.23   sec  1.00 GBytes  6981234 Kbits/sec    receiver"
  const char *rx = strstr(outbuf, "receiver");
  if (st != 0 || !rx) return failed(emit, TOOL_ID_IPERF3_TCP, "iperf3-tcp", st);
  const char *s = rx;
  while (s > outbuf && s[-1] != '\n') s--;
  const char *dash = strchr(s, '-');
  const char *kbits = strstr(s, "Kbits/sec");
  if (!dash || !kbits || kbits > rx) return failed(emit, TOOL_ID_IPERF3_TCP, "iperf3-tcp", st);
  double secs = strtod(dash + 1, NULL);
  const char *k = kbits;
  while (k > s && k[-1] == ' ') k--;
  while (k > s && k[-1] != ' ') k--;
  double rate = strtod(k, NULL) * 1000;
  // The interval is printed to 10 ms (a short run reads 0.00-0.01); the rate comes from the
  // precise time, so a short run's time is taken from it.
  long long bytes_sent = p[0].value * 1048576;
  if (secs < 1 && rate > 0) secs = bytes_sent * 8.0 / rate;
  emit("@u1 iperf3_tcp bytes=%lld elapsed_ns=%lld bits_per_s=%lld", bytes_sent, (long long)(secs * 1e9), (long long)rate);
  return WL_OK;
}

/** sockperf's figure after `label` (its lines carry colour escapes even into a pipe), in µs; or -1. */
static double sockperf_us(const char *label) {
  const char *at = strstr(outbuf, label);
  if (!at) return -1;
  at += strlen(label);
  while (*at == ' ' || *at == '=') at++;
  char *end;
  double v = strtod(at, &end);
  return end == at ? -1 : v;
}

static int sockperf_rr(int argc, char *const *argv, wl_emit_fn emit) {
  struct param p[] = {{"seconds", 3, 2, 3600}, {"msg_bytes", 64, 14, 65000}, {"mps", 0, 0, 1000000}};
  if (parse_params(argc, argv, p, 3, "sockperf-tcp-rr") != 0) return WL_BAD_ARGS;
  char secs[32], bytes[32], mps[32];
  snprintf(secs, sizeof secs, "%lld", p[0].value);
  snprintf(bytes, sizeof bytes, "%lld", p[1].value);
  if (p[2].value) snprintf(mps, sizeof mps, "--mps=%lld", p[2].value);
  else snprintf(mps, sizeof mps, "--mps=max");
  char *server_args[] = {"sr", "--tcp", "-i", "127.0.0.1", "-p", "11111", NULL};
  pid_t server = start_quiet("sockperf", server_args);
  if (server < 0) return failed(emit, TOOL_ID_SOCKPERF_RR, "sockperf-tcp-rr", -1);
  // --no-rdtsc: times from clock_gettime, not a TSC rate sockperf would have to guess in a guest.
  char *args[] = {"pp", "--tcp", "-i", "127.0.0.1", "-p", "11111", "-t", secs, "-m", bytes, mps, "--full-rtt", "--no-rdtsc", NULL};
  int st = capture_from_new_server("sockperf", args, &server, "Can`t connect socket");
  // The server never ends by itself and its output is not read: SIGKILL, never a wait on its handler.
  if (server > 0) {
    kill(server, SIGKILL);
    while (waitpid(server, NULL, 0) < 0 && errno == EINTR) {}
  }
  // "avg-rtt=20.022 (std-dev=7.184)", "Total 2846 observations", "percentile 50.000 =   18.736",
  // "<MAX> observation =  109.027" (µs).
  long long n = 0;
  for (const char *t = strstr(outbuf, "Total "); t && n <= 0; t = strstr(t + 6, "Total ")) // not "[Total Run]"
    if (t[6] >= '0' && t[6] <= '9') n = strtoll(t + 6, NULL, 10);
  double avg = sockperf_us("avg-rtt"), p50 = sockperf_us("percentile 50.000"), p99 = sockperf_us("percentile 99.000"),
         max = sockperf_us("<MAX> observation");
  if (st != 0 || n <= 0 || avg < 0 || p50 < 0 || p99 < 0 || max < 0) return failed(emit, TOOL_ID_SOCKPERF_RR, "sockperf-tcp-rr", st);
  emit("@u1 sockperf_rr observations=%lld avg_ns=%lld p50_ns=%lld p99_ns=%lld max_ns=%lld", n, (long long)(avg * 1e3),
       (long long)(p50 * 1e3), (long long)(p99 * 1e3), (long long)(max * 1e3));
  return WL_OK;
}

static int stress_switch(int argc, char *const *argv, wl_emit_fn emit) {
  struct param p[] = {{"workers", 2, 1, 256}, {"ops", 1000000, 1, 1000000000}};
  if (parse_params(argc, argv, p, 2, "stress-ng-switch") != 0) return WL_BAD_ARGS;
  char workers[32], ops[32];
  snprintf(workers, sizeof workers, "%lld", p[0].value);
  snprintf(ops, sizeof ops, "%lld", p[1].value);
  char *args[] = {"--switch", workers, "--switch-ops", ops, "--metrics-brief", NULL};
  int st = capture("stress-ng", args, outbuf, sizeof outbuf);
  // "stress-ng: metrc: [PID] switch  OPS  REAL  USR  SYS  OPS/S(real)  OPS/S(usr+sys)"
  for (char *line = outbuf; st == 0 && line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char *br = strchr(line, ']');
    char *nl = strchr(line, '\n');
    if (!br || (nl && br > nl)) continue;
    char *q = br + 1;
    while (*q == ' ') q++;
    if (strncmp(q, "switch ", 7) != 0) continue;
    char *end;
    double done_ops = strtod(q + 7, &end);
    if (end == q + 7) continue;
    // REAL is printed to 10 ms (a short run reads 0.00 or 0.01); OPS/S(real) comes from the
    // precise time, so the time is taken from it where it is there.
    double real = strtod(end, &end);
    strtod(end, &end);                          /* USR */
    strtod(end, &end);                          /* SYS */
    char *rate_at = end;
    double rate = strtod(rate_at, &end);
    if (end != rate_at && rate > 0 && done_ops > 0) real = done_ops / rate;
    if (real <= 0) continue;
    emit("@u1 stress_switch workers=%lld ops=%lld real_ns=%lld ops_per_s=%lld", p[0].value, (long long)done_ops,
         (long long)(real * 1e9), (long long)(done_ops / real));
    return WL_OK;
  }
  return failed(emit, TOOL_ID_STRESS_SWITCH, "stress-ng-switch", st);
}

static const struct {
  const char *name;
  int id;
  const char *tool;
  int (*run)(int, char *const *, wl_emit_fn);
} TOOLS[] = {
    {"perf-pipe", TOOL_ID_PERF_PIPE, "perf", perf_pipe},
    {"perf-messaging", TOOL_ID_PERF_MESSAGING, "perf", perf_messaging},
    {"cyclictest", TOOL_ID_CYCLICTEST, "cyclictest", cyclictest},
    {"iperf3-tcp", TOOL_ID_IPERF3_TCP, "iperf3", iperf3_tcp},
    {"stress-ng-switch", TOOL_ID_STRESS_SWITCH, "stress-ng", stress_switch},
    {"sockperf-tcp-rr", TOOL_ID_SOCKPERF_RR, "sockperf", sockperf_rr},
};

int tool_run(const char *name, int argc, char *const *argv, wl_emit_fn emit) {
  for (size_t i = 0; name && i < sizeof TOOLS / sizeof TOOLS[0]; i++) {
    if (strcmp(TOOLS[i].name, name) != 0) continue;
    long long t0 = tool_now_ns();
    char path[512];
    snprintf(path, sizeof path, "%s/bin/%s", workloads_dir(), TOOLS[i].tool);
    int status;
    if (access(path, X_OK) != 0) {
      fprintf(stderr, "unhalt-agent: %s: no %s: the VM has no workloads disk (unhalt bench attaches it; build it with npm run build:linux)\n", name, path);
      emit("@u1 error workload=%d no_workloads_disk=1", TOOLS[i].id);
      status = WL_FAILED;
    } else {
      status = TOOLS[i].run(argc, argv, emit);
      if (status == WL_BAD_ARGS) emit("@u1 error workload=%d bad_args=1", TOOLS[i].id);
    }
    emit("@u1 done workload=%d status=%d elapsed_ns=%lld", TOOLS[i].id, status, tool_now_ns() - t0);
    return 1;
  }
  return 0;
}
