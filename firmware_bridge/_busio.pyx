# cython: language_level=3
"""The bus hot path: write a packet to the fd and collect the replies, GIL released.

One receive loop (:func:`_rx_loop`) serves every transaction: it reads the
descriptor with ``ppoll`` against an absolute deadline on CLOCK_MONOTONIC,
finds packet headers, resynchronises byte by byte on garbage, checks the
checksum/CRC and files each good reply under its servo's slot.  Python
objects are touched only to call the ``on_after_write`` hook.

:class:`GroupIO` is one preallocated read (sync read on Protocol 2.0, one
read per servo on 1.0) plus its SI conversion, in two halves a read-ahead
loop calls a tick apart (``request()`` writes the instruction, ``collect()``
takes and decodes the replies; ``read()`` is both); :class:`GroupWriteIO` is one
preallocated sync write.  :func:`transact` is the general, allocating form
for everything off the hot path.
"""

cimport cython
from libc.errno cimport EAGAIN, EINTR, errno
from libc.math cimport NAN, isfinite, llround
from libc.stdint cimport int64_t, uint8_t, uint16_t
from libc.string cimport memcpy, memmove, memset

import numpy as np

from servoloop.firmware_bridge._codec cimport (
    PARSE_CHECKSUM, PARSE_NEED_MORE, PARSE_OK, ParseResult, encode_c, find_header_c, parse_c,
)

__all__ = ["GroupIO", "GroupWriteIO", "transact", "monotonic", "SLOT_PENDING", "SLOT_OK",
           "SLOT_CHECKSUM", "SLOT_MALFORMED", "SLOT_TIMEOUT", "SLOT_IMPLAUSIBLE"]

cdef enum:
    S_PENDING = 0
    S_OK = 1
    S_CHECKSUM = 2
    S_MALFORMED = 3
    S_TIMEOUT = 4
    S_IMPLAUSIBLE = 5    # a good checksum, but a position no servo can reach in the time

SLOT_PENDING = S_PENDING
SLOT_OK = S_OK
SLOT_CHECKSUM = S_CHECKSUM
SLOT_MALFORMED = S_MALFORMED
SLOT_TIMEOUT = S_TIMEOUT
SLOT_IMPLAUSIBLE = S_IMPLAUSIBLE


cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk, timespec* ts)
    int CLOCK_MONOTONIC

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int POLLIN
    int POLLOUT
    int POLLERR
    int POLLHUP
    int POLLNVAL
    ctypedef unsigned long nfds_t
    int ppoll(pollfd* fds, nfds_t nfds, const timespec* tmo, const void* sigmask)

cdef extern from "<unistd.h>" nogil:
    ssize_t c_read "read"(int fd, void* buf, size_t count)
    ssize_t c_write "write"(int fd, const void* buf, size_t count)

cdef extern from "<termios.h>" nogil:
    int tcflush(int fd, int queue_selector)
    int TCIFLUSH


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


def monotonic():
    """CLOCK_MONOTONIC in seconds (the clock every deadline here uses)."""
    return _now()


cdef int _wait(int fd, short events, double deadline) noexcept nogil:
    """1 when ready, 0 on deadline, -1 on a dead descriptor (hang-up, error)."""
    cdef pollfd p
    cdef timespec tmo
    cdef double left
    cdef int rc
    while True:
        left = deadline - _now()
        if left <= 0:
            left = 0
        tmo.tv_sec = <time_t>left
        tmo.tv_nsec = <long>((left - <double>tmo.tv_sec) * 1e9)
        p.fd = fd
        p.events = events
        p.revents = 0
        rc = ppoll(&p, 1, &tmo, NULL)
        if rc < 0:
            if errno == EINTR:
                continue
            return -1
        if rc == 0:
            return 0
        if p.revents & events:
            return 1
        if p.revents & (POLLERR | POLLNVAL | POLLHUP):
            return -1
        return 0


cdef int _write_all(int fd, const uint8_t* buf, Py_ssize_t n, double deadline) noexcept nogil:
    """0 ok, 1 deadline, -1 port error."""
    cdef Py_ssize_t done = 0
    cdef ssize_t k
    cdef int w
    while done < n:
        k = c_write(fd, buf + done, n - done)
        if k > 0:
            done += k
            continue
        if k < 0 and errno != EAGAIN and errno != EINTR:
            return -1
        w = _wait(fd, POLLOUT, deadline)
        if w == 0:
            return 1
        if w < 0:
            return -1
    return 0


cdef struct RxState:
    Py_ssize_t rx_len
    int remaining        # slots still pending
    long garbage_bytes   # bytes skipped while resynchronising
    int port_error


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int _rx_loop(int fd, int protocol, double deadline,
                  uint8_t* rx, Py_ssize_t rx_cap, uint8_t* scratch, Py_ssize_t scratch_cap,
                  const int* id_to_slot, int* slot_code, int* slot_err, int* slot_n,
                  uint8_t* slot_data, Py_ssize_t stride, Py_ssize_t max_total,
                  RxState* st, bint unstuff=1, const Py_ssize_t* tag_len=NULL, int ntags=0,
                  int cur=0, int64_t* slot_stale=NULL,
                  const Py_ssize_t* slot_base=NULL) noexcept nogil:
    """Read and file status packets until every expected slot is filled or the deadline.

    ``id_to_slot[256]`` maps a servo id to its slot (-1 = not expected);
    a good reply for a pending slot stores error byte, parameter count and
    up to ``stride`` parameter bytes.  Packets longer than ``max_total``
    are treated as garbage (a bit error in the length field must not make
    us wait for 64 KiB).

    ``tag_len[ntags]``: the parameter counts of the request variants (see
    :class:`GroupIO`); a good reply whose count is another variant's answers
    an earlier request: it is discarded and counted in ``slot_stale``.
    ``slot_base[slot]`` (NULL: 0) is added to every variant's count for that
    slot: a bulk read asks each device for its own length.
    """
    cdef ParseResult res
    cdef Py_ssize_t pos, h, total
    cdef ssize_t k
    cdef int rc, slot, w, t
    cdef bint stale
    cdef Py_ssize_t base
    cdef int hdr = 2 if protocol == 1 else 4
    while st.remaining > 0:
        # parse what is buffered
        pos = 0
        while True:
            h = find_header_c(rx, st.rx_len, protocol, pos)
            if h < 0:
                # keep a possible partial header at the end
                h = st.rx_len - (hdr - 1) if st.rx_len >= hdr - 1 else 0
                if h < pos:
                    h = pos
                st.garbage_bytes += h - pos
                pos = h
                break
            st.garbage_bytes += h - pos
            pos = h
            if protocol == 2 and st.rx_len - pos >= 7:
                total = 7 + (rx[pos + 5] | (rx[pos + 6] << 8))
                if total > max_total:
                    pos += 1
                    st.garbage_bytes += 1
                    continue
            elif protocol == 1 and st.rx_len - pos >= 4:
                total = 4 + rx[pos + 3]
                if total > max_total:
                    pos += 1
                    st.garbage_bytes += 1
                    continue
            rc = parse_c(rx + pos, st.rx_len - pos, protocol, 1, scratch, scratch_cap, &res, unstuff)
            if rc == PARSE_NEED_MORE:
                break
            if rc == PARSE_OK:
                slot = id_to_slot[res.servo_id]
                stale = 0
                base = slot_base[slot] if (slot_base != NULL and slot >= 0) else 0
                if slot >= 0 and ntags > 1 and <Py_ssize_t>res.nparams != base + tag_len[cur]:
                    for t in range(ntags):
                        if <Py_ssize_t>res.nparams == base + tag_len[t]:
                            stale = 1
                if stale:
                    # the late answer to an earlier request: never this request's value
                    slot_stale[slot] += 1
                    st.garbage_bytes += res.consumed
                elif slot >= 0 and slot_code[slot] != S_OK:
                    if slot_code[slot] == S_PENDING:
                        st.remaining -= 1
                    slot_code[slot] = S_OK
                    slot_err[slot] = res.code
                    slot_n[slot] = <int>res.nparams
                    memcpy(slot_data + slot * stride, scratch,
                           res.nparams if res.nparams < stride else stride)
                else:
                    st.garbage_bytes += res.consumed
                pos += res.consumed
                continue
            # a corrupt packet: charge it to the servo its id byte names, then resync
            if rc == PARSE_CHECKSUM or res.consumed > 0:
                slot = id_to_slot[res.servo_id & 0xFF]
                if slot >= 0 and slot_code[slot] == S_PENDING:
                    slot_code[slot] = S_CHECKSUM if rc == PARSE_CHECKSUM else S_MALFORMED
            pos += 1
            st.garbage_bytes += 1
        if pos > 0:
            memmove(rx, rx + pos, st.rx_len - pos)
            st.rx_len -= pos
        if st.remaining <= 0:
            break
        if st.rx_len >= rx_cap:
            # full of garbage that never parsed: drop it
            st.garbage_bytes += st.rx_len
            st.rx_len = 0
        w = _wait(fd, POLLIN, deadline)
        if w == 0:
            break
        if w < 0:
            st.port_error = 1
            break
        k = c_read(fd, rx + st.rx_len, rx_cap - st.rx_len)
        if k > 0:
            st.rx_len += k
        elif k == 0 or (errno != EAGAIN and errno != EINTR):
            st.port_error = 1
            break
    return 0


cdef inline int64_t _get_le(const uint8_t* p, int size) noexcept nogil:
    if size == 1:
        return p[0]
    if size == 2:
        return p[0] | (p[1] << 8)
    return <int64_t>(<unsigned int>p[0] | (<unsigned int>p[1] << 8) | (<unsigned int>p[2] << 16)
                     | (<unsigned int>p[3] << 24))


cdef inline int64_t _decode(int64_t wire, int size, int enc) noexcept nogil:
    cdef int bits = 8 * size
    if enc == 1:      # two's complement
        if wire >> (bits - 1):
            return wire - (<int64_t>1 << bits)
        return wire
    if enc == 2:      # sign-magnitude, bit 10
        if wire & 1024:
            return -(wire & 1023)
        return wire & 1023
    return wire


cdef class GroupIO:
    """Preallocated group read: transactions, reply slots, and the SI conversion.

    Parameters
    ----------
    protocol : 1 or 2
    ids : sequence of int, the servos in slot order
    tx : bytes, every instruction packet of every request variant back to back
    tx_splits : list of (tx_start, tx_len, first_slot, n_slots, timeout_s): one
        write + receive per entry (one entry for a sync read; one per servo
        for Protocol 1.0); ``ntags`` variants of equal length, one after the other
    data_len : parameter bytes per reply the fields are decoded from
    fields : list of (offset, size, encoding 0/1/2, zero_raw, scale) per value row;
        offset, zero_raw and scale may be sequences of one value per slot (mixed
        models; a bulk read: offset -1 where the row is not that slot's, its value
        stays NaN)
    slot_len : sequence of int (n,) or None
        A BULK READ: the bytes each slot's device is asked for in variant 0
        (devices differ); variant ``v`` asks each for ``v`` more and ``tag_len``
        is then ``0..ntags-1``.  None: every slot reads ``data_len`` (sync read).
    slot_shift : sequence (ntags, n) of int, or None
        A bulk read: bytes variant ``v`` asks slot ``i``'s device for *before* its
        block (a device whose table ends right after the block grows its request
        at the front instead); the fields then sit that much further in.
    ntags : int
        Request variants.  Variant ``v`` reads ``data_len + v`` bytes, so its
        replies carry ``tag_len[v]`` parameter bytes: a reply of another
        variant is the late answer to an earlier request (stale).  The
        variant changes after every exchange that left bytes unaccounted
        for, so a late reply is never taken for a fresh one unless it is
        ``ntags`` dirty requests late (and the flush before every request
        after a dirty one drops what arrived before it).
    tag_len : sequence of int (ntags,), the parameter count of a reply per variant
    pos_field : int
        Row of ``fields`` that is the present position (-1: none); with
        ``max_rate`` > 0 a position that moved faster than ``max_rate[i]``
        rad/s (plus ``abs_tol`` rad) since the last good read is a corrupted
        read (slot code S_IMPLAUSIBLE, NaN).  Three mutually consistent
        implausible reads in a row are taken as the new truth (a servo
        rebooted in multi-turn, moved by hand while we were not looking).
    """

    cdef public int fd
    cdef int protocol, n, nfields, ntx
    cdef Py_ssize_t data_len, max_total
    cdef uint8_t[::1] tx, rx, scratch, data
    cdef int[::1] id_to_slot, slot_code, slot_err, slot_n
    cdef Py_ssize_t[::1] tx_start, tx_len
    cdef int[::1] tx_first, tx_count
    cdef double[::1] tx_timeout
    cdef int[:, ::1] f_off          # (nfields, n): -1 = not this slot's row (bulk read)
    cdef int[::1] f_size, f_enc
    cdef Py_ssize_t[::1] slot_base   # (n,) bytes asked of each slot beyond the variant's
    cdef Py_ssize_t[:, ::1] slot_shift  # (ntags, n) bytes asked before the block (bulk read)
    cdef int64_t[:, ::1] f_zero      # (nfields, n): models may differ in scale and zero
    cdef double[:, ::1] f_scale
    cdef public object out          # float64 (nfields, n)
    cdef double[:, ::1] out_v
    cdef public object on_after_write
    cdef public long garbage_bytes
    cdef public int port_error
    cdef public object ok_counts     # int64 (n,): good replies per slot since creation
    cdef int64_t[::1] ok_v
    cdef int64_t[::1] dirty          # shared with the Bus: 1 = stale bytes may be pending
    cdef int ntags, cur, ntx_all, unclean
    cdef Py_ssize_t stride
    cdef Py_ssize_t[::1] tag_len
    cdef public object stale_counts  # int64 (n,): late replies discarded per slot
    cdef int64_t[::1] stale_v
    cdef public object implausible_counts  # int64 (n,): positions rejected as impossible
    cdef int64_t[::1] impl_v
    cdef int pos_field
    cdef double abs_tol, t_slack
    cdef double[::1] max_rate, last_pos, last_t, cand_pos, cand_t
    cdef int[::1] cand_n
    cdef int fast                    # Fast Sync Read: one reply packet from id 0xFE
    cdef Py_ssize_t fast_len
    cdef uint8_t[::1] fastbuf
    cdef int[::1] ids_v, f_i2s, f_code, f_err, f_n
    cdef RxState rst                 # one request's receive state, from request() to collect()
    cdef double req_deadline         # the outstanding exchange's reply deadline (CLOCK_MONOTONIC)
    cdef int req_state, last_bad     # see ``requested``; the settled request's result

    def __init__(self, int fd, int protocol, ids, bytes tx, tx_splits, int data_len, fields,
                 on_after_write=None, dirty=None, bint fast=False, int ntags=1, tag_len=None,
                 int pos_field=-1, max_rate=None, double abs_tol=0.05, slot_len=None,
                 slot_shift=None):
        self.fd = fd
        self.protocol = protocol
        self.n = len(ids)
        self.data_len = data_len
        self.tx = bytearray(tx)
        self.ntags = max(1, ntags)
        self.cur = 0
        self.unclean = 0
        self.ntx_all = len(tx_splits)
        self.ntx = len(tx_splits) // self.ntags
        self.slot_base = np.zeros(len(ids), dtype=np.intp)
        if slot_len is not None:
            self.slot_base = np.array(list(slot_len), dtype=np.intp)
            data_len = int(max(slot_len))
            self.data_len = data_len
        self.slot_shift = np.zeros((self.ntags, len(ids)), dtype=np.intp)
        if slot_shift is not None:
            self.slot_shift = np.array(slot_shift, dtype=np.intp).reshape(self.ntags, len(ids))
        self.stride = data_len + self.ntags - 1
        if tag_len is None:
            tag_len = [data_len + v for v in range(self.ntags)]
        self.tag_len = np.array(list(tag_len), dtype=np.intp)
        self.tx_start = np.array([s[0] for s in tx_splits], dtype=np.intp)
        self.tx_len = np.array([s[1] for s in tx_splits], dtype=np.intp)
        self.tx_first = np.array([s[2] for s in tx_splits], dtype=np.intc)
        self.tx_count = np.array([s[3] for s in tx_splits], dtype=np.intc)
        self.tx_timeout = np.array([s[4] for s in tx_splits], dtype=np.float64)
        # stuffing can add a third; status header 11 bytes (P2) or 6 (P1)
        self.max_total = 11 + self.stride + self.stride // 3 + 2
        cap = max(4096, 4 * self.n * self.max_total)
        self.rx = bytearray(cap)
        self.scratch = bytearray(self.max_total + 16)
        self.data = bytearray(max(1, self.n * self.stride))
        self.id_to_slot = np.full(256, -1, dtype=np.intc)
        self.slot_code = np.zeros(self.n, dtype=np.intc)
        self.slot_err = np.zeros(self.n, dtype=np.intc)
        self.slot_n = np.zeros(self.n, dtype=np.intc)
        self.nfields = len(fields)
        self.f_off = np.array([np.broadcast_to(np.asarray(f[0], dtype=np.intc), (self.n,))
                               for f in fields], dtype=np.intc).reshape(len(fields), self.n)
        self.f_size = np.array([f[1] for f in fields], dtype=np.intc)
        self.f_enc = np.array([f[2] for f in fields], dtype=np.intc)
        self.f_zero = np.array([np.broadcast_to(np.asarray(f[3], dtype=np.int64), (self.n,))
                                for f in fields], dtype=np.int64).reshape(len(fields), self.n)
        self.f_scale = np.array([np.broadcast_to(np.asarray(f[4], dtype=np.float64), (self.n,))
                                 for f in fields], dtype=np.float64).reshape(len(fields), self.n)
        self.out = np.full((self.nfields, self.n), np.nan)
        self.out_v = self.out
        self.on_after_write = on_after_write
        self.garbage_bytes = 0
        self.port_error = 0
        self.ids_v = np.array(list(ids), dtype=np.intc)
        self.fast = fast
        # after the status error byte (servo 1's): ID1 D1 CRC1 ERR2 ID2 D2 CRC2 ... IDn Dn
        self.fast_len = self.n * (self.stride + 4) - 3 if fast else 0
        self.fastbuf = bytearray(self.fast_len + 16)
        self.f_i2s = np.full(256, -1, dtype=np.intc)
        self.f_i2s[0xFE] = 0
        self.f_code = np.zeros(1, dtype=np.intc)
        self.f_err = np.zeros(1, dtype=np.intc)
        self.f_n = np.zeros(1, dtype=np.intc)
        if fast:
            self.max_total = 8 + self.n * (self.stride + 4)
            self.scratch = bytearray(self.max_total + 16)
        self.ok_counts = np.zeros(self.n, dtype=np.int64)
        self.ok_v = self.ok_counts
        self.stale_counts = np.zeros(self.n, dtype=np.int64)
        self.stale_v = self.stale_counts
        self.implausible_counts = np.zeros(self.n, dtype=np.int64)
        self.impl_v = self.implausible_counts
        self.dirty = dirty if dirty is not None else np.ones(1, dtype=np.int64)
        self.pos_field = pos_field if max_rate is not None else -1
        self.max_rate = np.array(np.broadcast_to(np.asarray(
            max_rate if max_rate is not None else 0.0, dtype=np.float64), (self.n,)))
        self.abs_tol = abs_tol
        # the servo samples somewhere inside an exchange: allow one exchange of slack
        self.t_slack = float(sum(s[4] for s in tx_splits[:self.ntx]))
        self.last_pos = np.zeros(self.n)
        self.last_t = np.zeros(self.n)
        self.cand_pos = np.zeros(self.n)
        self.cand_t = np.zeros(self.n)
        self.cand_n = np.zeros(self.n, dtype=np.intc)

    def reset_plausibility(self):
        """Forget the last good positions: the next read is taken as it is."""
        self.last_t[:] = 0.0
        self.cand_n[:] = 0

    @property
    def tag(self):
        """The request variant in use (0..ntags-1)."""
        return self.cur

    def follow(self, GroupIO other):
        """Take over ``other``'s request-variant rotation (variant in use, and whether its last
        exchange left bytes behind): two readers used in turn on one bus (a tick's read and its
        wider twin) then change variant as one reader would, so a late reply to the one is
        not taken for the other's where their variants ask the same lengths."""
        self.cur = other.cur % self.ntags
        self.unclean = other.unclean

    def set_slots(self, ids):
        """(Re)map servo ids to slots; call after construction."""
        cdef int i
        self.id_to_slot[:] = -1
        for i, sid in enumerate(ids):
            self.id_to_slot[sid] = i

    @property
    def codes(self):
        return np.asarray(self.slot_code)

    @property
    def errors(self):
        return np.asarray(self.slot_err)

    @property
    def counts(self):
        return np.asarray(self.slot_n)

    @property
    def raw(self):
        return np.asarray(self.data).reshape(self.n, self.data_len)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef void _split_fast(self) noexcept nogil:
        """Deal the one Fast Sync Read reply out to the per-servo slots."""
        cdef int i, code = self.f_code[0]
        cdef Py_ssize_t base, L = self.data_len, stride = self.data_len + self.cur + 4
        if code == S_OK and self.f_n[0] != self.tag_len[self.cur]:
            code = S_MALFORMED
        for i in range(self.n):
            if code != S_OK:
                self.slot_code[i] = S_TIMEOUT if code == S_PENDING else code
                continue
            base = i * stride - 1
            if self.fastbuf[base + 1] != self.ids_v[i]:
                self.slot_code[i] = S_MALFORMED
                continue
            self.slot_code[i] = S_OK
            self.slot_err[i] = self.f_err[0] if i == 0 else self.fastbuf[base]
            self.slot_n[i] = <int>(L + self.cur)
            memcpy(&self.data[i * self.stride], &self.fastbuf[base + 2], L)

    def read(self):
        """One group read: returns the number of slots that are not OK (-1: port error).

        Fills ``out`` (SI values; NaN for every slot not OK or with a
        non-zero error byte), and ``codes``/``errors``/``counts`` per slot.
        The same as :meth:`request` then :meth:`collect`.
        """
        self.request()
        return self.collect()

    @property
    def requested(self):
        """0: no request outstanding; 1: a request is on the wire, its replies not yet taken;
        2: its replies were taken (:meth:`settle`), :meth:`collect` returns their result."""
        return self.req_state

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def request(self):
        """Send the read's (first) instruction and return: 0, or -1 on a port error
        (:meth:`collect` then returns -1 too).  The replies' deadline is the reply
        timeout counted from now.

        A request still outstanding is settled first (its result is then overwritten).
        """
        cdef int w
        if self.req_state == 1:
            self.settle()
        self.rst.rx_len = 0
        self.rst.garbage_bytes = 0
        self.rst.port_error = 0
        memset(&self.slot_code[0], 0, self.n * sizeof(int))
        if self.unclean and self.ntags > 1:
            # replies to the last request may still be on their way: ask differently
            self.cur = (self.cur + 1) % self.ntags
        self.req_state = 1
        w = self._send(self.cur * self.ntx, 0)
        if w != 0:
            self.rst.port_error = 1
            return -1
        if self.on_after_write is not None:
            self.on_after_write()
        return 0

    cdef int _send(self, int k, int kk) noexcept:
        """Write exchange ``k`` (``kk``-th of this request); sets ``req_deadline``."""
        cdef int w
        with nogil:
            # a clean previous exchange leaves nothing behind: skip the flush syscall
            if self.dirty[0] or kk > 0:
                tcflush(self.fd, TCIFLUSH)
            self.dirty[0] = 1
            self.rst.rx_len = 0
            self.req_deadline = _now() + self.tx_timeout[k]
            w = _write_all(self.fd, &self.tx[self.tx_start[k]], self.tx_len[k], self.req_deadline)
        return w

    def collect(self):
        """The replies of the outstanding :meth:`request` (waiting for them up to its deadline),
        decoded as :meth:`read` does; returns the slots not OK (-1: port error).

        Raises
        ------
        RuntimeError
            No request was made since the last collect (a caller's bug).
        """
        if self.req_state == 0:
            raise RuntimeError("GroupIO.collect: no request outstanding")
        if self.req_state == 1:
            self.settle()
        self.req_state = 0
        return self.last_bad

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def poll(self, double until):
        """Take the outstanding request's replies as they come, until every one is in or
        ``until`` (s, CLOCK_MONOTONIC) has passed, whichever is first: 1 when they are all
        in (decoded as :meth:`settle` does; :meth:`collect` returns them), 0 when some are
        still owed (the request stays outstanding, what came is kept: a later :meth:`poll`,
        :meth:`settle` or :meth:`collect` goes on from there).  Nothing outstanding: 1.

        Only a one-exchange read waits here (Protocol 2.0 sync / bulk read, not Fast Sync
        Read); any other is settled at once.  ``until`` is not capped by the reply deadline:
        whether a reply still owed is late or lost is the caller's to judge."""
        cdef int i, first, last
        if self.req_state != 1:
            return 1
        if self.ntx != 1 or self.fast:
            self.settle()
            return 1
        first = self.tx_first[self.cur]
        last = first + self.tx_count[self.cur]
        self.rst.remaining = 0
        for i in range(first, last):
            if self.slot_code[i] == S_PENDING:
                self.rst.remaining += 1
        if self.rst.remaining > 0 and not self.rst.port_error:
            with nogil:
                _rx_loop(self.fd, self.protocol, until, &self.rx[0], self.rx.shape[0],
                         &self.scratch[0], self.scratch.shape[0], &self.id_to_slot[0],
                         &self.slot_code[0], &self.slot_err[0], &self.slot_n[0], &self.data[0],
                         self.stride, self.max_total, &self.rst, 1, &self.tag_len[0], self.ntags,
                         self.cur, &self.stale_v[0], &self.slot_base[0])
        if self.rst.remaining > 0 and not self.rst.port_error:
            return 0
        self.settle()
        return 1

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def settle(self):
        """Take the outstanding request's replies off the wire now and decode them (into
        ``out`` and the slot codes); :meth:`collect` then returns the result without waiting.
        Nothing outstanding: no-op.  Protocol 1.0's further per-servo exchanges are made here."""
        cdef int k, i, f, bad = 0, w, kk
        cdef double tnow
        cdef uint8_t* p
        cdef int64_t v
        cdef Py_ssize_t want
        cdef int64_t fstale = 0
        if self.req_state != 1:
            return
        self.req_state = 2
        want = self.tag_len[self.cur]
        for kk in range(self.ntx):
            if self.rst.port_error:
                break
            k = self.cur * self.ntx + kk
            if kk > 0:
                w = self._send(k, kk)
                if w != 0:
                    self.rst.port_error = 1
                    break
                if self.on_after_write is not None:
                    self.on_after_write()
            # slots already filled by :meth:`poll` are not waited for again
            self.rst.remaining = 0
            for i in range(self.tx_first[k], self.tx_first[k] + self.tx_count[k]):
                if self.slot_code[i] == S_PENDING:
                    self.rst.remaining += 1
            if self.fast:
                self.rst.remaining = 1
                self.f_code[0] = S_PENDING
                with nogil:
                    _rx_loop(self.fd, self.protocol, self.req_deadline, &self.rx[0], self.rx.shape[0],
                             &self.scratch[0], self.scratch.shape[0], &self.f_i2s[0],
                             &self.f_code[0], &self.f_err[0], &self.f_n[0], &self.fastbuf[0],
                             self.fastbuf.shape[0], self.max_total, &self.rst, 0, &self.tag_len[0],
                             self.ntags, self.cur, &fstale)
                    self._split_fast()
                    if fstale:
                        # one packet answers for every servo: each saw a stale reply
                        for i in range(self.n):
                            self.stale_v[i] += fstale
                        fstale = 0
                continue
            with nogil:
                _rx_loop(self.fd, self.protocol, self.req_deadline, &self.rx[0], self.rx.shape[0],
                         &self.scratch[0], self.scratch.shape[0], &self.id_to_slot[0],
                         &self.slot_code[0], &self.slot_err[0], &self.slot_n[0], &self.data[0],
                         self.stride, self.max_total, &self.rst, 1, &self.tag_len[0], self.ntags,
                         self.cur, &self.stale_v[0], &self.slot_base[0])
        self.garbage_bytes += self.rst.garbage_bytes
        self.port_error = self.rst.port_error
        if self.rst.port_error:
            self.unclean = 1
            self.last_bad = -1
            return
        if self.fast:
            want = self.data_len + self.cur   # _split_fast filed each servo's share
        with nogil:
            tnow = _now()
            for i in range(self.n):
                if self.slot_code[i] == S_PENDING:
                    self.slot_code[i] = S_TIMEOUT
                if (self.slot_code[i] != S_OK or self.slot_err[i] != 0
                        or self.slot_n[i] != want + self.slot_base[i]):
                    bad += 1
                    for f in range(self.nfields):
                        self.out_v[f, i] = NAN
                    continue
                p = &self.data[i * self.stride + self.slot_shift[self.cur, i]]
                for f in range(self.nfields):
                    if self.f_off[f, i] < 0:
                        continue        # a bulk read: another device's row
                    v = _decode(_get_le(p + self.f_off[f, i], self.f_size[f]), self.f_size[f],
                                self.f_enc[f])
                    self.out_v[f, i] = (v - self.f_zero[f, i]) * self.f_scale[f, i]
                if (self.pos_field >= 0 and self.max_rate[i] > 0.0
                        and not self._plausible(i, tnow)):
                    self.slot_code[i] = S_IMPLAUSIBLE
                    self.impl_v[i] += 1
                    bad += 1
                    for f in range(self.nfields):
                        self.out_v[f, i] = NAN
                    continue
                self.ok_v[i] += 1
            if bad == 0 and self.rst.rx_len == 0 and self.rst.garbage_bytes == 0:
                self.dirty[0] = 0
                self.unclean = 0
            else:
                self.unclean = 1
        self.last_bad = bad

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef bint _plausible(self, int i, double tnow) noexcept nogil:
        """Could slot ``i``'s decoded position have been reached since its last good read?

        Protocol 1.0's 8-bit checksum passes ~1/256 of corrupted packets: a
        flipped high byte moves the position by hundreds of ticks at once.
        """
        cdef double q = self.out_v[self.pos_field, i], dq, reach
        if self.last_t[i] <= 0.0:
            self.last_pos[i] = q
            self.last_t[i] = tnow
            return 1
        dq = q - self.last_pos[i]
        reach = self.max_rate[i] * (tnow - self.last_t[i] + self.t_slack) + self.abs_tol
        if -reach <= dq <= reach:
            self.last_pos[i] = q
            self.last_t[i] = tnow
            self.cand_n[i] = 0
            return 1
        dq = q - self.cand_pos[i]
        reach = 2.0 * self.max_rate[i] * (tnow - self.cand_t[i] + self.t_slack) + self.abs_tol
        if self.cand_n[i] > 0 and -reach <= dq <= reach:
            self.cand_n[i] += 1
        else:
            self.cand_n[i] = 1
        self.cand_pos[i] = q
        self.cand_t[i] = tnow
        if self.cand_n[i] >= 3:
            # three consistent reads in a row are no corruption: the servo is really there
            self.last_pos[i] = q
            self.last_t[i] = tnow
            self.cand_n[i] = 0
            return 1
        return 0


cdef class GroupWriteIO:
    """Preallocated sync write of one register: SI (n,) -> raw -> packet -> fd."""

    cdef public int fd
    cdef int protocol, n, size, enc, hdr
    cdef int64_t lo, hi
    cdef double timeout
    cdef int64_t[::1] zero           # per slot (mixed models may differ)
    cdef double[::1] scale
    cdef uint8_t[::1] body, tx
    cdef public object on_after_write
    cdef public object last_raw
    cdef int64_t[::1] last_raw_v

    def __init__(self, int fd, int protocol, ids, int address, int size, int encoding,
                 zero_raw, scale, double timeout_s, on_after_write=None):
        self.fd = fd
        self.protocol = protocol
        self.n = len(ids)
        self.size = size
        self.enc = encoding
        self.zero = np.array(np.broadcast_to(np.asarray(zero_raw, dtype=np.int64), (self.n,)))
        self.scale = np.array(np.broadcast_to(np.asarray(scale, dtype=np.float64), (self.n,)))
        self.timeout = timeout_s
        # 64-bit shifts: a C int shift overflows for 4-byte registers
        if encoding == 1:
            self.lo = -(<int64_t>1 << (8 * size - 1))
            self.hi = (<int64_t>1 << (8 * size - 1)) - 1
        elif encoding == 2:
            self.lo, self.hi = -1023, 1023
        else:
            self.lo, self.hi = 0, (<int64_t>1 << (8 * size)) - 1
        hdr = b""
        if protocol == 1:
            hdr = bytes((address & 0xFF, size))
        else:
            hdr = bytes((address & 0xFF, address >> 8, size, 0))
        self.hdr = len(hdr)
        body = bytearray(hdr)
        for sid in ids:
            body.append(sid)
            body += bytes(size)
        self.body = body
        self.tx = bytearray(len(body) + len(body) // 3 + 16)
        self.on_after_write = on_after_write
        self.last_raw = np.zeros(self.n, dtype=np.int64)
        self.last_raw_v = self.last_raw

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def write(self, const double[::1] values):
        """Encode and send one sync write; raises ValueError naming the slot on NaN/overflow."""
        cdef int i, j, bad = -1, w
        cdef int64_t raw, wire
        cdef double x
        cdef Py_ssize_t k, off
        if values.shape[0] != self.n:
            raise ValueError(f"sync write needs {self.n} values, got {values.shape[0]}")
        with nogil:
            for i in range(self.n):
                x = values[i]
                if not isfinite(x):
                    bad = i
                    break
                raw = llround(x / self.scale[i]) + self.zero[i]
                if raw < self.lo or raw > self.hi:
                    bad = i
                    break
                self.last_raw_v[i] = raw
                if self.enc == 2 and raw < 0:
                    wire = (-raw) | 1024
                else:
                    wire = raw
                off = self.hdr + i * (1 + self.size) + 1
                for j in range(self.size):
                    self.body[off + j] = (wire >> (8 * j)) & 0xFF
        if bad >= 0:
            raise ValueError(f"sync write slot {bad}: value {values[bad]!r} is not finite or "
                             f"does not fit the register (raw range {self.lo}..{self.hi})")
        with nogil:
            k = encode_c(self.protocol, 0xFE, 0x83, 0, 0, &self.body[0], self.body.shape[0],
                         &self.tx[0], self.tx.shape[0])
            w = _write_all(self.fd, &self.tx[0], k, _now() + self.timeout)
        if w != 0:
            return -1
        if self.on_after_write is not None:
            self.on_after_write()
        return 0


def transact(int fd, int protocol, bytes tx, expected_ids, double timeout_s, int max_data,
             on_after_write=None, bint flush=True):
    """Write ``tx`` and collect one status packet per id in ``expected_ids``.

    ``expected_ids`` empty means "no reply" (write only).  ``None`` means any
    id 0..252 may answer (broadcast ping): collect until the deadline.
    Returns ``(replies, garbage_bytes, port_error)`` with replies
    ``{id: (slot_code, error_byte, params bytes)}`` for every expected id
    (S_TIMEOUT when none came).
    """
    cdef int i, nslots, w
    cdef Py_ssize_t stride, max_total
    cdef RxState st
    cdef double deadline
    cdef const uint8_t[::1] t = tx
    any_id = expected_ids is None
    ids = list(range(0xFD)) if any_id else list(expected_ids)
    nslots = len(ids)
    stride = max_data + 8
    max_total = 11 + max_data + max_data // 3 + 2
    rx = bytearray(max(4096, 2 * max_total * max(1, nslots) if not any_id else 65536))
    scratch = bytearray(max_total + 16)
    data = bytearray(max(1, nslots * stride))
    id_to_slot = np.full(256, -1, dtype=np.intc)
    for i, sid in enumerate(ids):
        id_to_slot[sid] = i
    codes = np.zeros(max(1, nslots), dtype=np.intc)
    errs = np.zeros(max(1, nslots), dtype=np.intc)
    counts = np.zeros(max(1, nslots), dtype=np.intc)
    cdef uint8_t[::1] rxv = rx, scv = scratch, dv = data
    cdef int[::1] i2s = id_to_slot, cv = codes, ev = errs, nv = counts
    st.rx_len = 0
    st.garbage_bytes = 0
    st.port_error = 0
    st.remaining = nslots
    with nogil:
        if flush:
            tcflush(fd, TCIFLUSH)
        deadline = _now() + timeout_s
        w = _write_all(fd, &t[0], t.shape[0], deadline)
    if w != 0:
        return {}, 0, 1
    if on_after_write is not None:
        on_after_write()
    if nslots:
        with nogil:
            _rx_loop(fd, protocol, deadline, &rxv[0], rxv.shape[0], &scv[0], scv.shape[0], &i2s[0],
                     &cv[0], &ev[0], &nv[0], &dv[0], stride, max_total, &st)
    replies = {}
    for i, sid in enumerate(ids):
        code = int(codes[i])
        if any_id and code == S_PENDING:
            continue
        if code == S_PENDING:
            code = S_TIMEOUT
        replies[sid] = (code, int(errs[i]), bytes(data[i * stride:i * stride + min(int(counts[i]), stride)]))
    return replies, st.garbage_bytes, st.port_error
