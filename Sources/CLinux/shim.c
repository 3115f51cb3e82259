#define _GNU_SOURCE
#include "CLinux.h"
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <errno.h>
#include <time.h>
#include <string.h>
#include <sys/uio.h>

int clinux_socket_error(int fd) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    return err;
}

int clinux_set_nodelay(int fd) {
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

#ifdef __linux__
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>

int clinux_accept4_nonblocking(int fd, struct sockaddr *addr, unsigned int *len) {
    return accept4(fd, addr, (socklen_t *)len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int clinux_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

// Unpacks epoll_event (a packed struct on x86_64) into two plain arrays for Swift.
int clinux_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, evs, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        events[i] = evs[i].events;
        data[i] = evs[i].data.u64;
    }
    return n;
}

int clinux_epoll_wait_ns(int epfd, uint32_t *events, uint64_t *data, int max, int64_t timeout_ns) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n;
    static int no_pwait2 = 0; // set once if the kernel lacks epoll_pwait2; benign if two loops race to set it
    if (!no_pwait2) {
        struct timespec ts;
        ts.tv_sec = timeout_ns < 0 ? 0 : timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns < 0 ? 0 : timeout_ns % 1000000000;
        n = epoll_pwait2(epfd, evs, max, timeout_ns < 0 ? NULL : &ts, NULL);
        if (n < 0 && errno == ENOSYS) no_pwait2 = 1;
    }
    if (no_pwait2) {
        int ms = timeout_ns < 0 ? -1 : (int)((timeout_ns + 999999) / 1000000);
        n = epoll_wait(epfd, evs, max, ms);
    }
    for (int i = 0; i < n; i++) {
        events[i] = evs[i].events;
        data[i] = evs[i].data.u64;
    }
    return n;
}

int clinux_set_child_subreaper(int on) {
    return prctl(PR_SET_CHILD_SUBREAPER, on ? 1 : 0, 0, 0, 0);
}

int clinux_enable_rx_timestamps(int fd) {
    int one = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
}

long clinux_recv_stamped(int fd, void *buf, unsigned long len, int64_t *stamp_ns) {
    struct iovec iov = { buf, len };
    union { char bytes[CMSG_SPACE(sizeof(struct timespec))]; struct cmsghdr align; } control;
    struct msghdr msg = { 0 };
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof(control.bytes);
    *stamp_ns = 0;
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n <= 0) return (long)n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof(ts));
            *stamp_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        }
    }
    return (long)n;
}

int clinux_set_timer_slack(unsigned long ns) {
    return prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0);
}

long clinux_timer_slack(void) {
    return (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
}

long clinux_unsent_bytes(int fd) {
    int n = 0;
    if (ioctl(fd, SIOCOUTQ, &n) != 0) return -1;
    return (long)n;
}
#endif
