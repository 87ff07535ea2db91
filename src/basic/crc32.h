/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* CRC-32 (IEEE 802.3, the zlib/PNG polynomial, reflected): the checksum of
 * hutch's own wire formats (the guest agent's frames). */

#include <stddef.h>
#include <stdint.h>

/* Continues @crc (0 to start) over @len bytes of @data and returns it.
 * crc32_update(0, "123456789", 9) is 0xcbf43926. */
uint32_t crc32_update(uint32_t crc, const void *data, size_t len);
