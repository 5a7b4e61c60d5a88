# cython: language_level=3
"""The virtual bus's compiled reply path: a pty reader that answers without the GIL.

:class:`FastPath` owns a reader loop (:meth:`FastPath.run`, the target of a
``threading.Thread``) that enters ``nogil`` and stays there until
:meth:`FastPath.stop`.  It polls the pty master (packet mode, TIOCPKT) and a
stop pipe; for every chunk it reads, it notes the time and the host's baud
(termios2 of the master, as :func:`~servoloop.virtual_bus.pty.termios_baud`
reads it) and decides:

- FAST: the chunk is one or more complete, checksum-valid packets, each a
  Protocol 2.0 SYNC READ / READ / PING or a Protocol 2.0 / 1.0 SYNC WRITE
  whose targets are all published as eligible, at the published baud, with no
  SLOW chunk waiting and no partial packet in the engine.  The status packets
  are built here from the mirror (each target's control table as Python last
  published it, plus its status byte) and written to the master at once; a
  sync write's bytes go into the mirror so a following read sees them.
- SLOW: anything else.

Every chunk, FAST or SLOW, is queued (time, baud, previous baud, bytes, kind)
and the Python side is woken through a pipe: it feeds each chunk to the
engine in order (the engine stays the one place servo semantics live) and
sends the replies of SLOW chunks only.  The mirror is published by Python
under a pthread mutex (:meth:`FastPath.sync`, :meth:`FastPath.set_meta`);
the reader takes the same mutex once per chunk.
"""

import os

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport read, write

cdef extern from "<poll.h>" nogil:
    cdef struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd *fds, unsigned long nfds, int timeout)
    enum:
        POLLIN

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t *m, const void *attr)
    int pthread_mutex_destroy(pthread_mutex_t *m)
    int pthread_mutex_lock(pthread_mutex_t *m)
    int pthread_mutex_unlock(pthread_mutex_t *m)

cdef extern from *:
    """
    #include <sys/ioctl.h>
    /* struct termios2 of <asm/termbits.h>, declared here so <termios.h> cannot clash with it */
    struct sl_termios2 { unsigned int c_iflag, c_oflag, c_cflag, c_lflag; unsigned char c_line;
                         unsigned char c_cc[19]; unsigned int c_ispeed, c_ospeed; };
    /* the host's rate as pty.termios_baud reports it (kernel keeps c_ospeed for every rate);
       -1: unknown (None) */
    static long long sl_host_baud(int fd) {
        struct sl_termios2 t;
        if (ioctl(fd, 0x802C542AUL, &t) != 0) return -1;
        if ((t.c_cflag & 0010017) == 0010000 && t.c_ospeed == 0) return -1;   /* BOTHER, rate 0 */
        return (long long)t.c_ospeed;
    }
    """
    long long sl_host_baud(int fd) nogil

cdef enum:
    MAX_W = 6            # fast-writable registers per target
    RX_MAX = 65536
    TX_MAX = 262144

cdef enum:               # queue item kinds
    K_SLOW = 0
    K_FAST = 1
    K_CONTROL = 2        # a packet-mode status byte (host flush), no data

KIND_SLOW, KIND_FAST, KIND_CONTROL = K_SLOW, K_FAST, K_CONTROL

ctypedef struct Device:
    const uint8_t *src       # the engine's control-table bytes (owned by Python, kept alive there)
    uint8_t *mirror
    int size
    int status               # status byte of an error-free reply (alert bit when latched)
    int srl                  # Status Return Level
    int a_model, a_fw        # addresses of Model Number (2 bytes) and Firmware Version (PING)
    int bulk                 # answers a Protocol 1.0 BULK READ (MX; an AX ignores it)
    int ind_lo, ind_hi       # indirect-data span [lo, hi), lo = hi = 0 when none
    int nw
    int w_addr[MAX_W]
    int w_size[MAX_W]
    int w_signed[MAX_W]
    int64_t w_lo[MAX_W]
    int64_t w_hi[MAX_W]

ctypedef struct Item:
    double t
    long long baud
    long long prev
    int status
    int kind
    Py_ssize_t n
    uint8_t *data
    Item *next

cdef uint16_t CRC_TABLE[256]


cdef void _crc_init():
    cdef int i, j
    cdef uint16_t c
    for i in range(256):
        c = <uint16_t>(i << 8)
        for j in range(8):
            c = <uint16_t>(((c << 1) ^ 0x8005) if c & 0x8000 else (c << 1))
        CRC_TABLE[i] = c


_crc_init()


cdef inline uint16_t _crc16(const uint8_t *p, Py_ssize_t n, uint16_t crc) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        crc = <uint16_t>((crc << 8) ^ CRC_TABLE[((crc >> 8) ^ p[i]) & 0xFF])
    return crc


def crc16(data) -> int:
    """CRC-16 of Protocol 2.0 (polynomial 0x8005), as the C path computes it (tests)."""
    cdef const uint8_t[::1] v = data
    return _crc16(&v[0], v.shape[0], 0) if v.shape[0] else 0


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline int64_t _value(const uint8_t *p, int size, int signed) noexcept nogil:
    cdef uint64_t v = 0
    cdef int k
    for k in range(size - 1, -1, -1):
        v = (v << 8) | p[k]
    if signed and size < 8 and (v >> (8 * size - 1)) & 1:
        return <int64_t>v - (<int64_t>1 << (8 * size))
    return <int64_t>v


cdef class FastPath:
    """Compiled reader and reply path of one pty master (see the module docstring).

    Parameters
    ----------
    master : int
        The pty master fd (non-blocking, packet mode when ``packet``).
    notify_fd : int
        Write end of the pipe that wakes the Python main loop (non-blocking).
    packet : bool
        The master runs in TIOCPKT mode (each read starts with a status byte).
    n_devices : int
        Servos and devices that can be published (:meth:`set_source` 0..n-1).
    """

    cdef int master, notify_fd, stop_r, stop_w, packet, n
    cdef Device *dev
    cdef short idmap[3][256]          # [protocol][id] -> device, -1: not fast-eligible
    cdef int proto_ok[3]              # packets of this protocol are framed as such by the engine
    cdef long long pub_baud           # the host baud the engine runs at (-2: none published)
    cdef int enabled, partial, slow_pending
    cdef pthread_mutex_t mu
    cdef Item *head
    cdef Item *tail
    cdef Py_ssize_t queued
    cdef long long n_fast_reads, n_fast_writes, n_slow
    cdef uint8_t *rx
    cdef uint8_t *tx
    cdef object _keep                 # the Python buffers the sources point into

    def __cinit__(self, int master, int notify_fd, bint packet, int n_devices):
        self.master, self.notify_fd, self.packet, self.n = master, notify_fd, packet, n_devices
        self.stop_r, self.stop_w = os.pipe()
        os.set_blocking(self.stop_w, False)
        self.dev = <Device *>malloc(sizeof(Device) * max(n_devices, 1))
        memset(self.dev, 0, sizeof(Device) * max(n_devices, 1))
        self.rx = <uint8_t *>malloc(RX_MAX)
        self.tx = <uint8_t *>malloc(TX_MAX)
        if self.dev == NULL or self.rx == NULL or self.tx == NULL:
            raise MemoryError("virtual bus fast path: no memory for its buffers")
        memset(self.idmap, 0xFF, sizeof(self.idmap))
        self.pub_baud = -2
        self.enabled = 0
        pthread_mutex_init(&self.mu, NULL)
        self._keep = [None] * n_devices

    def __dealloc__(self):
        cdef Item *it = self.head
        cdef Item *nx
        cdef int k
        while it != NULL:
            nx = it.next
            free(it.data)
            free(it)
            it = nx
        if self.dev != NULL:
            for k in range(self.n):
                free(self.dev[k].mirror)
            free(self.dev)
        free(self.rx)
        free(self.tx)
        pthread_mutex_destroy(&self.mu)
        for fd in (self.stop_r, self.stop_w):
            try:
                os.close(fd)
            except OSError:
                pass

    # ------------------------------------------------------------------ publishing (GIL held)
    def set_source(self, int k, buf):
        """Device ``k`` reads its control table from ``buf`` (a writable buffer kept alive here)."""
        cdef uint8_t[::1] v = buf
        cdef int size = v.shape[0]
        if not 0 <= k < self.n or size <= 0:
            raise ValueError(f"fast path: device {k} out of range or empty table")
        self._keep[k] = v
        with nogil:
            pthread_mutex_lock(&self.mu)
        free(self.dev[k].mirror)
        self.dev[k].mirror = <uint8_t *>malloc(size)
        self.dev[k].src = &v[0]
        self.dev[k].size = size
        memcpy(self.dev[k].mirror, &v[0], size)
        pthread_mutex_unlock(&self.mu)

    def set_meta(self, bint enabled, baud, bint partial, protocols, idmap, devices):
        """Publish what decides FAST (under the mutex, all at once).

        Parameters
        ----------
        enabled : bool
            False: every chunk goes SLOW (faults configured, bus unplugged).
        baud : int or None
            The host rate the engine runs at; a chunk read at another rate is SLOW.
        partial : bool
            The engine holds bytes of an incomplete packet.
        protocols : iterable of int
            Protocols whose packets the engine frames as such now (both on a mixed bus).
        idmap : iterable of (protocol, id, device k)
            The fast-eligible targets.
        devices : sequence of (status, srl, ind_lo, ind_hi, a_model, a_fw, bulk, writable) per device
            ``writable``: (address, size, signed, lo, hi) of each register a sync
            write may set (the engine stores it verbatim when lo <= raw <= hi).
        """
        cdef int k, j, p, i
        rows = list(devices)
        if len(rows) != self.n:
            raise ValueError(f"fast path: {len(rows)} device rows for {self.n} devices")
        with nogil:
            pthread_mutex_lock(&self.mu)
        try:
            self.enabled = enabled
            self.pub_baud = -2 if baud is None else int(baud)
            self.partial = partial
            self.proto_ok[1] = self.proto_ok[2] = 0
            for p in protocols:
                self.proto_ok[p] = 1
            memset(self.idmap, 0xFF, sizeof(self.idmap))
            for p, i, k in idmap:
                if 0 <= k < self.n and self.dev[k].mirror != NULL:
                    self.idmap[p][i] = k
            for k in range(self.n):
                status, srl, lo, hi, a_model, a_fw, bulk, writable = rows[k]
                self.dev[k].status, self.dev[k].srl, self.dev[k].bulk = status, srl, bulk
                self.dev[k].a_model, self.dev[k].a_fw = a_model, a_fw
                self.dev[k].ind_lo, self.dev[k].ind_hi = lo, hi
                self.dev[k].nw = min(len(writable), MAX_W)
                for j in range(self.dev[k].nw):
                    a, sz, sg, wlo, whi = writable[j]
                    self.dev[k].w_addr[j], self.dev[k].w_size[j], self.dev[k].w_signed[j] = a, sz, sg
                    self.dev[k].w_lo[j], self.dev[k].w_hi[j] = wlo, whi
        finally:
            pthread_mutex_unlock(&self.mu)

    def sync(self):
        """Copy every device's table into the mirror: all of it when no chunk is queued, else all
        but the fast-writable registers (a sync write C applied, not yet fed to the engine, stays)."""
        cdef int k, j
        cdef Device *d
        with nogil:
            pthread_mutex_lock(&self.mu)
            for k in range(self.n):
                d = &self.dev[k]
                if d.mirror == NULL:
                    continue
                if self.head == NULL:
                    memcpy(d.mirror, d.src, d.size)
                else:
                    _copy_keep(d)
            pthread_mutex_unlock(&self.mu)

    def slow_done(self, bint partial):
        """A SLOW chunk was fed and answered; ``partial``: the engine now holds a partial packet."""
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.partial = partial
            if self.slow_pending > 0:
                self.slow_pending -= 1
            pthread_mutex_unlock(&self.mu)

    def set_partial(self, bint partial):
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.partial = partial
            pthread_mutex_unlock(&self.mu)

    def pop(self):
        """The oldest queued chunk ``(time, baud, prev_baud, data, status, kind)``, or None.

        ``baud`` / ``prev_baud`` None when unknown; ``data`` None for a control item.
        """
        cdef Item *it
        with nogil:
            pthread_mutex_lock(&self.mu)
            it = self.head
            if it != NULL:
                self.head = it.next
                if self.head == NULL:
                    self.tail = NULL
                self.queued -= 1
            pthread_mutex_unlock(&self.mu)
        if it == NULL:
            return None
        try:
            data = None if it.kind == K_CONTROL else PyBytes_FromStringAndSize(<char *>it.data, it.n)
            return (it.t, None if it.baud < 0 else it.baud, None if it.prev < 0 else it.prev,
                    data, it.status, it.kind)
        finally:
            free(it.data)
            free(it)

    @property
    def counts(self):
        """(fast-answered read packets, fast sync writes, slow chunks)."""
        return self.n_fast_reads, self.n_fast_writes, self.n_slow

    def stop(self):
        """Ask :meth:`run` to return (from any thread)."""
        try:
            os.write(self.stop_w, b"\0")
        except OSError:
            pass

    # ------------------------------------------------------------------ the reader
    def run(self):
        """The reader loop; returns after :meth:`stop` or when the master fails."""
        with nogil:
            self._loop()

    cdef void _loop(self) noexcept nogil:
        cdef pollfd fds[2]
        cdef long long seen = sl_host_baud(self.master)
        cdef long long baud, prev
        cdef Py_ssize_t got
        cdef double t
        cdef uint8_t one = 0
        fds[0].fd = self.master
        fds[0].events = POLLIN
        fds[1].fd = self.stop_r
        fds[1].events = POLLIN
        while True:
            fds[0].revents = fds[1].revents = 0
            if poll(fds, 2, 5) < 0:
                if errno == EINTR:
                    continue
                return
            if fds[1].revents:
                return
            prev = seen
            baud = seen = sl_host_baud(self.master)   # as early as possible: the rate the host wrote at
            if not fds[0].revents:
                continue
            t = _now()
            got = read(self.master, self.rx, RX_MAX)
            if got < 0:
                if errno == EAGAIN or errno == EINTR:
                    continue
                return
            if got == 0:
                continue
            if self.packet:
                if self.rx[0]:
                    self._enqueue(t, baud, prev, self.rx[0], K_CONTROL, NULL, 0)
                else:
                    self._chunk(t, baud, prev, self.rx + 1, got - 1)
            else:
                self._chunk(t, baud, prev, self.rx, got)
            write(self.notify_fd, &one, 1)

    cdef void _chunk(self, double t, long long baud, long long prev, const uint8_t *p,
                     Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t out = 0
        cdef int kind = K_SLOW
        pthread_mutex_lock(&self.mu)
        if (self.enabled and n > 0 and self.slow_pending == 0 and not self.partial
                and baud == self.pub_baud and prev == baud and self._check(p, n)):
            out = self._apply(p, n)
            kind = K_FAST
        else:
            self.slow_pending += 1
            self.n_slow += 1
        self._push(t, baud, prev, 0, kind, p, n)
        pthread_mutex_unlock(&self.mu)
        if out > 0:
            write(self.master, self.tx, out)    # nobody reading: lost, as on a real bus

    cdef void _enqueue(self, double t, long long baud, long long prev, int status, int kind,
                       const uint8_t *p, Py_ssize_t n) noexcept nogil:
        pthread_mutex_lock(&self.mu)
        self._push(t, baud, prev, status, kind, p, n)
        pthread_mutex_unlock(&self.mu)

    cdef void _push(self, double t, long long baud, long long prev, int status, int kind,
                    const uint8_t *p, Py_ssize_t n) noexcept nogil:
        cdef Item *it = <Item *>malloc(sizeof(Item))
        if it == NULL:
            return
        it.data = <uint8_t *>malloc(n if n > 0 else 1)
        if it.data == NULL:
            free(it)
            return
        if n > 0:
            memcpy(it.data, p, n)
        it.t, it.baud, it.prev, it.status, it.kind, it.n, it.next = t, baud, prev, status, kind, n, NULL
        if self.tail == NULL:
            self.head = self.tail = it
        else:
            self.tail.next = it
            self.tail = it
        self.queued += 1

    # ------------------------------------------------------------------ classification (mutex held)
    cdef int _check(self, const uint8_t *p, Py_ssize_t n) noexcept nogil:
        """1 when every packet of the chunk can be answered / applied here."""
        cdef Py_ssize_t i = 0, total
        while i < n:
            total = self._packet_len(p + i, n - i)
            if total <= 0 or not self._ok(p + i, total):
                return 0
            i += total
        return 1

    cdef Py_ssize_t _packet_len(self, const uint8_t *p, Py_ssize_t n) noexcept nogil:
        """Length of the complete, valid packet at ``p`` (0: not one the engine frames the same)."""
        cdef Py_ssize_t length, total, k
        cdef int s
        if n >= 10 and p[0] == 0xFF and p[1] == 0xFF and p[2] == 0xFD and p[3] == 0x00:
            if not self.proto_ok[2] or p[4] == 0xFD or p[4] == 0xFF:
                return 0
            length = p[5] | (p[6] << 8)
            total = 7 + length
            if length < 3 or length > 2048 or total > n:
                return 0
            if _crc16(p, total - 2, 0) != (p[total - 2] | (p[total - 1] << 8)):
                return 0
            for k in range(7, total - 4):      # byte stuffing in the body: the engine's business
                if p[k] == 0xFF and p[k + 1] == 0xFF and p[k + 2] == 0xFD:
                    return 0
            return total
        if n >= 6 and p[0] == 0xFF and p[1] == 0xFF:
            if not self.proto_ok[1] or p[2] == 0xFF or p[2] == 0xFD or p[3] < 2:
                return 0
            total = 4 + p[3]
            if total > n:
                return 0
            s = 0
            for k in range(2, total - 1):
                s += p[k]
            if ((~s) & 0xFF) != p[total - 1]:
                return 0
            return total
        return 0

    cdef int _ok(self, const uint8_t *p, Py_ssize_t total) noexcept nogil:
        cdef int inst, address, length, i, k, step
        cdef const uint8_t *prm
        cdef Py_ssize_t np_
        if p[2] == 0xFD:                                    # Protocol 2.0
            inst, prm, np_ = p[7], p + 8, total - 10
            if inst == 0x82:                                # SYNC READ
                if p[4] != 0xFE or np_ < 5:
                    return 0
                address, length = prm[0] | (prm[1] << 8), prm[2] | (prm[3] << 8)
                for i in range(4, np_):
                    if not self._readable(2, prm[i], address, length):
                        return 0
                return 1
            if inst == 0x02:                                # READ
                if np_ != 4 or p[4] == 0xFE:
                    return 0
                return self._readable(2, p[4], prm[0] | (prm[1] << 8), prm[2] | (prm[3] << 8))
            if inst == 0x01:                                # PING (one servo; broadcast goes slow)
                if p[4] == 0xFE:
                    return 0
                k = self.idmap[2][p[4]]
                return k >= 0 and self.dev[k].a_model >= 0 and self.dev[k].a_fw >= 0
            if inst == 0x83:                                # SYNC WRITE
                if p[4] != 0xFE or np_ < 4:
                    return 0
                return self._writable(2, prm, np_, prm[0] | (prm[1] << 8), prm[2] | (prm[3] << 8), 4)
            if inst == 0x92:                                # BULK READ: (id, address, length) each
                if p[4] != 0xFE or np_ < 5 or np_ % 5:
                    return 0
                for i in range(0, np_, 5):
                    if not self._readable(2, prm[i], prm[i + 1] | (prm[i + 2] << 8),
                                          prm[i + 3] | (prm[i + 4] << 8)):
                        return 0
                return 1
            return 0
        inst, prm, np_ = p[4], p + 5, total - 6             # Protocol 1.0
        if inst == 0x83:                                    # SYNC WRITE
            if p[2] != 0xFE or np_ < 2:
                return 0
            return self._writable(1, prm, np_, prm[0], prm[1], 2)
        if inst == 0x02:                                    # READ
            return np_ == 2 and p[2] != 0xFE and self._readable(1, p[2], prm[0], prm[1])
        if inst == 0x01:                                    # PING
            return p[2] != 0xFE and self.idmap[1][p[2]] >= 0
        if inst == 0x92:                                    # MX BULK READ: 00, then (length, id, address)
            if p[2] != 0xFE or np_ < 4 or (np_ - 1) % 3:
                return 0
            for i in range(1, np_, 3):
                k = self.idmap[1][prm[i + 1]]
                if k < 0 or not self.dev[k].bulk or not self._readable(1, prm[i + 1], prm[i + 2], prm[i]):
                    return 0
            return 1
        return 0

    cdef int _readable(self, int proto, int sid, int address, int length) noexcept nogil:
        cdef int k = self.idmap[proto][sid]
        cdef Device *d
        cdef int end = address + length, j
        if k < 0 or length <= 0:
            return 0
        d = &self.dev[k]
        if end > d.size or d.srl < 1:
            return 0
        if d.ind_hi > d.ind_lo and address < d.ind_hi and end > d.ind_lo:
            return 0
        return 1

    cdef int _writable(self, int proto, const uint8_t *prm, Py_ssize_t np_, int address, int length,
                       int first) noexcept nogil:
        cdef int step = length + 1, k, j, hit
        cdef Py_ssize_t i
        cdef Device *d
        cdef int64_t v
        if length <= 0 or np_ <= first or (np_ - first) % step:
            return 0
        i = first
        while i < np_:
            k = self.idmap[proto][prm[i]]
            if k < 0:
                return 0
            d = &self.dev[k]
            hit = 0
            for j in range(d.nw):
                if d.w_addr[j] == address and d.w_size[j] == length:
                    v = _value(prm + i + 1, length, d.w_signed[j])
                    if d.w_lo[j] <= v <= d.w_hi[j]:
                        hit = 1
                    break
            if not hit:
                return 0
            i += step
        return 1

    cdef Py_ssize_t _apply(self, const uint8_t *p, Py_ssize_t n) noexcept nogil:
        """Answer / apply every packet of a checked chunk; the replies' bytes in ``tx``."""
        cdef Py_ssize_t i = 0, total, out = 0, np_, j
        cdef int inst, address, length, step, k
        cdef const uint8_t *prm
        while i < n:
            total = self._packet_len(p + i, n - i)
            if p[i + 2] == 0xFD:
                inst, prm, np_ = p[i + 7], p + i + 8, total - 10
                if inst == 0x82:
                    address, length = prm[0] | (prm[1] << 8), prm[2] | (prm[3] << 8)
                    for j in range(4, np_):
                        out = self._status2(out, prm[j], address, length)
                    self.n_fast_reads += 1
                elif inst == 0x02:
                    out = self._status2(out, p[i + 4], prm[0] | (prm[1] << 8), prm[2] | (prm[3] << 8))
                    self.n_fast_reads += 1
                elif inst == 0x01:
                    out = self._ping2(out, p[i + 4])
                    self.n_fast_reads += 1
                elif inst == 0x92:
                    for j in range(0, np_, 5):
                        out = self._status2(out, prm[j], prm[j + 1] | (prm[j + 2] << 8),
                                            prm[j + 3] | (prm[j + 4] << 8))
                    self.n_fast_reads += 1
                else:
                    self._store(2, prm, np_, prm[0] | (prm[1] << 8), prm[2] | (prm[3] << 8), 4)
                    self.n_fast_writes += 1
            else:
                inst, prm, np_ = p[i + 4], p + i + 5, total - 6
                if inst == 0x83:
                    self._store(1, prm, np_, prm[0], prm[1], 2)
                    self.n_fast_writes += 1
                else:
                    if inst == 0x02:
                        out = self._status1(out, p[i + 2], prm[0], prm[1])
                    elif inst == 0x01:
                        out = self._status1(out, p[i + 2], 0, 0)
                    else:
                        for j in range(1, np_, 3):
                            out = self._status1(out, prm[j + 1], prm[j + 2], prm[j])
                    self.n_fast_reads += 1
            i += total
        return out

    cdef void _store(self, int proto, const uint8_t *prm, Py_ssize_t np_, int address, int length,
                     int first) noexcept nogil:
        cdef Py_ssize_t i = first
        while i < np_:
            memcpy(self.dev[self.idmap[proto][prm[i]]].mirror + address, prm + i + 1, length)
            i += length + 1

    cdef Py_ssize_t _status2(self, Py_ssize_t out, int sid, int address, int length) noexcept nogil:
        cdef Device *d = &self.dev[self.idmap[2][sid]]
        return _emit2(self.tx, out, sid, d.status, d.mirror + address, length)

    cdef Py_ssize_t _status1(self, Py_ssize_t out, int sid, int address, int length) noexcept nogil:
        return _emit1(self.tx, out, sid, &self.dev[self.idmap[1][sid]], address, length)

    cdef Py_ssize_t _ping2(self, Py_ssize_t out, int sid) noexcept nogil:
        # the engine's ping reply: Model Number (2 bytes) and Firmware Version
        cdef Device *d = &self.dev[self.idmap[2][sid]]
        cdef uint8_t data[3]
        data[0], data[1], data[2] = d.mirror[d.a_model], d.mirror[d.a_model + 1], d.mirror[d.a_fw]
        return _emit2(self.tx, out, sid, d.status, data, 3)


cdef Py_ssize_t _emit1(uint8_t *tx, Py_ssize_t out, int sid, Device *d, int address,
                       int length) noexcept nogil:
    """A Protocol 1.0 status packet at ``tx + out``: FF FF ID LEN ERR DATA CHECKSUM; the new end."""
    cdef uint8_t *q
    cdef int n = length + 2, s, k
    if out + length + 6 > TX_MAX:
        return out
    q = tx + out
    q[0], q[1], q[2], q[3], q[4] = 0xFF, 0xFF, sid, n, d.status
    if length:
        memcpy(q + 5, d.mirror + address, length)
    s = sid + n + d.status
    for k in range(length):
        s += q[5 + k]
    q[5 + length] = (~s) & 0xFF
    return out + length + 6


cdef Py_ssize_t _emit2(uint8_t *tx, Py_ssize_t out, int sid, int status, const uint8_t *data,
                       int length) noexcept nogil:
    """A Protocol 2.0 status packet at ``tx + out`` (byte-stuffed as protocol.build_status); the new end."""
    cdef uint8_t *q
    cdef int n, k, m = 9
    cdef uint16_t crc
    if out + 2 * length + 11 > TX_MAX:
        return out
    q = tx + out
    q[0], q[1], q[2], q[3], q[4] = 0xFF, 0xFF, 0xFD, 0x00, sid
    q[7], q[8] = 0x55, status
    for k in range(length):
        # byte stuffing (protocol.stuff): FD after every FF FF FD run; the error byte is never FF
        q[m] = data[k]
        m += 1
        if data[k] == 0xFD and q[m - 2] == 0xFF and q[m - 3] == 0xFF:
            q[m] = 0xFD
            m += 1
    n = m - 7 + 2                                       # instruction .. CRC
    q[5], q[6] = n & 0xFF, n >> 8
    crc = _crc16(q, m, 0)
    q[m], q[m + 1] = crc & 0xFF, crc >> 8
    return out + m + 2


cdef inline void _copy_keep(Device *d) noexcept nogil:
    """Copy the table but its fast-writable registers (those the mirror may hold ahead)."""
    cdef int a = 0, j, lo, hi, best
    while a < d.size:
        best = d.size
        hi = -1
        for j in range(d.nw):
            lo = d.w_addr[j]
            if lo >= a and lo < best:
                best, hi = lo, lo + d.w_size[j]
        if best > a:
            memcpy(d.mirror + a, d.src + a, best - a)
        if hi < 0:
            return
        a = hi
