/* memory.c — arena addressing shared by both backends: checked base+offset. */
#include "internal.h"

void *colrt_arena_at(const colrt_arena *a, size_t offset, size_t bytes) {
    if (offset % COLRT_ALIGN)
        colrt_die("arena offset %zu is not a multiple of %d; hint: the memory plan must align buffers", offset,
                  COLRT_ALIGN);
    if (offset > a->size || bytes > a->size - offset)
        colrt_die("arena access [%zu, %zu) is outside the arena of %zu bytes", offset, offset + bytes, a->size);
    return a->base + offset;
}
