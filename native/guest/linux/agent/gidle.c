// The guest's idle and steal time per CPU: what the live probe (`probe on`) reports after a
// ctxprobe burst, in its process, one line per online CPU, about once a second at most
// (GIDLE_MIN_NS): each line is a serial write the host exits on, and a probe at 50 ms on many CPUs
// would flood a slow host's console (an emulated one stalled its guest's RCU on it); a chart needs
// no more. 0.9 s, not 1: a 1 s probe's bursts jitter, and none of its rounds may be dropped.
//
//   @u1 gidle cpu=N interval_ns=N cpuidle=0|1 poll_count=N poll_ns=N halt_count=N halt_ns=N steal_ns=N
//
// Every value is a difference since that CPU's previous line (or its baseline: gidle_begin at
// `probe on`, or the round the CPU came online in, which gives it no line); interval_ns is
// CLOCK_MONOTONIC's.
//   poll_*     the cpuidle states named POLL: /sys/devices/system/cpu/cpuN/cpuidle/stateK/usage
//              (entries) and time (µs, sent as ns): the guest polling by itself
//   halt_*     the sum of every other state (HLT or deeper: the halts the host sees)
//   cpuidle    0 where cpuN has no cpuidle directory (no driver: the CPU halts uncounted and
//              the counts are 0)
//   steal_ns   /proc/stat's cpuN line, 8th value (kvm-steal-time), USER_HZ ticks sent as ns
// The online CPUs are the cpuN lines of /proc/stat. A counter that went backwards gives 0; a CPU
// whose states changed (a driver swapped: another state count, the directory came or went)
// takes a new baseline and gives no line that round. Files are opened for each reading and
// closed again (no descriptors held for CPUs that may go away); state names are read only with
// a new baseline.
#define _GNU_SOURCE
#include "gidle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GIDLE_MAX_CPUS 8192  // the kernel's largest NR_CPUS; higher numbers are ignored
#define GIDLE_MAX_STATES 16  // the kernel's CPUIDLE_STATE_MAX is 10
#define CPU_DIR "/sys/devices/system/cpu/cpu"
#define GIDLE_MIN_NS 900000000LL // the shortest time a round of lines covers

struct sample {
  long long t_ns, steal_ticks, poll_count, poll_us, halt_count, halt_us;
  int cpuidle, nstates;
  unsigned poll_mask; // bit K: stateK is named POLL
};

struct cpu {
  int has_base, online;
  struct sample base, cur;
};

static struct cpu *cpus; // indexed by CPU number, `cap` entries
static int cap;
static long long last_round_ns; // when the baselines last moved (begin or a round of lines)

static long long gidle_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/** A small file's text, trailing newline dropped; -1 when it cannot be read. */
static int read_text(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n;
  while ((n = read(fd, buf, size - 1)) < 0 && errno == EINTR) {}
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  if (n > 0 && buf[n - 1] == '\n') buf[--n] = 0;
  return (int)n;
}

static long long read_ll(const char *path) {
  char buf[32];
  if (read_text(path, buf, sizeof buf) <= 0) return -1;
  return strtoll(buf, NULL, 10);
}

static struct cpu *cpu_entry(long n) {
  if (n < 0 || n >= GIDLE_MAX_CPUS) return NULL;
  if (n >= cap) {
    int want = cap ? cap : 64;
    while (want <= n) want *= 2;
    if (want > GIDLE_MAX_CPUS) want = GIDLE_MAX_CPUS;
    struct cpu *grown = realloc(cpus, sizeof *cpus * (size_t)want);
    if (!grown) return NULL;
    memset(grown + cap, 0, sizeof *grown * (size_t)(want - cap));
    cpus = grown;
    cap = want;
  }
  return &cpus[n];
}

/** cpuN's cpuidle states now; the POLL states known from its baseline when it has one. */
static void read_idle(int n, const struct cpu *c, struct sample *s) {
  char path[96];
  snprintf(path, sizeof path, CPU_DIR "%d/cpuidle", n);
  s->cpuidle = access(path, F_OK) == 0;
  if (!s->cpuidle) return;
  int known = c->has_base && c->base.cpuidle ? c->base.nstates : 0;
  for (int k = 0; k < GIDLE_MAX_STATES; k++) {
    snprintf(path, sizeof path, CPU_DIR "%d/cpuidle/state%d/usage", n, k);
    long long usage = read_ll(path);
    if (usage < 0) break;
    snprintf(path, sizeof path, CPU_DIR "%d/cpuidle/state%d/time", n, k);
    long long us = read_ll(path);
    if (us < 0) us = 0;
    int poll;
    if (k < known) {
      poll = (c->base.poll_mask >> k) & 1;
    } else {
      char name[32];
      snprintf(path, sizeof path, CPU_DIR "%d/cpuidle/state%d/name", n, k);
      poll = read_text(path, name, sizeof name) > 0 && strcmp(name, "POLL") == 0;
    }
    if (poll) {
      s->poll_mask |= 1u << k;
      s->poll_count += usage;
      s->poll_us += us;
    } else {
      s->halt_count += usage;
      s->halt_us += us;
    }
    s->nstates = k + 1;
  }
}

/** One /proc/stat `cpuN ...` line: marks cpuN online and reads its sample. */
static void take_line(const char *line, long long t) {
  char *end;
  if (line[3] < '0' || line[3] > '9') return; // the "cpu " total
  long n = strtol(line + 3, &end, 10);
  struct cpu *c = cpu_entry(n);
  if (!c) return;
  // user nice system idle iowait irq softirq steal ...: steal is the 8th (0 before Linux 2.6.11)
  long long v = 0;
  for (int i = 0; i < 8; i++) {
    char *p = end;
    v = strtoll(p, &end, 10);
    if (end == p) {
      v = 0;
      break;
    }
  }
  c->online = 1;
  memset(&c->cur, 0, sizeof c->cur);
  c->cur.t_ns = t;
  c->cur.steal_ticks = v;
  read_idle((int)n, c, &c->cur);
}

/** Reads /proc/stat's cpuN lines (they come first), each as it is complete. */
static void read_stat(long long t) {
  int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  size_t have = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    buf[have] = 0;
    char *line = buf, *nl;
    while ((nl = memchr(line, '\n', (size_t)(buf + have - line))) != NULL) {
      *nl = 0;
      if (strncmp(line, "cpu", 3) != 0) goto out; // the cpu lines are over
      take_line(line, t);
      line = nl + 1;
    }
    have = (size_t)(buf + have - line);
    memmove(buf, line, have);
    if (have >= 3 && strncmp(buf, "cpu", 3) != 0) break; // the next line is not a cpu line
    if (have == sizeof buf - 1) break;                     // a line longer than any cpu line
  }
out:
  close(fd);
}

static long long up(long long from, long long to) {
  return to > from ? to - from : 0;
}

/** A reading of every online CPU; emit NULL takes baselines only. */
static void round_of(wl_emit_fn emit) {
  static long long hz;
  if (!hz) hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
  long long now = gidle_now_ns();
  if (emit && now - last_round_ns < GIDLE_MIN_NS) return; // too soon: the differences keep growing
  last_round_ns = now;
  for (int i = 0; i < cap; i++) cpus[i].online = 0;
  read_stat(now);
  for (int i = 0; i < cap; i++) {
    struct cpu *c = &cpus[i];
    if (!c->online) {
      c->has_base = 0; // offline (or never seen): a new baseline when it comes back
      continue;
    }
    const struct sample *a = &c->base, *b = &c->cur;
    if (emit && c->has_base && a->cpuidle == b->cpuidle && a->nstates == b->nstates) {
      emit("@u1 gidle cpu=%d interval_ns=%lld cpuidle=%d poll_count=%lld poll_ns=%lld halt_count=%lld halt_ns=%lld "
           "steal_ns=%lld",
           i, up(a->t_ns, b->t_ns), b->cpuidle, up(a->poll_count, b->poll_count), up(a->poll_us, b->poll_us) * 1000,
           up(a->halt_count, b->halt_count), up(a->halt_us, b->halt_us) * 1000,
           up(a->steal_ticks, b->steal_ticks) * 1000000000LL / hz);
    }
    c->base = c->cur;
    c->has_base = 1;
  }
}

void gidle_begin(void) {
  for (int i = 0; i < cap; i++) cpus[i].has_base = 0;
  round_of(NULL);
}

void gidle_report(wl_emit_fn emit) {
  round_of(emit);
}
