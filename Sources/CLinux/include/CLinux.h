// C calls the Swift side cannot make directly. The portable ones (SO_ERROR, TCP_NODELAY) build everywhere; the
// Linux-only ones (epoll, eventfd, accept4, prctl) build only on Linux and are used only by TapNet's Linux backend
// (Sources/TapNet/PlatformLinux.swift): a macOS build, or `-Xswiftc -DTHREEDSTAPE_POSIX_ONLY`, never calls them.
// The header forward-declares struct sockaddr instead of including <sys/socket.h>, so that
// SOCK_* names keep resolving through Glibc in release (whole-module) builds.
#ifndef TAP_CLINUX_H
#define TAP_CLINUX_H
#include <stdint.h>

int clinux_socket_error(int fd);
int clinux_set_nodelay(int fd);

#ifdef __linux__
#include <sys/epoll.h>
#include <sys/eventfd.h>

struct sockaddr;
int clinux_accept4_nonblocking(int fd, struct sockaddr *addr, unsigned int *len);
int clinux_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
int clinux_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms);
// Like clinux_epoll_wait with a nanosecond timeout (epoll_pwait2; -1 waits forever). Falls back to
// millisecond epoll_wait, rounded up, on kernels without epoll_pwait2.
int clinux_epoll_wait_ns(int epfd, uint32_t *events, uint64_t *data, int max, int64_t timeout_ns);
// prctl(PR_SET_CHILD_SUBREAPER, on): orphaned descendants are re-parented to this process (which can then reap them)
// instead of to init. 0 on success, -1 with errno set.
int clinux_set_child_subreaper(int on);
// setsockopt(SO_TIMESTAMPNS, 1): each recvmsg then carries the kernel's receive time of the data it reads. 0 on success.
int clinux_enable_rx_timestamps(int fd);
// recv(2) through recvmsg, returning also the kernel's receive time of what was read (CLOCK_REALTIME nanoseconds, from
// SCM_TIMESTAMPNS) in *stamp_ns, or 0 there when the socket gave none. Returns what recv returns (errno set on -1).
long clinux_recv_stamped(int fd, void *buf, unsigned long len, int64_t *stamp_ns);
// prctl(PR_SET_TIMERSLACK, ns) for the calling thread (ns >= 1; 0 would restore the default). 0 on success.
int clinux_set_timer_slack(unsigned long ns);
// prctl(PR_GET_TIMERSLACK): the calling thread's timer slack in nanoseconds, or -1.
long clinux_timer_slack(void);
// ioctl(SIOCOUTQ): bytes in the socket's send queue that the peer has not acknowledged, or -1 with errno set.
long clinux_unsent_bytes(int fd);
#endif
#endif
