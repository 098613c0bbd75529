/* test_json_schema.c — JSON Schema -> GBNF: errors (bad JSON with line and
 * column, unsupported keywords, unresolvable $ref) and, per schema, JSON
 * instances that must match the generated grammar and instances that must
 * not: invalid ones, and valid ones that llama.cpp's grammar does not produce
 * either (required properties come first, in schema order). */
#include "kiln-llama.h"
#include "util/test_util.h"

#include <stdlib.h>
#include <string.h>

static int matches_schema(const char * schema, const char * text) {
    char * gbnf = kiln_json_schema_to_grammar(schema, -1);
    if (!gbnf) return -1;
    struct kiln_grammar * g = kiln_grammar_init(gbnf, NULL, NULL);
    free(gbnf);
    if (!g) return -2;
    int ok = kiln_grammar_accept_text(g, text, (int32_t) strlen(text)) == KILN_STATUS_SUCCESS && kiln_grammar_is_complete(g);
    kiln_grammar_free(g);
    return ok;
}

static void expect_error(const char * schema, const char * needle) {
    char * g = kiln_json_schema_to_grammar(schema, -1);
    CHECK(g == NULL, "schema should be rejected: %s", schema);
    free(g);
    if (!g) CHECK(strstr(kiln_last_error(), needle) != NULL, "error '%s' should contain '%s'", kiln_last_error(), needle);
}

struct schema_case {
    const char * schema;
    const char * valid[6];
    const char * invalid[6];
};

static const struct schema_case CASES[] = {
    { "{\"type\":\"string\"}", { "\"\"", "\"a b\"", "\"\\u00e9\\n\"", "\"caf\xc3\xa9\"" }, { "a", "\"a", "1", "\"\x01\"" } },
    { "{\"type\":\"integer\"}", { "0", "-12", "1234567890" }, { "01", "1.5", "\"1\"", "-" } },
    { "{\"type\":\"number\"}", { "0", "-1.25", "3e10", "1.5E-3" }, { ".5", "1.", "+1", "0x1" } },
    { "{\"type\":\"boolean\"}", { "true", "false" }, { "True", "1", "null" } },
    { "{\"type\":\"null\"}", { "null" }, { "nul", "\"null\"" } },
    { "{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}", { "\"red\"", "\"green\"", "1", "null", "{\"a\":[true]}" },
      { "\"blue\"", "2", "\"Red\"" } },
    { "{\"const\":\"x\\\"y\"}", { "\"x\\\"y\"" }, { "\"xy\"", "\"x\"" } },
    { "{\"enum\":[\"a\\\"bcdefghijklmnopqrstuvwxyz0123456789 after an escaped quote\"]}",
      { "\"a\\\"bcdefghijklmnopqrstuvwxyz0123456789 after an escaped quote\"" }, { "\"a\"" } },
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
      { "{\"a\":1}", "{\"a\": 1, \"b\": \"x\"}", "{ \"a\" : -3 }" },
      { "{}", "{\"b\":\"x\"}", "{\"a\":\"1\"}", "{\"a\":1,\"c\":2}", "{\"b\":\"x\",\"a\":1}" } },
    { "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"boolean\"},\"y\":{\"type\":\"null\"},\"z\":{\"type\":\"integer\"}}}",
      { "{}", "{\"y\":null}", "{\"x\":true,\"z\":2}", "{\"x\":false,\"y\":null,\"z\":0}" },
      { "{\"z\":1,\"x\":true}", "{\"x\":true,}", "{\"w\":1}" } },
    { "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],\"additionalProperties\":{\"type\":\"string\"}}",
      { "{\"id\":1}", "{\"id\":1,\"k\":\"v\",\"k2\":\"w\"}" }, { "{\"id\":1,\"k\":2}", "{\"k\":\"v\"}" } },
    { "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", { "{}", "{\"a\":1,\"b\":2}" }, { "{\"a\":\"x\"}" } },
    { "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}",
      { "[1,2]", "[1, 2, 3]" }, { "[]", "[1]", "[1,2,3,4]", "[1,\"2\"]" } },
    { "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}", { "[]", "[\"a\"]", "[\"a\",\"b\",\"c\",\"d\"]" }, { "[1]", "[\"a\",]" } },
    { "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", { "[1,\"a\"]" }, { "[1]", "[\"a\",1]" } },
    { "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":2}]}", { "5", "\"ab\"" }, { "\"abc\"", "true" } },
    { "{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}", { "true", "null" }, { "0" } },
    { "{\"type\":[\"integer\",\"null\"]}", { "3", "null" }, { "\"3\"" } },
    { "{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}", { "\"ab\"", "\"abcd\"", "\"\\n\\t\"" }, { "\"a\"", "\"abcde\"" } },
    { "{\"type\":\"string\",\"format\":\"date\"}", { "\"2024-02-29\"", "\"1999-12-31\"" }, { "\"2024-13-01\"", "\"2024-1-01\"", "\"x\"" } },
    { "{\"type\":\"string\",\"format\":\"time\"}", { "\"23:59:59Z\"", "\"01:02:03.456+05:30\"" }, { "\"24:00:00Z\"", "\"12:00:00\"" } },
    { "{\"type\":\"string\",\"format\":\"date-time\"}", { "\"2020-01-01T00:00:00Z\"" }, { "\"2020-01-01 00:00:00Z\"" } },
    { "{\"type\":\"string\",\"format\":\"uuid\"}", { "\"123e4567-e89b-12d3-a456-426614174000\"" },
      { "\"123e4567e89b12d3a456426614174000\"", "\"g23e4567-e89b-12d3-a456-426614174000\"" } },
    { "{\"type\":\"integer\",\"minimum\":-5,\"maximum\":130}", { "-5", "-1", "0", "7", "99", "130" },
      { "-6", "131", "200", "-10", "1000" } },
    { "{\"type\":\"integer\",\"minimum\":17}", { "17", "18", "99", "100", "123456789" }, { "16", "0", "-17", "9" } },
    { "{\"type\":\"integer\",\"exclusiveMaximum\":0}", { "-1", "-1000" }, { "0", "1" } },
    { "{\"type\":\"integer\",\"minimum\":250,\"maximum\":3999}", { "250", "299", "300", "999", "1000", "3999" },
      { "249", "4000", "25", "5000" } },
    { "{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},\"required\":[\"x\"]}},"
      "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/pt\"}}", { "[{\"x\":1},{\"x\":2.5}]" }, { "[{\"y\":1}]" } },
    { "{\"definitions\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
      "\"next\":{\"anyOf\":[{\"$ref\":\"#/definitions/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
      "\"$ref\":\"#/definitions/node\"}", { "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}" }, { "{\"v\":1,\"next\":{\"v\":2}}" } },
    { "{}", { "{}", "{\"a\":[1,{\"b\":null}]}" }, { "[]", "1" } },
    { "true", { "{}", "[1,\"a\"]", "null", "-2.5" }, { "nul", "[1,]" } },
};

int main(void) {
    tu_case = "errors";
    expect_error("{\"type\": \"object\",}", "line 1, column 19: expected a string key");
    expect_error("{\n  \"type\": \"string\"\n  \"format\": \"date\"}", "line 3, column 3: expected ',' or '}'");
    expect_error("{\"type\": \"str", "line 1, column 14: unterminated string");
    expect_error("{\"type\": 01}", "line 1, column 11: expected ',' or '}'");
    expect_error("{\"enum\": [1, 2] } x", "line 1, column 19: trailing characters");
    expect_error("{\"a\": \"\\x\"}", "bad escape");
    expect_error("{\"type\": \"a\xff\"}", "line 1, column 12: invalid UTF-8 in string");
    expect_error("", "line 1, column 1: unexpected end of input");
    expect_error("{\"type\":\"string\",\"pattern\":\"^a+$\"}", "pattern is not supported");
    expect_error("{\"$ref\":\"#/$defs/missing\"}", "does not resolve");
    expect_error("{\"$ref\":\"http://example.com/s.json\"}", "only local $ref");
    expect_error("{\"type\":\"frobnicate\"}", "unrecognized schema");
    expect_error("{\"allOf\":[{\"type\":\"string\"}]}", "allOf");
    expect_error("{\"oneOf\":[]}", "empty oneOf/anyOf");
    expect_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "minimum above maximum");
    expect_error("{\"type\":\"integer\",\"minimum\":1e111}", "integer bounds beyond 15 digits");
    expect_error("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1e111}", "minItems 1e+111 is more than a grammar can repeat");
    CHECK(matches_schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":1e111}", "[1,2,3]") == 1,
          "a maximum beyond a grammar's repetition limit is no maximum");

    tu_case = "instances";
    for (size_t k = 0; k < sizeof(CASES) / sizeof(CASES[0]); k++) {
        const struct schema_case * c = &CASES[k];
        char * gbnf = kiln_json_schema_to_grammar(c->schema, -1);
        CHECK(gbnf != NULL, "schema %zu converts: %s", k, gbnf ? "" : kiln_last_error());
        if (!gbnf) continue;
        struct kiln_grammar * g = kiln_grammar_init(gbnf, NULL, NULL);
        CHECK(g != NULL, "schema %zu: the grammar parses: %s\n%s", k, g ? "" : kiln_last_error(), gbnf);
        kiln_grammar_free(g);
        free(gbnf);
        for (int i = 0; i < 6 && c->valid[i]; i++) {
            CHECK(matches_schema(c->schema, c->valid[i]) == 1, "schema %zu accepts %s", k, c->valid[i]);
        }
        for (int i = 0; i < 6 && c->invalid[i]; i++) {
            CHECK(matches_schema(c->schema, c->invalid[i]) == 0, "schema %zu rejects %s", k, c->invalid[i]);
        }
    }

    tu_case = "integer ranges exhaustively";
    /* every integer in a window, against the bounds themselves */
    const long long bounds[][2] = { { -5, 130 }, { 7, 7 }, { 0, 99 }, { -250, -17 }, { 19, 1201 }, { -1, 0 } };
    for (size_t b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++) {
        char schema[128];
        snprintf(schema, sizeof(schema), "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", bounds[b][0], bounds[b][1]);
        char * gbnf = kiln_json_schema_to_grammar(schema, -1);
        struct kiln_grammar * g = gbnf ? kiln_grammar_init(gbnf, NULL, NULL) : NULL;
        CHECK(g != NULL, "%s converts", schema);
        int bad = 0;
        for (long long x = -1500; g && x <= 1500; x++) {
            char t[32];
            snprintf(t, sizeof(t), "%lld", x);
            kiln_grammar_reset(g);
            int got = kiln_grammar_accept_text(g, t, (int32_t) strlen(t)) == KILN_STATUS_SUCCESS && kiln_grammar_is_complete(g);
            int want = x >= bounds[b][0] && x <= bounds[b][1];
            if (got != want && bad++ < 3) CHECK(0, "%s on %lld: %d", schema, x, got);
        }
        CHECK(bad == 0, "%s: all of -1500..1500 decided right", schema);
        kiln_grammar_free(g);
        free(gbnf);
    }
    return tu_finish();
}
