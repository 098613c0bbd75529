/*
 * unicode.h — what the tokenizers need from Unicode: UTF-8 decoding that
 * never fails (bad bytes become U+FFFD, one byte each, as llama.cpp does),
 * per-code-point category flags, and GPT-2's byte <-> code point mapping.
 * Private to src/models.
 */
#ifndef KILN_MODELS_UNICODE_H
#define KILN_MODELS_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
    UCD_NUMBER     = 0x01,
    UCD_LETTER     = 0x02,
    UCD_SEPARATOR  = 0x04,
    UCD_ACCENT     = 0x08,
    UCD_PUNCT      = 0x10,
    UCD_SYMBOL     = 0x20,
    UCD_CONTROL    = 0x40,
    UCD_WHITESPACE = 0x80,
};

extern const int      kiln_ucd_n_runs;
extern const uint32_t kiln_ucd_run_start[];
extern const uint8_t  kiln_ucd_run_flags[];

/* flags of a code point (0 = unassigned or out of range) */
uint8_t ucd_flags(uint32_t cpt);

/* BERT normalization (unicode_bert.c): the simple lowercase of a code
 * point, and the first code point of its canonical decomposition (the base
 * letter of an accented one), as llama.cpp's unicode_tolower and
 * unicode_cpts_normalize_nfd */
extern const int      kiln_ucd_n_lower;
extern const uint32_t kiln_ucd_lower[][2];
extern const int      kiln_ucd_n_nfd;
extern const uint32_t kiln_ucd_nfd[][3];
uint32_t ucd_tolower(uint32_t cpt);
uint32_t ucd_nfd_first(uint32_t cpt);

/* length of the UTF-8 sequence a lead byte announces (1 for stray bytes) */
size_t utf8_len(uint8_t lead);

/* decode one code point at *offs, advancing it; invalid input gives U+FFFD
 * and advances one byte */
uint32_t utf8_decode(const char * s, size_t n, size_t * offs);

/* encode; returns the number of bytes (1..4) written to out */
int utf8_encode(uint32_t cpt, char * out);

/* decode a whole string into a malloc'd array; *n_out = count */
uint32_t * utf8_to_cpts(const char * s, size_t n, size_t * n_out);

/* GPT-2 byte-level BPE: the code point that stands for a byte, and back
 * (-1 when the code point stands for no byte) */
uint32_t bytes_to_unicode(uint8_t b);
int      unicode_to_byte(uint32_t cpt);

#endif
