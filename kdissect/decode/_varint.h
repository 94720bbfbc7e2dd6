/* The zigzag varint reader of the C record walkers (_record_check_c.c, and
 * present/_verbose_records_c.c): `records.zigzag_varint` in C.
 *
 * kd_zigzag(data, pos, end, width, &value, &wide) reads a zigzag varint of at
 * most `width` bytes (5: int32, 10: int64) within data[:end] and returns where it
 * ends, or -1 where `zigzag_varint` gives (0, -1): it runs past `end` or is longer
 * than `width`. Python's ints have no bound, C's do: a varint of 10 bytes can carry
 * 70 bits, and `*wide` is set when its value does not fit in 64 (the check only
 * needs where it ends; the text writer leaves such a batch to Python). */
#ifndef KDISSECT_VARINT_H
#define KDISSECT_VARINT_H

#include <stdint.h>
#include <Python.h>

static inline Py_ssize_t
kd_zigzag(const unsigned char *data, Py_ssize_t pos, Py_ssize_t end, int width,
          int64_t *value, int *wide)
{
    uint64_t raw = 0;
    Py_ssize_t stop = pos + width < end ? pos + width : end;
    int shift = 0;
    *wide = 0;
    for (Py_ssize_t at = pos; at < stop; at++) {
        unsigned char byte = data[at];
        uint64_t bits = (uint64_t)(byte & 0x7F);
        if (shift == 63 && bits > 1)
            *wide = 1;
        raw |= bits << shift;
        if (byte < 0x80) {
            *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return at + 1;
        }
        shift += 7;
    }
    *value = 0;
    return -1;
}

#endif
