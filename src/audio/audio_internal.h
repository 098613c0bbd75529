/*
 * audio_internal.h — shared by the files of src/audio.
 */
#ifndef KILN_AUDIO_INTERNAL_H
#define KILN_AUDIO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* The whole file (malloc'ed; free()); NULL with kiln_last_error() naming
 * `who` and the path. */
uint8_t * kiln_audio_read_file(const char * who, const char * path, size_t * size);
/* Appends " (path)" to kiln_last_error(). */
void kiln_audio_error_path(const char * path);

#endif
