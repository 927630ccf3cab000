/* control_fixture.h: what the control server's tests share (t_control,
   t_control_edges, t_control_alloc): the traced VM site "t:f" (its word
   WORD, BP while a breakpoint is set), and a client's side of the
   protocol: connect to a socket path ("@name": abstract), send a request
   and read its reply line, wait for the site's word. Include after
   check.h and the socket headers. */
#ifndef CONTROL_FIXTURE_H
#define CONTROL_FIXTURE_H

#define BP ((bpt_vm_word)0xB0B0)
#define WORD ((bpt_vm_word)0x101)
static bpt_vm_word code = WORD;
static bpt_func *fn;

static uint64_t arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static const bpt_vm_ops ops = { arg, NULL, NULL };

/* One call of t:f with argument a0, as a VM makes it: the breakpoint's
   handler when one is set, then the return. The word the VM executed
   (WORD, unless the breakpoint mechanism is broken). */
static inline bpt_vm_word ctl_vm_call(uint64_t a0) {
    uint64_t frame[1] = { a0 };
    bpt_vm_token t = 0;
    bpt_vm_word w = BPT_VM_FETCH(&code);
    if (w == BP) w = bpt_vm_breakpoint(fn, frame, &t);
    if (t) bpt_vm_return(t, a0 + 1);
    return w;
}

/* The socket address of path; its length for bind and connect. */
static inline socklen_t ctl_sockaddr(const char *path, struct sockaddr_un *a) {
    size_t n = strlen(path);
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path, path, n);
    if (path[0] == '@') a->sun_path[0] = '\0';
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}

/* A connected socket, or -1. */
static inline int ctl_dial(const char *path) {
    struct sockaddr_un a;
    socklen_t n = ctl_sockaddr(path, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, n) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* One reply line (a byte at a time: a stream may follow it). */
static inline void ctl_line(int fd, char *buf, size_t size) {
    size_t n = 0;
    char c;
    while (recv(fd, &c, 1, 0) == 1 && c != '\n')
        if (n + 1 < size) buf[n++] = c;
    buf[n] = '\0';
}

/* Send a request, return its last reply line in buf (INFO's F lines
   counted in *rows when rows is not NULL). */
static inline const char *ctl_ask(int fd, const char *request, char *buf, size_t size, int *rows) {
    if (send(fd, request, strlen(request), MSG_NOSIGNAL) < 0 || send(fd, "\n", 1, MSG_NOSIGNAL) < 0) {
        snprintf(buf, size, "(send failed)");
        return buf;
    }
    for (;;) {
        ctl_line(fd, buf, size);
        if (rows && !strncmp(buf, "F ", 2)) (*rows)++;
        else break;
    }
    return buf;
}

/* Until the site's word is w (a session destroyed by its client thread);
   0 after 10 s. */
static inline int word_becomes(bpt_vm_word w) {
    for (int i = 0; i < 10000; i++) {
        if (bpt_vm_word_at(fn) == w) return 1;
        usleep(1000);
    }
    return 0;
}

#endif
