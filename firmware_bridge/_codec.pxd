# C-level codec shared with firmware_bridge._busio (cimport).
from libc.stdint cimport uint8_t, uint16_t

cdef enum ParseCode:
    PARSE_NEED_MORE = 0
    PARSE_OK = 1
    PARSE_BAD_HEADER = -1
    PARSE_BAD_ID = -2
    PARSE_BAD_LENGTH = -3
    PARSE_CHECKSUM = -4
    PARSE_NOT_STATUS = -5
    PARSE_TOO_LONG = -6

cdef struct ParseResult:
    int servo_id
    int code            # instruction (instruction packet) or error byte (status packet)
    int is_status
    Py_ssize_t consumed  # bytes of the packet on the wire (stuffed)
    Py_ssize_t nparams   # unstuffed parameter bytes written to the output buffer

cdef uint16_t crc16_c(const uint8_t* p, Py_ssize_t n, uint16_t crc) noexcept nogil
cdef uint8_t checksum_c(const uint8_t* p, Py_ssize_t n) noexcept nogil
cdef Py_ssize_t stuff_c(const uint8_t* src, Py_ssize_t n, uint8_t* dst) noexcept nogil
cdef Py_ssize_t unstuff_c(const uint8_t* src, Py_ssize_t n, uint8_t* dst) noexcept nogil
cdef Py_ssize_t encode_c(int protocol, int servo_id, int first, int second, bint has_second,
                         const uint8_t* params, Py_ssize_t n, uint8_t* out,
                         Py_ssize_t cap) noexcept nogil
cdef int parse_c(const uint8_t* buf, Py_ssize_t n, int protocol, bint status,
                 uint8_t* params_out, Py_ssize_t params_cap, ParseResult* res,
                 bint unstuff=*) noexcept nogil
cdef Py_ssize_t find_header_c(const uint8_t* buf, Py_ssize_t n, int protocol,
                              Py_ssize_t start) noexcept nogil
