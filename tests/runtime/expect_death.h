/*
 * expect_death.h — for the runtime tests: runs fn in a child process and
 * checks that it exits non-zero with needle in what it writes to stderr
 * (colrt_die's message), so misuse is tested without ending the test.
 * Include after check.h, with _POSIX_C_SOURCE 200809L defined.
 */
#ifndef COLOSSAL_TEST_EXPECT_DEATH_H
#define COLOSSAL_TEST_EXPECT_DEATH_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void expect_death(const char *what, void (*fn)(void), const char *needle) {
    int fd[2];
    if (pipe(fd)) return;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        fn();
        _exit(0);
    }
    close(fd[1]);
    char buf[2048] = "";
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)r;
    buf[len] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) != 0)) fprintf(stderr, "%s: expected a non-zero exit\n", what);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    CHECK_CONTAINS(buf, needle);
}

#endif
