/*
 * kubedra's pause: the process that holds a pod sandbox's namespaces open.
 *
 * Written here (not copied from upstream) because no registry is reachable where kubedra's
 * dev node runs, so containerd's sandbox image is built locally: `python -m
 * kubedra.devcluster.images pause` compiles this with `gcc -static -Os` and packs it as
 * localhost/kubedra-pause:3.10. It does what upstream's pause does for the kubelet: wait for
 * signals forever, reap any child that is re-parented to it (it is PID 1 of the pod when the
 * PID namespace is shared), and exit 0 on SIGINT or SIGTERM so a pod stops promptly.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define VERSION "kubedra-pause 3.10"

static void stop(int signum) {
    /* write(2) is async-signal-safe; printf is not. */
    static const char msg[] = "pause: shutting down\n";
    (void)signum;
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(0);
}

static void reap(int signum) {
    int saved = errno;
    (void)signum;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static void on(int signum, void (*handler)(int), int flags) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = flags;
    sigemptyset(&action.sa_mask);
    if (sigaction(signum, &action, NULL) < 0) {
        perror("pause: sigaction");
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        puts(VERSION);
        return 0;
    }
    on(SIGINT, stop, 0);
    on(SIGTERM, stop, 0);
    on(SIGCHLD, reap, SA_NOCLDSTOP | SA_RESTART);
    for (;;) {
        pause();
    }
}
