// Unhalt's Linux workloads (see workloads.h): pipe, messaging, ctx and the live ctxprobe.
// Shared by the guest agent and the host's unhalt-workload; plain POSIX + Linux, no threads.
//
// Child processes never write protocol lines and always leave with _exit(): the parent's
// channel (ttyS1 in the guest, stdout on the host) and stdio buffers belong to the parent.
#define _GNU_SOURCE
#include "workloads.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *const WL_NAMES = "pipe, messaging, ctx";

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int xwrite(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/** Reads exactly n bytes; -1 on error or end of file (errno EPIPE then). */
static int xread(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) {
      errno = EPIPE;
      return -1;
    }
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/** Waits for a child; 0 when it exited with status 0. */
static int reap(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void kill_all(pid_t *pids, int n) {
  for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
  for (int i = 0; i < n; i++) reap(pids[i]);
}

static void close_pair(int fds[2]) {
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
  fds[0] = fds[1] = -1;
}

// --- arguments -----------------------------------------------------------------------------

struct param {
  const char *key;
  long long def, min, max;
};

static void list_keys(char *out, size_t size, const struct param *params, int n) {
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(out);
    snprintf(out + len, size - len, "%s%s", i ? ", " : "", params[i].key);
  }
}

/** "key=value" tokens into values[] (defaults first); a readable message on stderr when bad. */
static int parse_params(const char *what, const struct param *params, int n, long long *values, int argc, char *const *argv) {
  for (int i = 0; i < n; i++) values[i] = params[i].def;
  for (int t = 0; t < argc; t++) {
    const char *tok = argv[t];
    const char *eq = strchr(tok, '=');
    if (!eq || eq == tok) {
      fprintf(stderr, "%s: argument \"%.40s\" is not key=value\n", what, tok);
      return WL_BAD_ARGS;
    }
    size_t klen = (size_t)(eq - tok);
    int found = -1;
    for (int i = 0; i < n; i++)
      if (strlen(params[i].key) == klen && strncmp(params[i].key, tok, klen) == 0) found = i;
    if (found < 0) {
      char keys[256];
      list_keys(keys, sizeof keys, params, n);
      fprintf(stderr, "%s: unknown argument \"%.*s\"; valid: %s\n", what, (int)(klen > 40 ? 40 : klen), tok, keys);
      return WL_BAD_ARGS;
    }
    const char *v = eq + 1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end != 0 || errno != 0) {
      fprintf(stderr, "%s: %s=\"%.40s\" is not a whole number\n", what, params[found].key, v);
      return WL_BAD_ARGS;
    }
    if (x < params[found].min || x > params[found].max) {
      fprintf(stderr, "%s: %s must be from %lld to %lld, got %lld\n", what, params[found].key, params[found].min, params[found].max, x);
      return WL_BAD_ARGS;
    }
    values[found] = x;
  }
  return WL_OK;
}

#define NPARAMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/** A system call failed: the readable message and the protocol's error line. */
static int failed(int id, const char *what, const char *call, wl_emit_fn emit) {
  int e = errno;
  fprintf(stderr, "%s: %s failed: %s\n", what, call, strerror(e));
  emit("@u1 error workload=%d errno=%d", id, e);
  return WL_FAILED;
}

// --- pipe: perf bench sched pipe -----------------------------------------------------------

static const struct param PIPE_PARAMS[] = {{"loops", 1000000, 1, 1000000000}};

static int run_pipe(const long long *v, wl_emit_fn emit) {
  long long loops = v[0];
  int p1[2] = {-1, -1}, p2[2] = {-1, -1};
  if (pipe(p1) != 0 || pipe(p2) != 0) {
    int r = failed(WL_ID_PIPE, "pipe", "pipe()", emit);
    close_pair(p1), close_pair(p2);
    return r;
  }
  // As perf: the clock starts before the fork and stops after the wait.
  long long t0 = now_ns();
  pid_t pid = fork();
  if (pid < 0) {
    int r = failed(WL_ID_PIPE, "pipe", "fork()", emit);
    close_pair(p1), close_pair(p2);
    return r;
  }
  if (pid == 0) {
    // perf's thread 0: read, then write back.
    close(p1[1]), close(p2[0]);
    int m;
    for (long long i = 0; i < loops; i++) {
      if (xread(p1[0], &m, sizeof m) != 0 || xwrite(p2[1], &m, sizeof m) != 0) _exit(1);
    }
    _exit(0);
  }
  close(p1[0]), close(p2[1]);
  int m = 0, ok = 1;
  for (long long i = 0; i < loops && ok; i++) {
    if (xwrite(p1[1], &m, sizeof m) != 0 || xread(p2[0], &m, sizeof m) != 0) ok = 0;
  }
  int e = errno;
  close(p1[1]), close(p2[0]);
  int child = reap(pid);
  long long total = now_ns() - t0;
  if (!ok || child != 0) {
    errno = ok ? ECHILD : e;
    return failed(WL_ID_PIPE, "pipe", ok ? "the partner process" : "the ping-pong", emit);
  }
  emit("@u1 pipe loops=%lld total_ns=%lld per_op_ns=%lld", loops, total, total / loops);
  return WL_OK;
}

// --- messaging: perf bench sched messaging (hackbench), processes + socketpairs -----------

#define MSG_BYTES 100
static const struct param MSG_PARAMS[] = {
    {"groups", 10, 1, 200},
    {"fds", 20, 1, 64},
    {"loops", 100, 1, 10000000},
};
#define MSG_MAX_PROCS 8192

/** Tells the parent we are ready, then waits for the starting gun (the byte is never read). */
static void msg_ready(int ready_out, int wakefd) {
  char dummy = '*';
  if (xwrite(ready_out, &dummy, 1) != 0) _exit(1);
  struct pollfd p = {.fd = wakefd, .events = POLLIN};
  while (poll(&p, 1, -1) < 0)
    if (errno != EINTR) _exit(1);
}

static void msg_sender(const int *out_fds, int fds, long long loops, int ready_out, int wakefd) {
  char data[MSG_BYTES];
  memset(data, '-', sizeof data);
  msg_ready(ready_out, wakefd);
  for (long long i = 0; i < loops; i++)
    for (int j = 0; j < fds; j++)
      if (xwrite(out_fds[j], data, sizeof data) != 0) _exit(1);
  _exit(0);
}

static void msg_receiver(int in_fd, long long packets, int ready_out, int wakefd) {
  char data[MSG_BYTES];
  msg_ready(ready_out, wakefd);
  for (long long i = 0; i < packets; i++) {
    for (int done = 0; done < MSG_BYTES;) {
      ssize_t r = read(in_fd, data + done, (size_t)(MSG_BYTES - done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) _exit(1);
      done += (int)r;
    }
  }
  _exit(0);
}

/** Reads one ready byte per child; fails (instead of hanging) when a child died first. */
static int msg_wait_ready(int ready_in, const pid_t *pids, int n) {
  for (int got = 0; got < n;) {
    struct pollfd p = {.fd = ready_in, .events = POLLIN};
    int r = poll(&p, 1, 1000);
    if (r < 0 && errno != EINTR) return -1;
    if (r > 0) {
      char buf[256];
      ssize_t k = read(ready_in, buf, (size_t)(n - got) < sizeof buf ? (size_t)(n - got) : sizeof buf);
      if (k < 0 && errno != EINTR) return -1;
      if (k > 0) got += (int)k;
      continue;
    }
    for (int i = 0; i < n; i++) {
      int st;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        errno = ECHILD;
        return -1;
      }
    }
  }
  return 0;
}

static int run_messaging(const long long *v, wl_emit_fn emit) {
  int groups = (int)v[0], fds = (int)v[1];
  long long loops = v[2];
  if ((long long)groups * fds * 2 > MSG_MAX_PROCS) {
    fprintf(stderr, "messaging: groups x fds x 2 = %d processes, more than %d\n", groups * fds * 2, MSG_MAX_PROCS);
    emit("@u1 error workload=%d bad_args=1", WL_ID_MESSAGING);
    return WL_BAD_ARGS;
  }
  int total = groups * fds * 2;
  pid_t *pids = calloc((size_t)total, sizeof *pids);
  int *out_fds = calloc((size_t)fds, sizeof *out_fds);
  int ready[2] = {-1, -1}, wake[2] = {-1, -1};
  int n = 0, status = WL_OK;
  if (!pids || !out_fds) {
    errno = ENOMEM;
    status = failed(WL_ID_MESSAGING, "messaging", "calloc()", emit);
    goto out;
  }
  if (pipe(ready) != 0 || pipe(wake) != 0) {
    status = failed(WL_ID_MESSAGING, "messaging", "pipe()", emit);
    goto out;
  }
  for (int g = 0; g < groups; g++) {
    int opened = 0;
    for (int i = 0; i < fds; i++) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        status = failed(WL_ID_MESSAGING, "messaging", "socketpair()", emit);
        break;
      }
      pid_t pid = fork();
      if (pid < 0) {
        status = failed(WL_ID_MESSAGING, "messaging", "fork()", emit);
        close(sv[0]), close(sv[1]);
        break;
      }
      if (pid == 0) {
        close(sv[1]);
        msg_receiver(sv[0], (long long)fds * loops, ready[1], wake[0]);
      }
      pids[n++] = pid;
      close(sv[0]);
      out_fds[opened++] = sv[1];
    }
    for (int i = 0; i < fds && status == WL_OK; i++) {
      pid_t pid = fork();
      if (pid < 0) {
        status = failed(WL_ID_MESSAGING, "messaging", "fork()", emit);
        break;
      }
      if (pid == 0) msg_sender(out_fds, fds, loops, ready[1], wake[0]);
      pids[n++] = pid;
    }
    for (int i = 0; i < opened; i++) close(out_fds[i]);
    if (status != WL_OK) goto out;
  }
  if (msg_wait_ready(ready[0], pids, n) != 0) {
    status = failed(WL_ID_MESSAGING, "messaging", "waiting for the workers to start", emit);
    goto out;
  }
  long long t0 = now_ns();
  char go = '!';
  if (xwrite(wake[1], &go, 1) != 0) {
    status = failed(WL_ID_MESSAGING, "messaging", "the start signal", emit);
    goto out;
  }
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (reap(pids[i]) != 0) bad++;
  long long elapsed = now_ns() - t0;
  n = 0;
  if (bad) {
    errno = ECHILD;
    status = failed(WL_ID_MESSAGING, "messaging", "a worker process", emit);
    goto out;
  }
  emit("@u1 messaging groups=%d fds=%d loops=%lld total_ns=%lld", groups, fds, loops, elapsed);
out:
  if (n) kill_all(pids, n);
  close_pair(ready), close_pair(wake);
  free(pids);
  free(out_fds);
  return status;
}

// --- ctx: lmbench lat_ctx ------------------------------------------------------------------

static const struct param CTX_PARAMS[] = {
    {"procs", 2, 2, 1024},
    {"size_kb", 0, 0, 65536},
    {"loops", 10000, 1, 100000000},
};
#define CTX_MAX_TOTAL_KB (1024LL * 1024) // all processes' arrays together

static volatile int ctx_sink;

/** lat_ctx's sumit(): read every int of the process's own array. */
static void sumit(const int *data, size_t bytes) {
  int sum = 0;
  for (size_t i = 0; i < bytes / sizeof(int); i++) sum += data[i];
  ctx_sink += sum;
}

static int *ctx_buffer(size_t bytes) {
  if (bytes == 0) return NULL;
  int *b = malloc(bytes);
  if (b) memset(b, 1, bytes); // fault every page in now, not inside the timed passes
  return b;
}

static int run_ctx(const long long *v, wl_emit_fn emit) {
  int procs = (int)v[0];
  long long size_kb = v[1], loops = v[2];
  if (procs * size_kb > CTX_MAX_TOTAL_KB) {
    fprintf(stderr, "ctx: procs x size_kb = %lld KiB, more than %lld\n", procs * size_kb, CTX_MAX_TOTAL_KB);
    emit("@u1 error workload=%d bad_args=1", WL_ID_CTX);
    return WL_BAD_ARGS;
  }
  size_t bytes = (size_t)size_kb * 1024;
  int(*p)[2] = malloc(sizeof *p * (size_t)procs);
  pid_t *pids = calloc((size_t)procs, sizeof *pids);
  int *mine = ctx_buffer(bytes);
  int n = 0, status = WL_OK, made = 0;
  if (!p || !pids || (bytes && !mine)) {
    errno = ENOMEM;
    status = failed(WL_ID_CTX, "ctx", "malloc()", emit);
    goto out;
  }
  for (; made < procs; made++) {
    if (pipe(p[made]) != 0) {
      status = failed(WL_ID_CTX, "ctx", "pipe()", emit);
      goto out;
    }
  }
  // lat_ctx's overhead: passing the token through one pipe and summing, without a switch.
  long long ovh_loops = loops < 10000 ? loops : 10000;
  int tok = 0;
  long long t = now_ns();
  for (long long i = 0; i < ovh_loops; i++) {
    if (xwrite(p[0][1], &tok, sizeof tok) != 0 || xread(p[0][0], &tok, sizeof tok) != 0) {
      status = failed(WL_ID_CTX, "ctx", "the overhead loop", emit);
      goto out;
    }
    sumit(mine, bytes);
  }
  long long overhead = (now_ns() - t) / ovh_loops;

  // The ring: process i reads p[i] and writes p[i+1]; the parent is process 0.
  for (int i = 1; i < procs; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      status = failed(WL_ID_CTX, "ctx", "fork()", emit);
      goto out;
    }
    if (pid == 0) {
      int next = (i + 1) % procs;
      for (int j = 0; j < procs; j++) {
        if (j != i) close(p[j][0]);
        if (j != next) close(p[j][1]);
      }
      free(mine);
      int *data = ctx_buffer(bytes);
      if (bytes && !data) _exit(1);
      for (;;) {
        int k;
        if (xread(p[i][0], &k, sizeof k) != 0) _exit(1);
        if (k < 0) {
          xwrite(p[next][1], &k, sizeof k);
          _exit(0);
        }
        sumit(data, bytes);
        if (xwrite(p[next][1], &k, sizeof k) != 0) _exit(1);
      }
    }
    pids[n++] = pid;
  }
  for (int j = 0; j < procs; j++) {
    if (j != 0) close(p[j][0]), p[j][0] = -1;
    if (j != 1) close(p[j][1]), p[j][1] = -1;
  }
  long long warm = loops / 10 < 1000 ? loops / 10 + 1 : 1000, t0 = 0;
  for (long long i = 0; i < warm + loops; i++) {
    if (i == warm) t0 = now_ns();
    if (xwrite(p[1][1], &tok, sizeof tok) != 0 || xread(p[0][0], &tok, sizeof tok) != 0) {
      status = failed(WL_ID_CTX, "ctx", "the token ring", emit);
      goto out;
    }
    sumit(mine, bytes);
  }
  long long total = now_ns() - t0;
  tok = -1;
  if (xwrite(p[1][1], &tok, sizeof tok) != 0 || xread(p[0][0], &tok, sizeof tok) != 0) {
    status = failed(WL_ID_CTX, "ctx", "stopping the ring", emit);
    goto out;
  }
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (reap(pids[i]) != 0) bad++;
  n = 0;
  if (bad) {
    errno = ECHILD;
    status = failed(WL_ID_CTX, "ctx", "a ring process", emit);
    goto out;
  }
  long long raw = total / (loops * procs);
  long long per_switch = raw > overhead ? raw - overhead : 0;
  emit("@u1 ctx procs=%d size_kb=%lld loops=%lld per_switch_ns=%lld raw_per_switch_ns=%lld overhead_ns=%lld total_ns=%lld",
       procs, size_kb, loops, per_switch, raw, overhead, total);
out:
  if (n) kill_all(pids, n);
  for (int j = 0; j < made; j++) close_pair(p[j]);
  free(p);
  free(pids);
  free(mine);
  return status;
}

// --- dispatch ------------------------------------------------------------------------------

static const struct workload {
  const char *name;
  int id;
  const struct param *params;
  int nparams;
  int (*run)(const long long *values, wl_emit_fn emit);
} WORKLOADS[] = {
    {"pipe", WL_ID_PIPE, PIPE_PARAMS, NPARAMS(PIPE_PARAMS), run_pipe},
    {"messaging", WL_ID_MESSAGING, MSG_PARAMS, NPARAMS(MSG_PARAMS), run_messaging},
    {"ctx", WL_ID_CTX, CTX_PARAMS, NPARAMS(CTX_PARAMS), run_ctx},
};

int wl_run(const char *name, int argc, char *const *argv, wl_emit_fn emit) {
  const struct workload *w = NULL;
  for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++)
    if (name && strcmp(WORKLOADS[i].name, name) == 0) w = &WORKLOADS[i];
  if (!w) {
    fprintf(stderr, "unknown workload \"%.40s\"; valid: %s\n", name ? name : "", WL_NAMES);
    emit("@u1 error unknown_workload=1");
    emit("@u1 done workload=%d status=%d elapsed_ns=0", WL_ID_UNKNOWN, WL_BAD_ARGS);
    return WL_BAD_ARGS;
  }
  long long values[8];
  if (parse_params(w->name, w->params, w->nparams, values, argc, argv) != WL_OK) {
    emit("@u1 error workload=%d bad_args=1", w->id);
    emit("@u1 done workload=%d status=%d elapsed_ns=0", w->id, WL_BAD_ARGS);
    return WL_BAD_ARGS;
  }
  long long t0 = now_ns();
  int status = w->run(values, emit);
  emit("@u1 done workload=%d status=%d elapsed_ns=%lld", w->id, status, now_ns() - t0);
  return status;
}

// --- the live probe ------------------------------------------------------------------------

static const struct param PROBE_PARAMS[] = {
    {"interval_ms", 1000, 10, 3600000},
    {"rounds", 100, 1, 100000},
    {"count", 0, 0, 1000000000},
};

int wl_probe_parse(int argc, char *const *argv, struct wl_probe_opts *out) {
  long long v[3];
  if (parse_params("probe", PROBE_PARAMS, NPARAMS(PROBE_PARAMS), v, argc, argv) != WL_OK) return WL_BAD_ARGS;
  out->interval_ms = v[0];
  out->rounds = v[1];
  out->count = v[2];
  out->after_burst = NULL;
  return WL_OK;
}

static int cmp_ll(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return x < y ? -1 : x > y;
}

/** Nearest rank: the smallest sample with at least p percent at or below it. */
static long long percentile(const long long *sorted, long long n, int p) {
  long long rank = (n * p + 99) / 100;
  return sorted[rank > 0 ? rank - 1 : 0];
}

int wl_probe_loop(const struct wl_probe_opts *o, wl_emit_fn emit) {
  int a[2] = {-1, -1}, b[2] = {-1, -1};
  long long *samples = malloc(sizeof *samples * (size_t)o->rounds);
  if (!samples) {
    errno = ENOMEM;
    return failed(WL_ID_PROBE, "probe", "malloc()", emit);
  }
  if (pipe(a) != 0 || pipe(b) != 0) {
    int r = failed(WL_ID_PROBE, "probe", "pipe()", emit);
    close_pair(a), close_pair(b);
    free(samples);
    return r;
  }
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int r = failed(WL_ID_PROBE, "probe", "fork()", emit);
    close_pair(a), close_pair(b);
    free(samples);
    return r;
  }
  if (pid == 0) {
    // The partner: echo until the prober goes away (end of file, or its death).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self) _exit(0);
    close(a[1]), close(b[0]);
    int m;
    while (xread(a[0], &m, sizeof m) == 0)
      if (xwrite(b[1], &m, sizeof m) != 0) break;
    _exit(0);
  }
  close(a[0]), close(b[1]);
  int status = WL_OK;
  long long interval = o->interval_ms * 1000000LL, next = now_ns();
  for (long long k = 0; o->count == 0 || k < o->count; k++) {
    if (k > 0) {
      next += interval;
      long long now = now_ns();
      if (next < now) next = now; // fell behind (a stopped VM, a busy host): no catch-up bursts
      struct timespec ts = {next / 1000000000LL, next % 1000000000LL};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
    }
    int m = (int)k;
    for (long long r = 0; r < o->rounds; r++) {
      long long t = now_ns();
      if (xwrite(a[1], &m, sizeof m) != 0 || xread(b[0], &m, sizeof m) != 0) {
        status = failed(WL_ID_PROBE, "probe", "the ping-pong", emit);
        goto out;
      }
      samples[r] = now_ns() - t;
    }
    qsort(samples, (size_t)o->rounds, sizeof *samples, cmp_ll);
    emit("@u1 ctxprobe rounds=%lld p50_ns=%lld p99_ns=%lld max_ns=%lld", o->rounds, percentile(samples, o->rounds, 50),
         percentile(samples, o->rounds, 99), samples[o->rounds - 1]);
    if (o->after_burst) o->after_burst(k, emit);
  }
out:
  close(a[1]), close(b[0]);
  reap(pid);
  free(samples);
  return status;
}
