// `exec hex=ARGV [timeout_ms=N]`: the user's own guest command (unhalt bench --guest-cmd), run
// as an argument vector without a shell. ARGV is the vector's bytes, each argument followed by
// a NUL, as lower-case hex (the line protocol carries integers and this one byte string only).
// The program is found on PATH (the guest's own, plus /opt/workloads/bin); stdin is /dev/null,
// stdout and stderr are captured together. Answers:
//
//   @u1 exec_out seq=N hex=BYTES        the output, EXEC_CHUNK bytes a line, in order (its last
//                                       EXEC_KEEP bytes when it printed more)
//   @u1 exec status=N signal=N timed_out=0|1 out_bytes=N kept_bytes=N elapsed_ns=N
//
// status is the exit status (127: the program could not be started, its reason in the output);
// signal the signal that ended it (0 if none); timed_out=1 when it ran past timeout_ms and was
// killed with its process group. A malformed request: `@u1 exec_error bad_args=1`.
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXEC_KEEP (64 * 1024) // the output's tail sent back (a benchmark's summary is at its end)
#define EXEC_CHUNK 200        // bytes per exec_out line: 400 hex digits, inside the 512-byte line
#define EXEC_MAX_ARGS 256

static char ring[EXEC_KEEP];

static long long exec_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/** Decodes `hex` in place into NUL-terminated arguments; their count, or -1 if malformed. */
static int decode_argv(char *hex, char **argv) {
  size_t n = strlen(hex);
  if (n == 0 || n % 2) return -1;
  char *out = hex;
  for (size_t i = 0; i < n; i += 2) {
    int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return -1;
    *out++ = (char)(hi << 4 | lo);
  }
  if (out[-1] != 0) return -1; // every argument ends in NUL
  int argc = 0;
  for (char *p = hex; p < out; p += strlen(p) + 1) {
    if (argc == EXEC_MAX_ARGS) return -1;
    argv[argc++] = p;
  }
  argv[argc] = NULL;
  return argv[0][0] ? argc : -1;
}

static void send_output(size_t total, wl_emit_fn emit) {
  size_t kept = total < EXEC_KEEP ? total : EXEC_KEEP;
  size_t start = total < EXEC_KEEP ? 0 : total % EXEC_KEEP;
  char hex[EXEC_CHUNK * 2 + 1];
  long long seq = 0;
  for (size_t off = 0; off < kept; off += EXEC_CHUNK, seq++) {
    size_t len = kept - off < EXEC_CHUNK ? kept - off : EXEC_CHUNK;
    for (size_t i = 0; i < len; i++) {
      unsigned char b = (unsigned char)ring[(start + off + i) % EXEC_KEEP];
      hex[2 * i] = "0123456789abcdef"[b >> 4];
      hex[2 * i + 1] = "0123456789abcdef"[b & 15];
    }
    hex[2 * len] = 0;
    emit("@u1 exec_out seq=%lld hex=%s", seq, hex);
  }
}

void exec_command(int argc, char **argv, wl_emit_fn emit) {
  char *hex = NULL;
  long long timeout_ms = 0;
  for (int i = 0; i < argc; i++) {
    if (strncmp(argv[i], "hex=", 4) == 0 && !hex) hex = argv[i] + 4;
    else if (strncmp(argv[i], "timeout_ms=", 11) == 0) timeout_ms = strtoll(argv[i] + 11, NULL, 10);
    else hex = NULL, i = argc; // an unknown or repeated argument: refused below
  }
  char *args[EXEC_MAX_ARGS + 1];
  if (!hex || timeout_ms < 0 || decode_argv(hex, args) < 0) {
    emit("@u1 exec_error bad_args=1");
    return;
  }
  long long t0 = exec_now_ns();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    emit("@u1 exec_error errno=%d", errno);
    return;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    emit("@u1 exec_error errno=%d", errno);
    return;
  }
  if (pid == 0) {
    setpgid(0, 0); // its own group: a timeout ends the command's children too
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    const char *path = getenv("PATH");
    char newpath[1024];
    snprintf(newpath, sizeof newpath, "%s:/opt/workloads/bin", path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    setenv("PATH", newpath, 1);
    execvp(args[0], args);
    dprintf(1, "unhalt-agent: exec: cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  size_t total = 0;
  int timed_out = 0;
  long long deadline = timeout_ms > 0 ? t0 + timeout_ms * 1000000LL : 0;
  for (;;) {
    int wait_ms = -1;
    if (deadline) {
      long long left = (deadline - exec_now_ns()) / 1000000;
      if (left <= 0) {
        timed_out = 1;
        kill(-pid, SIGKILL);
        break;
      }
      wait_ms = left > 1000 ? 1000 : (int)left;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    int r = poll(&p, 1, wait_ms);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; // every writer closed: the command and any child holding its output
    for (ssize_t i = 0; i < n; i++) ring[(total + (size_t)i) % EXEC_KEEP] = buf[i];
    total += (size_t)n;
  }
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  send_output(total, emit);
  emit("@u1 exec status=%d signal=%d timed_out=%d out_bytes=%zu kept_bytes=%zu elapsed_ns=%lld", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
       WIFSIGNALED(st) ? WTERMSIG(st) : 0, timed_out, total, total < EXEC_KEEP ? total : (size_t)EXEC_KEEP, exec_now_ns() - t0);
}
