/* The floor of a seccomp user-notification supervisor, the other kernel mechanism that can
 * stop a process at a file-system call without privileges, for comparison with
 * ptrace-floor.c (issue 28, docs/performance.md "The floor of an observing tracer").
 *
 *   cc -O2 -o notif-floor scripts/bench/notif-floor.c
 *   ./notif-floor [-u] [-o] PROGRAM ARGS...
 *
 * Same system calls as ptrace-floor.c (strata's default coverage), but the filter returns
 * SECCOMP_RET_USER_NOTIF, and the supervisor answers every notification with
 * SECCOMP_USER_NOTIF_FLAG_CONTINUE (Linux 5.5+). The notification carries the call and its
 * arguments, so the supervisor needs no ptrace at all. With -o (or started under the name
 * notif-observe) it also reads the path argument (process_vm_readv, 256 bytes), joins a
 * relative one to the process's working directory (/proc/<pid>/cwd, once per process) and
 * stats it, as ptrace-floor -o does; it records nothing. Pinned to one CPU like
 * ptrace-floor unless -u. With NOTIF_SYNC set, the listener asks for synchronous wake-ups
 * (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6), as strata's supervisor does. With PTRACE_FLOOR_STOPS set, prints the number of stops.
 * Started under the name notif-store it observes as notif-observe does and then stores
 * what the least cache must keep of a successful compile: the object PROGRAM wrote (the
 * argument after -o, copied in 64 KiB reads and writes) and a manifest (the command line),
 * as two files in the directory store/ next to the binary. No hashing (a cache can take
 * header digests from a memo kept by stamps), no fsync, no lock: a floor.
 * Exit status: PROGRAM's (128+N if killed by signal N). What it leaves out, being a floor:
 * descendants that outlive PROGRAM, foreign-ABI calls, and the check that a notification
 * is still valid (SECCOMP_IOCTL_NOTIF_ID_VALID) before trusting what was read. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "floor-common.h"

#define RET_NOTIFY 0x7fc00000U /* SECCOMP_RET_USER_NOTIF */

/* Copies the file after -o in args into <dir of self>/store/<pid>.o and writes the command
 * line as <pid>.manifest there: what a cache stores for one compile, at the least. */
static void store_outputs(const char *self, int n, char **args) {
  char dir[4096], path[4200];
  const char *slash = strrchr(self, '/');
  snprintf(dir, sizeof dir, "%.*s/store", slash ? (int)(slash - self) : 1, slash ? self : ".");
  mkdir(dir, 0755);
  const char *object = NULL;
  for (int i = 0; i + 1 < n; i++)
    if (strcmp(args[i], "-o") == 0) object = args[i + 1];
  if (!object) return;
  int in = open(object, O_RDONLY | O_CLOEXEC);
  snprintf(path, sizeof path, "%s/%d.o", dir, (int)getpid());
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  static char buf[65536];
  ssize_t got;
  while (in >= 0 && out >= 0 && (got = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)got) != got) break;
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  snprintf(path, sizeof path, "%s/%d.manifest", dir, (int)getpid());
  FILE *m = fopen(path, "w");
  if (!m) return;
  for (int i = 0; i < n; i++) fprintf(m, "%s\n", args[i]);
  fclose(m);
}

int main(int argc, char **argv) {
  int pin, look, first = floor_args(argc, argv, "notif-observe", &pin, &look);
  const char *self = strrchr(argv[0], '/');
  int store = strcmp(self ? self + 1 : argv[0], "notif-store") == 0;
  if (store) look = 1;
  if (argc <= first) {
    fprintf(stderr, "usage: notif-floor [-u] [-o] PROGRAM ARGS...\n");
    return 2;
  }
  struct sock_filter f[256];
  int n = floor_filter(f, RET_NOTIFY, 0);
  struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};

  if (pin) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return perror("socketpair"), 127;
  pid_t child = fork();
  if (child < 0) return perror("fork"), 127;
  if (child == 0) {
    int fd;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        (fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                      &prog)) < 0) {
      perror("notif-floor: filter refused");
      _exit(127);
    }
    char cbuf[CMSG_SPACE(sizeof(int))];
    char byte = 0;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(sv[1], &msg, 0) != 1) _exit(127);
    close(fd);
    execvp(argv[first], argv + first);
    perror(argv[first]);
    _exit(127);
  }
  close(sv[1]);
  char cbuf[CMSG_SPACE(sizeof(int))];
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                       .msg_controllen = sizeof cbuf};
  if (recvmsg(sv[0], &msg, 0) != 1) return fprintf(stderr, "notif-floor: no listener\n"), 127;
  int listener;
  memcpy(&listener, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof listener);
  int pidfd = syscall(SYS_pidfd_open, child, 0);
  if (getenv("NOTIF_SYNC")) {
    unsigned long long sync = 1; /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6+ */
    if (ioctl(listener, 0x40082104UL /* SECCOMP_IOCTL_NOTIF_SET_FLAGS */, sync))
      perror("notif-floor: SET_FLAGS");
  }
  struct seccomp_notif_sizes sizes;
  syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes);
  struct seccomp_notif *req = calloc(1, sizes.seccomp_notif > sizeof *req ? sizes.seccomp_notif : sizeof *req);
  struct seccomp_notif_resp *resp = calloc(1, sizes.seccomp_notif_resp > sizeof *resp ? sizes.seccomp_notif_resp : sizeof *resp);
  long stops = 0;
  struct pollfd p[2] = {{.fd = listener, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[0].revents & POLLIN) {
      memset(req, 0, sizes.seccomp_notif);
      if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) == 0) {
        stops++;
        if (look) observe_path(req->pid, req->data.nr, req->data.args[0], req->data.args[1]);
        memset(resp, 0, sizes.seccomp_notif_resp);
        resp->id = req->id;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
      }
      continue;
    }
    if (p[0].revents & POLLHUP) break;
    if (p[1].revents & POLLIN) break;
  }
  int status, code = 127;
  if (waitpid(child, &status, 0) == child)
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (store && code == 0) store_outputs(argv[0], argc - first, argv + first);
  if (getenv("PTRACE_FLOOR_STOPS")) fprintf(stderr, "notif-floor: %ld stops, %ld paths stat'ed (%ld present)\n", stops, observed, observed_present);
  return code;
}
