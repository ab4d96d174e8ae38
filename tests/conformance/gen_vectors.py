#!/usr/bin/python3
"""Generate the awf-proto conformance vectors (tests/conformance/*.jsonl).

Expected values are written down here by hand, case by case, from
proto/CONTRACT.md; only mechanical values (cardinalities, compact texts of
valid schemas) are computed, by this script's own code and Python's json
module, never by the Go implementation. Run from anywhere:

    /usr/bin/python3 tests/conformance/gen_vectors.py

Byte-string fields use one of three encodings, so every line stays valid
JSON: F (UTF-8 text), F_hex (hex bytes) or F_parts (a list of
{"text"|"hex": ..., "repeat": n} pieces, concatenated).
"""

import base64
import json
import math
import os
import sys

CONTRACT_VERSION = "1.0.0"
HERE = os.path.dirname(os.path.abspath(__file__))
MAX_SAFE = 2**53 - 1


# ---------------------------------------------------------------- helpers

def dumps(v):
    """Compact JSON the way the contract's R10 writes it."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def nest(n, inner):
    return "[" * n + inner + "]" * n


def arrays(n, length, inner):
    for _ in range(n):
        inner = '{"type":"array","length":%d,"items":%s}' % (length, inner)
    return inner


def fields(n, inner, prefix="f"):
    return '{"type":"object","fields":{%s}}' % ",".join(
        '"%s%d":%s' % (prefix, i, inner) for i in range(n))


def tuple_of(items):
    return '{"type":"tuple","items":[%s]}' % ",".join(items)


def union(tags, inner):
    return '{"type":"union","variants":{%s}}' % ",".join('"%s":%s' % (t, inner) for t in tags)


BOOL = '{"type":"boolean"}'
FULLINT = '{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}'


def cardinality(s):
    t = s["type"]
    if t == "const":
        return 1
    if t == "boolean":
        return 2
    if t == "enum":
        return len(s["values"])
    if t == "integer":
        return s["maximum"] - s["minimum"] + 1
    if t == "object":
        return math.prod(cardinality(v) for v in s["fields"].values())
    if t == "tuple":
        return math.prod(cardinality(v) for v in s["items"])
    if t == "array":
        return cardinality(s["items"]) ** s["length"]
    if t == "union":
        return sum(cardinality(v) for v in s["variants"].values())
    raise ValueError(t)


def log2_card(s):
    t = s["type"]
    if t == "array":
        return s["length"] * log2_card(s["items"])
    if t in ("object", "tuple"):
        kids = s["fields"].values() if t == "object" else s["items"]
        return sum(log2_card(k) for k in kids)
    if t == "union":
        logs = [log2_card(k) for k in s["variants"].values()]
        hi = max(logs)
        return hi + math.log2(sum(2 ** (x - hi) for x in logs))
    return math.log2(cardinality(s))


def bit_bound(s):
    """Upper bound on bit length, to avoid materialising huge numbers."""
    t = s["type"]
    if t == "array":
        return 1 if s["length"] == 0 else s["length"] * bit_bound(s["items"])
    if t in ("object", "tuple"):
        kids = s["fields"].values() if t == "object" else s["items"]
        return sum(bit_bound(k) for k in kids)
    if t == "union":
        kids = list(s["variants"].values())
        return max(bit_bound(k) for k in kids) + len(kids).bit_length()
    return cardinality(s).bit_length()


def charge(card):
    cap = 2**1024
    c = min(card, cap + 1)
    return 1 + (c - 1).bit_length() + 3


# ---------------------------------------------------------------- files

class Vectors:
    def __init__(self, name, description):
        self.name = name
        self.description = description
        self.cases = []
        self.ids = set()

    def add(self, id, rules, **kw):
        assert id not in self.ids, id
        self.ids.add(id)
        case = {"id": id, "rules": rules}
        case.update(kw)
        self.cases.append(case)

    def write(self):
        path = os.path.join(HERE, self.name + ".jsonl")
        with open(path, "w", encoding="utf-8") as f:
            header = {"contract": "awf-proto", "version": CONTRACT_VERSION, "file": self.name,
                      "cases": len(self.cases), "description": self.description}
            f.write(json.dumps(header, ensure_ascii=False) + "\n")
            for c in self.cases:
                f.write(json.dumps(c, ensure_ascii=False, separators=(",", ":")) + "\n")
        return len(self.cases)


def text_or_hex(b):
    """Encode bytes as {"F": text} when valid UTF-8, else {"F_hex": hex}."""
    try:
        return {"": b.decode("utf-8", errors="strict")}
    except UnicodeDecodeError:
        return {"_hex": b.hex()}


def field(name, value):
    """Return {name...: value} choosing text or hex for bytes."""
    if isinstance(value, str):
        return {name: value}
    out = text_or_hex(value)
    return {name + k: v for k, v in out.items()}


# ---------------------------------------------------------------- json

def gen_json():
    v = Vectors("json", "R1-R10: the strict JSON parser. ok cases give the compact re-serialisation "
                        "(input key order, R10); failures are error class json.")

    def ok(id, rules, inp, compact, **kw):
        v.add(id, rules, **field("input", inp), ok=True, compact=compact, **kw)

    def bad(id, rules, inp, contains=None, **kw):
        extra = {"error_contains": contains} if contains else {}
        v.add(id, rules, **field("input", inp), ok=False, error_class="json", **extra, **kw)

    # R1 size
    s = '"' + "a" * 8190 + '"'
    ok("size-8192-string", ["R1"], s, s)
    bad("size-8193-string", ["R1"], '"' + "a" * 8191 + '"', "the maximum is 8192")
    ok("size-8192-whitespace", ["R1", "R3"], "true" + " " * 8188, "true")
    bad("size-8193-whitespace", ["R1"], "true" + " " * 8189, "the maximum is 8192")
    # R2 UTF-8
    ok("utf8-raw-4-byte", ["R2"], '"\U0001F600"', '"\U0001F600"')
    ok("utf8-raw-2-and-3-byte", ["R2"], '"é€"', '"é€"')
    bad("utf8-lone-continuation", ["R2"], b'"\x80"', "invalid UTF-8")
    bad("utf8-truncated-2-byte", ["R2"], b'"\xc3"', "invalid UTF-8")
    bad("utf8-overlong-slash", ["R2"], b'"\xc0\xaf"', "invalid UTF-8")
    bad("utf8-overlong-3-byte", ["R2"], b'"\xe0\x80\x80"', "invalid UTF-8")
    bad("utf8-encoded-surrogate", ["R2"], b'"\xed\xa0\x80"', "invalid UTF-8")
    bad("utf8-above-10ffff", ["R2"], b'"\xf4\x90\x80\x80"', "invalid UTF-8")
    bad("utf8-ff-byte", ["R2", "R9"], b'\xff', "at byte 0: invalid UTF-8")
    bad("utf8-invalid-outside-string", ["R2"], b'[1,\xfe]', "invalid UTF-8")
    bad("utf8-bom", ["R2", "R3"], "\ufefftrue", "expected a JSON value")
    # R3 one value, whitespace
    bad("empty", ["R3"], "", "input is empty")
    bad("whitespace-only", ["R3"], " \t\r\n", "input is empty")
    ok("whitespace-all-four", ["R3"], " \t\r\n1 \t\r\n", "1")
    bad("trailing-content", ["R3"], "true x", "unexpected content")
    bad("two-values", ["R3"], "1 2", "unexpected content")
    bad("two-objects", ["R3"], "{}{}", "unexpected content")
    bad("form-feed-not-whitespace", ["R3"], "\f1", "expected a JSON value")
    bad("vertical-tab-not-whitespace", ["R3"], "1\v", "unexpected content")
    bad("nbsp-not-whitespace", ["R3"], "\u00a01")
    bad("trailing-nul", ["R3"], "1\u0000", "unexpected content")
    # R4 grammar
    ok("literals", ["R4"], "[true,false,null]", "[true,false,null]")
    bad("literal-truncated", ["R4"], "tru", "invalid literal")
    bad("literal-trailing-letters", ["R4"], "nullx", "unexpected content")
    bad("literal-capitalised", ["R4"], "True")
    bad("nan", ["R4"], "NaN")
    bad("infinity", ["R4"], "Infinity")
    bad("undefined", ["R4"], "undefined")
    bad("single-quotes", ["R4"], "'a'")
    bad("comment", ["R4"], "[1]//c", "unexpected content")
    bad("array-trailing-comma", ["R4"], "[1,]")
    bad("array-leading-comma", ["R4"], "[,1]")
    bad("array-missing-comma", ["R4", "R9"], "[1 2]", "at byte 3: expected ',' or ']'")
    bad("array-unclosed", ["R4"], "[1", "unexpected end of input")
    bad("object-trailing-comma", ["R4"], '{"a":1,}', "expected a string key")
    bad("object-missing-colon", ["R4"], '{"a" 1}', "expected ':'")
    bad("object-non-string-key", ["R4"], "{1:1}", "expected a string key")
    bad("object-unclosed", ["R4"], '{"a":1', "unexpected end of input")
    bad("object-empty-comma", ["R4"], "{,}", "expected a string key")
    ok("empty-containers", ["R4"], "[{},[],{\"a\":[]}]", '[{},[],{"a":[]}]')
    # R5 strings
    ok("escapes-all-short", ["R5", "R10"], r'"\"\\\/\b\f\n\r\t"', r'"\"\\/\b\f\n\r\t"')
    ok("escape-unicode-mixed-case", ["R5"], r'"\u00E9\u00e9"', '"éé"')
    ok("escape-nul", ["R5", "R10"], r'"\u0000"', r'"\u0000"')
    ok("escape-surrogate-pair", ["R5"], r'"\ud83d\ude00"', '"\U0001F600"')
    ok("escape-surrogate-pair-upper", ["R5"], r'"\uD83D\uDE00"', '"\U0001F600"')
    ok("raw-del", ["R5", "R10"], '"\u007f"', '"\u007f"')
    ok("raw-c1-control", ["R5", "R10"], '"\u0085"', '"\u0085"')
    bad("raw-nul", ["R5"], '"\u0000"', "control character U+0000")
    bad("raw-tab", ["R5"], '"\t"', "control character U+0009")
    bad("raw-newline", ["R5"], '"a\nb"', "control character U+000A")
    bad("raw-unit-separator", ["R5"], '"\u001f"', "control character U+001F")
    bad("lone-high-surrogate", ["R5"], r'"\ud800"', "lone surrogate",
        deviates_from_reference=True, reference="accepted as a lone UTF-16 unit")
    bad("lone-low-surrogate", ["R5"], r'"\udc00"', "lone surrogate",
        deviates_from_reference=True, reference="accepted as a lone UTF-16 unit")
    bad("high-surrogate-then-letter", ["R5"], r'"\ud800a"', "lone surrogate",
        deviates_from_reference=True, reference="accepted")
    bad("two-high-surrogates", ["R5"], r'"\ud800\ud800"', "lone surrogate",
        deviates_from_reference=True, reference="accepted")
    bad("reversed-surrogate-pair", ["R5"], r'"\ude00\ud83d"', "lone surrogate",
        deviates_from_reference=True, reference="accepted")
    bad("escape-unknown", ["R5"], r'"\x41"', "invalid escape")
    bad("escape-single-quote", ["R5"], r'"\'"', "invalid escape")
    bad("escape-unicode-3-digits", ["R5"], r'"\u004"', "4 hex digits")
    bad("escape-unicode-non-hex", ["R5"], r'"\u00g0"', "4 hex digits")
    bad("unterminated-string", ["R5"], '"abc', "unterminated string")
    bad("unterminated-after-backslash", ["R5"], '"abc\\', "unterminated string")
    # R6 numbers
    ok("int-zero", ["R6"], "0", "0")
    ok("int-negative", ["R6"], "-42", "-42")
    ok("int-max-safe", ["R6"], "9007199254740991", "9007199254740991")
    ok("int-min-safe", ["R6"], "-9007199254740991", "-9007199254740991")
    bad("int-max-safe-plus-1", ["R6"], "9007199254740992", "outside",
        deviates_from_reference=True, reference="accepted as a double")
    bad("int-min-safe-minus-1", ["R6"], "-9007199254740992", "outside",
        deviates_from_reference=True, reference="accepted as a double")
    bad("int-20-digits", ["R6"], "12345678901234567890", "outside",
        deviates_from_reference=True, reference="accepted as a double")
    bad("fraction-1.0", ["R6"], "1.0", "not an exact integer",
        deviates_from_reference=True, reference="accepted, equal to 1")
    bad("fraction-0.5", ["R6"], "0.5", "not an exact integer",
        deviates_from_reference=True, reference="accepted")
    bad("exponent-1e2", ["R6"], "1e2", "not an exact integer",
        deviates_from_reference=True, reference="accepted, equal to 100")
    bad("exponent-1E+2", ["R6"], "1E+2", "not an exact integer",
        deviates_from_reference=True, reference="accepted, equal to 100")
    bad("exponent-huge", ["R6"], "1e999", "not an exact integer")
    bad("negative-zero", ["R6"], "-0", "-0 is not accepted",
        deviates_from_reference=True, reference="accepted, behaves as 0")
    bad("negative-zero-fraction", ["R6"], "-0.0", "not an exact integer",
        deviates_from_reference=True, reference="accepted")
    bad("leading-zero", ["R6"], "01", "leading zeros")
    bad("leading-zero-negative", ["R6"], "-01", "leading zeros")
    bad("leading-plus", ["R6"], "+1")
    bad("leading-dot", ["R6"], ".5")
    bad("trailing-dot", ["R6"], "1.", "after the decimal point")
    bad("exponent-no-digits", ["R6"], "1e", "in the exponent")
    bad("exponent-sign-no-digits", ["R6"], "1e+", "in the exponent")
    bad("bare-minus", ["R6"], "-", "expected a digit")
    bad("hex-number", ["R6"], "0x10", "unexpected content")
    # R7 keys
    bad("duplicate-key", ["R7", "R9"], '{"a":1,"a":1}', "duplicate object key")
    bad("duplicate-key-after-unescape", ["R7"], '{"a":1,"\\u0061":2}', "duplicate object key")
    bad("duplicate-key-nested", ["R7"], '{"x":{"k":1,"k":2}}', "duplicate object key")
    bad("duplicate-empty-key", ["R7"], '{"":1,"":2}', "duplicate object key")
    ok("proto-key-ordinary", ["R7"], '{"__proto__":{"a":1},"b":2}', '{"__proto__":{"a":1},"b":2}',
       deviates_from_reference=True, reference="the key is swallowed by the prototype setter: {\"b\":2}")
    bad("proto-key-duplicate", ["R7"], '{"__proto__":1,"__proto__":2}', "duplicate object key",
        deviates_from_reference=True, reference="accepted as {}")
    ok("keys-differ-by-case", ["R7"], '{"a":1,"A":2}', '{"a":1,"A":2}')
    ok("key-order-kept", ["R7", "R10"], '{"b":1,"a":2}', '{"b":1,"a":2}')
    ok("many-keys-no-duplicate", ["R7"], "{" + ",".join('"k%d":%d' % (i, i) for i in range(40)) + "}",
       "{" + ",".join('"k%d":%d' % (i, i) for i in range(40)) + "}")
    bad("many-keys-late-duplicate", ["R7"], "{" + ",".join('"k%d":%d' % (i, i) for i in range(40)) + ',"k3":0}',
        "duplicate object key")
    # R8 nesting
    ok("depth-32-around-scalar", ["R8"], nest(32, "1"), nest(32, "1"))
    bad("depth-33-around-scalar", ["R8"], nest(33, "1"), "deeper than 32")
    ok("depth-33-empty-arrays", ["R8"], nest(33, ""), nest(33, ""))
    bad("depth-34-empty-arrays", ["R8"], nest(34, ""), "deeper than 32")
    obj32 = '{"a":' * 32 + "1" + "}" * 32
    ok("depth-32-objects", ["R8"], obj32, obj32)
    bad("depth-33-objects", ["R8"], '{"a":' * 33 + "1" + "}" * 33, "deeper than 32")
    bad("depth-40", ["R8"], nest(40, ""), "deeper than 32")
    # R10 compact form
    ok("compact-no-html-escaping", ["R10"], '"</script>&<!--"', '"</script>&<!--"')
    ok("compact-line-separators-raw", ["R10"], r'"\u2028\u2029"', '"\u2028\u2029"')
    ok("compact-controls-lowercase-hex", ["R10"], r'"\u001F\u000B\u0001"', r'"\u001f\u000b\u0001"')
    ok("compact-solidus-unescaped", ["R10"], r'"\/"', '"/"')
    ok("compact-non-ascii-raw", ["R10"], r'"\u00fc\u4e2d"', '"ü中"')
    ok("compact-whitespace-removed", ["R10"], ' { "a" : [ 1 , 2 ] , "b" : { } } ', '{"a":[1,2],"b":{}}')
    return v


# ---------------------------------------------------------------- schema

def gen_schema():
    v = Vectors("schema", "R11-R27: schema validation, cardinality and charge. ok cases give the exact "
                          "cardinality (decimal string, or null with cardinality_log2 when it is "
                          "astronomically large), the charge in bits and the compact text; failures are "
                          "error class schema, or json when the text is not strict JSON.")

    def ok(id, rules, text, **kw):
        s = json.loads(text)
        bound = bit_bound(s)
        case = dict(schema=text, ok=True)
        if bound <= 65536:
            card = cardinality(s)
            case.update(cardinality=str(card), charge_bits=charge(card))
        else:
            case.update(cardinality=None, cardinality_log2=log2_card(s), charge_bits=1029)
        case["compact"] = dumps(s)
        case.update(kw)
        v.add(id, rules, **case)

    def bad(id, rules, text, contains=None, cls="schema", **kw):
        extra = {"error_contains": contains} if contains else {}
        v.add(id, rules, schema=text, ok=False, error_class=cls, **extra, **kw)

    # each type, seed examples (R16-R24, R26, R27)
    ok("const-integer", ["R16", "R26", "R27"], '{"type":"const","value":42}')
    ok("const-string", ["R16"], '{"type":"const","value":"x"}')
    ok("const-null", ["R16"], '{"type":"const","value":null}')
    ok("const-true", ["R16"], '{"type":"const","value":true}')
    ok("boolean", ["R17", "R27"], BOOL)
    ok("enum-4-strings", ["R18", "R27"], '{"type":"enum","values":["MIT","Apache-2.0","GPL-3.0","unknown"]}')
    ok("enum-1", ["R18"], '{"type":"enum","values":["only"]}')
    ok("enum-3-integers", ["R18"], '{"type":"enum","values":[1,2,3]}')
    ok("enum-5", ["R18", "R27"], '{"type":"enum","values":[1,2,3,4,5]}')
    ok("enum-booleans", ["R18"], '{"type":"enum","values":[true,false]}')
    ok("enum-null", ["R18"], '{"type":"enum","values":[null]}')
    ok("integer-0-255", ["R20", "R27"], '{"type":"integer","minimum":0,"maximum":255}')
    ok("integer-single", ["R20"], '{"type":"integer","minimum":7,"maximum":7}')
    ok("integer-negative", ["R20"], '{"type":"integer","minimum":-10,"maximum":-1}')
    ok("integer-full-safe-range", ["R20", "R27"], FULLINT)
    ok("object-2", ["R21", "R26"], '{"type":"object","fields":{"a":{"type":"boolean"},"b":{"type":"enum","values":[1,2,3]}}}')
    ok("tuple-2", ["R22", "R26"], tuple_of([BOOL, '{"type":"const","value":"k"}']))
    ok("array-64-booleans", ["R23", "R27"], arrays(1, 64, BOOL))
    ok("array-length-0", ["R23", "R26"], arrays(1, 0, BOOL))
    ok("union-2", ["R24", "R26"], union(["a", "b"], BOOL))
    ok("union-overlapping-values", ["R24", "R26"],
       '{"type":"union","variants":{"x":{"type":"const","value":1},"y":{"type":"const","value":1}}}')
    # R13 depth
    ok("depth-6-arrays", ["R13"], arrays(6, 1, BOOL))
    bad("depth-7-arrays", ["R13"], arrays(7, 1, BOOL), "maximum depth of 6")
    deep_obj = BOOL
    for _ in range(6):
        deep_obj = '{"type":"object","fields":{"x":%s}}' % deep_obj
    ok("depth-6-objects", ["R13"], deep_obj)
    bad("depth-7-objects", ["R13"], '{"type":"object","fields":{"x":%s}}' % deep_obj, "maximum depth of 6")
    deep_mixed = BOOL
    for i in range(6):
        deep_mixed = tuple_of([deep_mixed]) if i % 2 else union(["u"], deep_mixed)
    ok("depth-6-mixed", ["R13"], deep_mixed)
    bad("depth-7-mixed", ["R13"], tuple_of([deep_mixed]), "maximum depth of 6")
    bad("depth-7-invalid-node", ["R12", "R13"], arrays(7, 1, '"not a node"'), "maximum depth of 6")
    # R14 nodes: object + 16 tuples of 3 booleans = 65; last tuple with 2 = 64
    t3 = tuple_of([BOOL] * 3)
    s65 = fields(16, t3)
    s64 = s65.replace('"f15":' + t3, '"f15":' + tuple_of([BOOL] * 2))
    ok("nodes-64", ["R14"], s64)
    bad("nodes-65", ["R14"], s65, "maximum of 64 nodes")
    u16 = union(["v%d" % i for i in range(16)], tuple_of([BOOL] * 3))  # 1 + 16*4 = 65
    bad("nodes-65-union", ["R14"], u16, "maximum of 64 nodes")
    bad("nodes-65-before-shape", ["R12", "R14"], s65.replace('"f15":' + t3, '"f15":' + tuple_of([BOOL, BOOL, "[]"])),
        "maximum of 64 nodes")
    # R11 size on the compact form
    prefix, suffix = '{"type":"enum","values":[', ']}'

    def enum_of_size(total):
        vals, size, i = [], len(prefix) + len(suffix) - 1, 0
        while size + 67 <= total:
            vals.append('"%064d"' % i)
            size += 67
            i += 1
        vals.append('"' + "z" * (total - size - 3) + '"')
        text = prefix + ",".join(vals) + suffix
        assert len(text) == total, (len(text), total)
        return text

    ok("size-4096", ["R11"], enum_of_size(4096))
    bad("size-4097", ["R11"], enum_of_size(4097), "4097 bytes in compact form")
    spaced = enum_of_size(4096).replace(",", " ,\n ")
    ok("size-4096-compact-raw-larger", ["R11"], spaced)
    esc = enum_of_size(4096)
    esc_text = esc[:-4] + '\\u007a' + esc[-3:]  # one 'z' written as an escape: raw grows, compact does not
    ok("size-escapes-count-decoded", ["R11"], esc_text)
    bad("size-4097-via-whitespace-free", ["R11"], enum_of_size(4097).replace(",", " , "), "4097 bytes in compact form")
    ok("enum-0-1035-fills-4096", ["R11", "R18"], prefix + ",".join(str(i) for i in range(1036)) + suffix)
    bad("enum-0-1036-is-4101", ["R11", "R18"], prefix + ",".join(str(i) for i in range(1037)) + suffix,
        "4101 bytes in compact form")
    bad("enum-4096-members-unreachable", ["R1", "R18"], prefix + ",".join(str(i) for i in range(4096)) + suffix,
        "the maximum is 8192", cls="json", note="MaxEnumValues cannot bind: 4096 distinct members exceed the text limits")
    bad("enum-4097-members-unreachable", ["R1", "R18"], prefix + ",".join(str(i) for i in range(4097)) + suffix,
        "the maximum is 8192", cls="json", note="one past MaxEnumValues: rejected by the text limit first")
    # R15 node shape, type and exact keys
    bad("node-array", ["R15"], "[]", "must be a JSON object, got array")
    bad("node-string", ["R15"], '"boolean"', "must be a JSON object, got string")
    bad("node-null", ["R15"], "null", "must be a JSON object, got null")
    bad("node-integer", ["R15"], "1", "must be a JSON object, got integer")
    bad("type-missing", ["R15"], "{}", 'has no "type"')
    bad("type-not-string", ["R15"], '{"type":1}', '"type" must be a string')
    bad("type-unknown-string", ["R15"], '{"type":"string"}', 'unknown schema type "string"')
    bad("type-unknown-number", ["R15"], '{"type":"number"}', 'unknown schema type "number"')
    bad("type-case-sensitive", ["R15"], '{"type":"Boolean"}', 'unknown schema type "Boolean"')
    bad("key-case-sensitive", ["R15"], '{"Type":"boolean"}', 'has no "type"')
    for typ, good in [("const", '"value":1'), ("boolean", None), ("enum", '"values":[1]'),
                      ("integer", '"minimum":0,"maximum":1'), ("object", '"fields":{"a":%s}' % BOOL),
                      ("tuple", '"items":[%s]' % BOOL), ("array", '"items":%s,"length":1' % BOOL),
                      ("union", '"variants":{"a":%s}' % BOOL)]:
        body = '"type":"%s"' % typ + ("," + good if good else "")
        bad("extra-key-" + typ, ["R15"], "{%s,\"x\":1}" % body, 'unexpected key "x"')
        if good:
            bad("missing-key-" + typ, ["R15"], '{"type":"%s"}' % typ, "missing key")
    bad("extra-key-proto", ["R15"], '{"type":"boolean","__proto__":{}}', 'unexpected key "__proto__"',
        deviates_from_reference=True, reference="accepted (the key is swallowed)")
    bad("proto-supplies-missing-key", ["R15"], '{"type":"const","x":1,"__proto__":{"value":5}}', 'unexpected key',
        deviates_from_reference=True, reference="accepted as const 5")
    bad("duplicate-key-in-node", ["R7", "R11"], '{"type":"boolean","type":"boolean"}', "duplicate object key", cls="json")
    # R19 literals
    ok("literal-64-bytes", ["R19"], '{"type":"const","value":"%s"}' % ("a" * 64))
    bad("literal-65-bytes", ["R19"], '{"type":"const","value":"%s"}' % ("a" * 65), "65 UTF-8 bytes")
    ok("literal-64-bytes-multibyte", ["R19"], '{"type":"const","value":"%s"}' % ("é" * 32))
    bad("literal-65-bytes-multibyte", ["R19"], '{"type":"const","value":"%sa"}' % ("é" * 32), "65 UTF-8 bytes")
    ok("literal-64-bytes-4-byte-chars", ["R19"], '{"type":"const","value":"%s"}' % ("\U0001F600" * 16))
    ok("literal-64-bytes-escaped", ["R19"], '{"type":"const","value":"%s"}' % ("\\u0061" * 64))
    bad("literal-nul", ["R19"], r'{"type":"const","value":"\u0000"}', "control character U+0000")
    bad("literal-newline", ["R19"], r'{"type":"const","value":"a\nb"}', "control character U+000A")
    bad("literal-unit-separator", ["R19"], r'{"type":"const","value":"\u001f"}', "control character U+001F")
    bad("literal-del", ["R19"], r'{"type":"const","value":"\u007f"}', "control character U+007F")
    ok("literal-c1-control", ["R19"], r'{"type":"const","value":"\u0085"}')
    ok("literal-line-separator", ["R19"], r'{"type":"const","value":"\u2028"}')
    ok("literal-empty-string", ["R19"], '{"type":"const","value":""}')
    bad("literal-lone-surrogate", ["R5", "R19"], r'{"type":"const","value":"\ud800"}', "lone surrogate", cls="json",
        deviates_from_reference=True, reference="accepted, counted as 3 bytes")
    ok("literal-max-safe", ["R19"], '{"type":"const","value":9007199254740991}')
    ok("literal-min-safe", ["R19"], '{"type":"const","value":-9007199254740991}')
    bad("literal-beyond-safe", ["R6", "R19"], '{"type":"const","value":9007199254740992}', "outside", cls="json")
    bad("literal-fraction", ["R6", "R19"], '{"type":"const","value":1.5}', "not an exact integer", cls="json")
    bad("literal-1.0", ["R6", "R19"], '{"type":"const","value":1.0}', "not an exact integer", cls="json",
        deviates_from_reference=True, reference="accepted as const 1")
    bad("literal-object", ["R19"], '{"type":"const","value":{}}', "a literal must be")
    bad("literal-array", ["R19"], '{"type":"const","value":[1]}', "a literal must be")
    # R18 enum
    bad("enum-empty", ["R18"], '{"type":"enum","values":[]}', "must not be empty")
    bad("enum-not-array", ["R18"], '{"type":"enum","values":{"a":1}}', "must be an array")
    bad("enum-mixed-int-string", ["R18"], '{"type":"enum","values":[1,"1"]}', "one JSON type")
    bad("enum-mixed-null-bool", ["R18"], '{"type":"enum","values":[null,false]}', "one JSON type")
    bad("enum-mixed-bool-int", ["R18"], '{"type":"enum","values":[true,1]}', "one JSON type")
    bad("enum-duplicate-string", ["R18"], '{"type":"enum","values":["a","b","a"]}', "duplicates value 0")
    bad("enum-duplicate-escaped", ["R18"], r'{"type":"enum","values":["a","\u0061"]}', "duplicates value 0")
    bad("enum-duplicate-int", ["R18"], '{"type":"enum","values":[1,2,1]}', "duplicates value 0")
    bad("enum-duplicate-null", ["R18"], '{"type":"enum","values":[null,null]}', "duplicates value 0")
    bad("enum-duplicate-bool", ["R18"], '{"type":"enum","values":[true,true]}', "duplicates value 0")
    bad("enum-bad-literal", ["R18", "R19"], '{"type":"enum","values":["a",[]]}', "a literal must be")
    bad("enum-long-literal", ["R18", "R19"], '{"type":"enum","values":["%s"]}' % ("a" * 65), "65 UTF-8 bytes")
    ok("enum-36-no-duplicates", ["R18"], '{"type":"enum","values":[%s]}' % ",".join(str(i) for i in range(36)))
    bad("enum-36-late-duplicate", ["R18"], '{"type":"enum","values":[%s,3]}' % ",".join(str(i) for i in range(35)),
        "duplicates value 3")
    # R20 integer
    bad("integer-reversed", ["R20"], '{"type":"integer","minimum":2,"maximum":1}', "less than minimum")
    bad("integer-min-string", ["R20"], '{"type":"integer","minimum":"0","maximum":1}', "minimum must be an integer")
    bad("integer-max-null", ["R20"], '{"type":"integer","minimum":0,"maximum":null}', "maximum must be an integer")
    bad("integer-max-1e2", ["R6", "R20"], '{"type":"integer","minimum":0,"maximum":1e2}', "not an exact integer",
        cls="json", deviates_from_reference=True, reference="accepted, maximum 100")
    bad("integer-min-negative-zero", ["R6", "R20"], '{"type":"integer","minimum":-0,"maximum":1}', "-0", cls="json",
        deviates_from_reference=True, reference="accepted, minimum 0")
    bad("integer-max-beyond-safe", ["R6", "R20"], '{"type":"integer","minimum":0,"maximum":9007199254740992}',
        "outside", cls="json")
    # R21/R25 object and identifiers
    ok("object-16-fields", ["R21"], fields(16, BOOL))
    bad("object-17-fields", ["R21"], fields(17, BOOL), "declares 17 fields; the maximum is 16")
    bad("object-no-fields", ["R21"], '{"type":"object","fields":{}}', "at least one")
    bad("object-fields-array", ["R21"], '{"type":"object","fields":[%s]}' % BOOL, "must be a JSON object")
    bad("object-duplicate-field", ["R7", "R21"], '{"type":"object","fields":{"a":%s,"a":%s}}' % (BOOL, BOOL),
        "duplicate object key", cls="json")
    for name in ["a", "A", "a_1", "z9", "x" * 64, "aB_9"]:
        ok("identifier-ok-" + name[:12] + ("-64" if len(name) == 64 else ""), ["R25"],
           '{"type":"object","fields":{"%s":%s}}' % (name, BOOL))
    for tag, name, msg in [("digit-first", "9x", 'field name "9x" must start with a letter'),
                           ("underscore-first", "_a", "must start with a letter"),
                           ("dash", "a-b", "may contain only"),
                           ("space", "a b", "may contain only"),
                           ("dot", "a.b", "may contain only"),
                           ("empty", "", "must not be empty"),
                           ("non-ascii", "é", "must start with a letter"),
                           ("non-ascii-later", "aé", "may contain only"),
                           ("65-chars", "x" * 65, "65 bytes long; the maximum is 64"),
                           ("proto", "__proto__", "must start with a letter")]:
        bad("identifier-bad-" + tag, ["R25"], '{"type":"object","fields":{"%s":%s}}' % (name, BOOL), msg)
    bad("identifier-checked-before-children", ["R21", "R25"],
        '{"type":"object","fields":{"a":{"type":"nope"},"9":%s}}' % BOOL, 'field name "9" must start with a letter')
    # R22 tuple
    ok("tuple-1", ["R22"], tuple_of([BOOL]))
    ok("tuple-16", ["R22"], tuple_of([BOOL] * 16))
    bad("tuple-17", ["R22"], tuple_of([BOOL] * 17), "declares 17 items; the maximum is 16")
    bad("tuple-0", ["R22"], tuple_of([]), "at least one item")
    bad("tuple-items-object", ["R22"], '{"type":"tuple","items":%s}' % BOOL, "must be an array")
    # R23 array
    ok("array-length-64", ["R23"], arrays(1, 64, '{"type":"const","value":0}'))
    bad("array-length-65", ["R23"], arrays(1, 65, BOOL), "array length 65 is outside 0..64")
    bad("array-length-negative", ["R23"], arrays(1, -1, BOOL), "array length -1 is outside 0..64")
    bad("array-length-string", ["R23"], '{"type":"array","items":%s,"length":"3"}' % BOOL, "must be an integer")
    bad("array-length-1.0", ["R6", "R23"], '{"type":"array","items":%s,"length":1.0}' % BOOL, "not an exact integer",
        cls="json", deviates_from_reference=True, reference="accepted, length 1")
    bad("array-length-before-items", ["R23"], '{"type":"array","items":{"type":"nope"},"length":65}', "array length 65")
    bad("array-items-array", ["R23"], '{"type":"array","items":[%s],"length":1}' % BOOL, "must be a JSON object, got array")
    # R24 union
    ok("union-1", ["R24"], union(["only"], BOOL))
    ok("union-16", ["R24"], union(["t%d" % i for i in range(16)], BOOL))
    bad("union-17", ["R24"], union(["t%d" % i for i in range(17)], BOOL), "declares 17 variants; the maximum is 16")
    bad("union-0", ["R24"], '{"type":"union","variants":{}}', "at least one")
    bad("union-variants-array", ["R24"], '{"type":"union","variants":[%s]}' % BOOL, "must be a JSON object")
    bad("union-tag-digit", ["R24", "R25"], union(["1a"], BOOL), 'union tag "1a" must start with a letter')
    bad("union-tag-65", ["R24", "R25"], union(["t" * 65], BOOL), "65 bytes long")
    # R26/R27 cardinality and charge
    ok("charge-2pow1024-exact", ["R26", "R27"], arrays(1, 64, arrays(1, 16, BOOL)))
    ok("charge-2pow1024-plus-1-capped", ["R26", "R27"],
       '{"type":"union","variants":{"a":%s,"b":{"type":"const","value":1}}}' % arrays(1, 64, arrays(1, 16, BOOL)))
    ok("charge-union-of-one-2pow1024", ["R26", "R27"], union(["a"], arrays(1, 64, arrays(1, 16, BOOL))))
    ok("charge-4-deep-64-arrays-capped", ["R26", "R27"], arrays(4, 64, BOOL))
    ok("charge-6-deep-full-range", ["R26", "R27"], arrays(6, 64, FULLINT))
    ok("charge-array-of-full-range", ["R26", "R27"], arrays(1, 64, FULLINT))
    ok("charge-object-of-unions", ["R26", "R27"], fields(12, union(["a", "b", "c"], '{"type":"enum","values":[1,2,3]}')))
    ok("charge-enum-3", ["R27"], '{"type":"enum","values":["a","b","c"]}')
    return v


# ---------------------------------------------------------------- result

def gen_result():
    v = Vectors("result", "R28-R37: a /query/out file checked against a schema. ok cases give the canonical "
                          "value (wrap it as {\"status\":\"ok\",\"result\":<canonical>}); failures are "
                          "error class json (parse, size) or value (does not conform).")

    def ok(id, rules, schema, inp, canonical, **kw):
        v.add(id, rules, schema=schema, **field("input", inp), ok=True, canonical=canonical, **kw)

    def bad(id, rules, schema, inp, cls, contains=None, **kw):
        extra = {"error_contains": contains} if contains else {}
        v.add(id, rules, schema=schema, **field("input", inp), ok=False, error_class=cls, **extra, **kw)

    OBJ = '{"type":"object","fields":{"b":{"type":"boolean"},"a":{"type":"integer","minimum":-5,"maximum":5}}}'
    UNI = '{"type":"union","variants":{"none":{"type":"const","value":null},"n":{"type":"integer","minimum":0,"maximum":9}}}'
    INT = '{"type":"integer","minimum":-5,"maximum":5}'
    ENUMS = '{"type":"enum","values":["x","y","<a&b>"]}'
    # R28 size and parsing
    ok("size-8192", ["R28"], BOOL, "true" + " " * 8188, "true")
    bad("size-8193", ["R28"], BOOL, "true" + " " * 8189, "json", "the maximum is 8192")
    bad("empty-file", ["R28", "R3"], BOOL, "", "json", "input is empty")
    bad("trailing-newline-then-garbage", ["R28", "R3"], BOOL, "true\nfalse", "json", "unexpected content")
    ok("trailing-newline", ["R28", "R3"], BOOL, "true\n", "true")
    bad("bom", ["R28", "R2"], BOOL, "\ufefftrue", "json")
    bad("invalid-utf8", ["R28", "R2"], ENUMS, b'"x\xff"', "json", "invalid UTF-8")
    bad("duplicate-key", ["R28", "R7"], OBJ, '{"a":1,"b":true,"a":1}', "json", "duplicate object key")
    bad("lone-surrogate", ["R28", "R5"], ENUMS, r'"\ud800"', "json", "lone surrogate")
    bad("python-nan", ["R28", "R4"], INT, "NaN", "json")
    # R29 const/enum equality, no coercion
    ok("const-from-schema", ["R29", "R36"], '{"type":"const","value":"a/b"}', r'"a\/b"', '"a/b"')
    ok("const-escaped-input", ["R29", "R36"], '{"type":"const","value":"a"}', r'"\u0061"', '"a"')
    ok("const-null", ["R29"], '{"type":"const","value":null}', "null", "null")
    bad("const-wrong-value", ["R29"], '{"type":"const","value":1}', "2", "value", "not the schema's constant")
    bad("const-string-for-int", ["R29"], '{"type":"const","value":1}', '"1"', "value", "got string")
    bad("const-1.0-for-1", ["R29", "R6"], '{"type":"const","value":1}', "1.0", "json", "not an exact integer",
        deviates_from_reference=True, reference="accepted, canonical 1")
    bad("const-false-for-null", ["R29"], '{"type":"const","value":null}', "false", "value")
    ok("enum-member", ["R29"], ENUMS, '"y"', '"y"')
    ok("enum-member-html", ["R29", "R37"], ENUMS, r'"\u003ca&b>"', '"<a&b>"')
    bad("enum-non-member", ["R29"], ENUMS, '"z"', "value", "not one of the 3 enum values")
    bad("enum-case", ["R29"], ENUMS, '"X"', "value")
    bad("enum-int-for-string", ["R29"], ENUMS, "1", "value", "got integer")
    ok("enum-integer", ["R29"], '{"type":"enum","values":[10,20]}', "20", "20")
    bad("enum-string-for-integer", ["R29"], '{"type":"enum","values":[10,20]}', '"20"', "value")
    bad("enum-exponent-for-integer", ["R29", "R6"], '{"type":"enum","values":[10,20]}', "2e1", "json",
        deviates_from_reference=True, reference="accepted, canonical 20")
    ok("enum-bool", ["R29"], '{"type":"enum","values":[false]}', "false", "false")
    # R30 boolean
    ok("boolean-true", ["R30"], BOOL, "true", "true")
    ok("boolean-false-spaced", ["R30"], BOOL, " \n false \n", "false")
    bad("boolean-int", ["R30"], BOOL, "1", "value", "expected boolean, got integer")
    bad("boolean-string", ["R30"], BOOL, '"true"', "value", "expected boolean, got string")
    bad("boolean-null", ["R30"], BOOL, "null", "value", "expected boolean, got null")
    bad("boolean-array", ["R30"], BOOL, "[true]", "value", "expected boolean, got array")
    # R31 integer
    ok("integer-min", ["R31"], INT, "-5", "-5")
    ok("integer-max", ["R31"], INT, "5", "5")
    ok("integer-zero", ["R31"], INT, "0", "0")
    bad("integer-below", ["R31"], INT, "-6", "value", "outside the range -5..5")
    bad("integer-above", ["R31"], INT, "6", "value", "outside the range -5..5")
    bad("integer-1.0", ["R31", "R6"], INT, "1.0", "json", "not an exact integer",
        deviates_from_reference=True, reference="accepted, canonical 1")
    bad("integer-1e0", ["R31", "R6"], INT, "1e0", "json", "not an exact integer",
        deviates_from_reference=True, reference="accepted, canonical 1")
    bad("integer-100e-2", ["R31", "R6"], INT, "100e-2", "json",
        deviates_from_reference=True, reference="accepted, canonical 1")
    bad("integer-negative-zero", ["R31", "R6"], INT, "-0", "json", "-0",
        deviates_from_reference=True, reference="accepted, canonical 0")
    bad("integer-tiny-fraction", ["R31", "R6"], INT, "1.000000000000000001", "json",
        deviates_from_reference=True, reference="accepted (rounds to 1)")
    bad("integer-underflow", ["R31", "R6"], INT, "1e-400", "json",
        deviates_from_reference=True, reference="accepted (rounds to 0)")
    bad("integer-string", ["R31"], INT, '"1"', "value", "expected integer, got string")
    ok("integer-full-range-max", ["R31"], FULLINT, "9007199254740991", "9007199254740991")
    bad("integer-full-range-beyond", ["R31", "R6"], FULLINT, "9007199254740992", "json")
    # R32 object
    ok("object-declared-order", ["R32", "R35"], OBJ, '{"a":-1,"b":true}', '{"b":true,"a":-1}')
    ok("object-whitespace", ["R32", "R35"], OBJ, '{\n  "b" : false ,\n  "a" : 5\n}\n', '{"b":false,"a":5}')
    bad("object-missing-field", ["R32"], OBJ, '{"a":1}', "value", 'missing field "b"')
    bad("object-extra-key", ["R32"], OBJ, '{"a":1,"b":true,"c":0}', "value", "object has 3 keys")
    bad("object-extra-proto", ["R32", "R7"], OBJ, '{"a":1,"b":true,"__proto__":1}', "value", "object has 3 keys",
        deviates_from_reference=True, reference="accepted, canonical {\"b\":true,\"a\":1}")
    bad("object-empty", ["R32"], OBJ, "{}", "value", "missing field")
    bad("object-array", ["R32"], OBJ, "[true,1]", "value", "expected object, got array")
    bad("object-field-invalid", ["R32"], OBJ, '{"a":9,"b":true}', "value", "at $.a: integer is outside")
    bad("object-null", ["R32"], OBJ, "null", "value", "expected object, got null")
    nested = '{"type":"object","fields":{"o":%s,"t":{"type":"tuple","items":[%s,%s]}}}' % (OBJ, BOOL, INT)
    ok("object-nested", ["R32", "R33", "R35"], nested, '{"t":[true,-5],"o":{"a":0,"b":false}}',
       '{"o":{"b":false,"a":0},"t":[true,-5]}')
    bad("object-nested-path", ["R32", "R33"], nested, '{"t":[true,"x"],"o":{"a":0,"b":false}}', "value", "at $.t[1]")
    # R33 tuple and array
    TUP = '{"type":"tuple","items":[{"type":"boolean"},{"type":"const","value":"k"}]}'
    ok("tuple", ["R33"], TUP, '[ true , "k" ]', '[true,"k"]')
    bad("tuple-short", ["R33"], TUP, "[true]", "value", "expected an array of length 2, got length 1")
    bad("tuple-long", ["R33"], TUP, '[true,"k",1]', "value", "length 3")
    bad("tuple-positional", ["R33"], TUP, '["k",true]', "value", "at $[0]")
    ARR = arrays(1, 3, BOOL)
    ok("array-3", ["R33"], ARR, "[true,false,true]", "[true,false,true]")
    bad("array-short", ["R33"], ARR, "[true,false]", "value", "expected an array of length 3, got length 2")
    bad("array-long", ["R33"], ARR, "[true,false,true,true]", "value", "length 4")
    bad("array-element", ["R33"], ARR, "[true,false,0]", "value", "at $[2]: expected boolean")
    ok("array-empty", ["R33"], arrays(1, 0, BOOL), "[ ]", "[]")
    bad("array-empty-nonempty", ["R33"], arrays(1, 0, BOOL), "[true]", "value", "length 1")
    ok("array-64", ["R33"], arrays(1, 64, BOOL), "[" + ",".join(["true"] * 64) + "]", "[" + ",".join(["true"] * 64) + "]")
    ok("array-nested", ["R33"], arrays(2, 2, INT), "[[1, 2], [-3, 4]]", "[[1,2],[-3,4]]")
    # R34 union
    ok("union-tag-first", ["R34", "R35"], UNI, '{"value":3,"tag":"n"}', '{"tag":"n","value":3}')
    ok("union-const-variant", ["R34"], UNI, '{"tag":"none","value":null}', '{"tag":"none","value":null}')
    bad("union-unknown-tag", ["R34"], UNI, '{"tag":"x","value":1}', "value", "not one of the 2 declared tags")
    bad("union-missing-value", ["R34"], UNI, '{"tag":"n"}', "value", 'exactly the keys "tag" and "value"')
    bad("union-missing-tag", ["R34"], UNI, '{"value":1}', "value", 'exactly the keys "tag" and "value"')
    bad("union-extra-key", ["R34"], UNI, '{"tag":"n","value":1,"x":1}', "value", 'exactly the keys')
    bad("union-tag-not-string", ["R34"], UNI, '{"tag":1,"value":1}', "value", "union tag must be a string")
    bad("union-value-invalid", ["R34"], UNI, '{"tag":"n","value":10}', "value", "at $.value")
    bad("union-proto-tag", ["R34", "R7"], UNI, '{"tag":"__proto__","value":1}', "value", "not one of")
    bad("union-untagged", ["R34"], UNI, "3", "value", "expected a union object")
    TRICKY = '{"type":"union","variants":{"s":{"type":"enum","values":["}\\",{","]"]},"p":{"type":"tuple","items":[%s,%s]}}}' % (BOOL, UNI)
    ok("union-value-first-brackets-in-string", ["R34", "R35"], TRICKY, r'{"value":"}\",{","tag":"s"}', r'{"tag":"s","value":"}\",{"}')
    ok("union-value-first-nested", ["R34", "R35"], TRICKY, '{ "value" : [ true , {"value":null,"tag":"none"} ] ,\n "tag" : "p" }',
       '{"tag":"p","value":[true,{"tag":"none","value":null}]}')
    bad("union-value-first-nested-bad", ["R34"], TRICKY, '{"value":[true,{"value":10,"tag":"n"}],"tag":"p"}', "value", "at $.value[1].value")
    bad("union-value-first-wrong-variant", ["R34"], TRICKY, '{"value":"]","tag":"p"}', "value", "expected array")
    bad("union-duplicate-tag", ["R34", "R7"], UNI, '{"tag":"n","tag":"n","value":1}', "json", "duplicate object key")
    ok("object-escaped-keys", ["R32", "R7"], OBJ, r'{"\u0061":-2,"\u0062":false}', '{"b":false,"a":-2}')
    bad("union-tag-case", ["R34"], UNI, '{"tag":"N","value":1}', "value")
    # R35-R37 canonical bytes
    ESC = '{"type":"enum","values":["q\\"b\\\\s/e","\u2028\u2029","ü中\U0001F600","<>&\u0085"]}'
    ok("canonical-escapes-quote-backslash", ["R37"], ESC, r'"q\"b\\s\/e"', r'"q\"b\\s/e"')
    ok("canonical-line-separators-raw", ["R37"], ESC, r'"\u2028\u2029"', '"\u2028\u2029"')
    ok("canonical-non-ascii-raw", ["R37"], ESC, r'"\u00fc\u4e2d\ud83d\ude00"', '"ü中\U0001F600"')
    ok("canonical-no-html-c1-raw", ["R37"], ESC, r'"\u003c\u003e\u0026\u0085"', '"<>&\u0085"')
    ok("canonical-integers-plain", ["R36"], arrays(1, 3, FULLINT), "[-9007199254740991, 0, 9007199254740991]",
       "[-9007199254740991,0,9007199254740991]")
    big = '{"type":"object","fields":{%s}}' % ",".join('"k%02d":%s' % (i, ARR) for i in range(16))
    body = ",".join('"k%02d": [true, false, true]' % i for i in reversed(range(16)))
    ok("canonical-16-fields-reversed", ["R35"], big, "{" + body + "}",
       "{" + ",".join('"k%02d":[true,false,true]' % i for i in range(16)) + "}")
    return v


# ---------------------------------------------------------------- request

def b64(s):
    return base64.urlsafe_b64encode(s.encode() if isinstance(s, str) else s).decode().rstrip("=")


def gen_request():
    v = Vectors("request", "R38-R44: envelopes, repo slugs, scripts, the schema header, whole requests, "
                           "sensitivities and constants. request cases list the failing parts "
                           "(repo, schema, script); an empty list means valid.")
    # R38 envelopes
    v.add("envelope-error", ["R38"], kind="envelope", status="error", body='{"status":"error"}')
    v.add("envelope-ok", ["R38"], kind="envelope", status="ok", canonical='{"b":true}',
          body='{"status":"ok","result":{"b":true}}')
    v.add("envelope-ok-string", ["R38"], kind="envelope", status="ok", canonical='"\u2028"',
          body='{"status":"ok","result":"\u2028"}')
    # R39 repo slugs
    for s in ["a/b", "my-org/private-service", "A1/x.y_z-9", "o/.github", "o/x.", "o/.x", "o-x/r", "o-x-y/r",
              "0/0", "o" * 39 + "/" + "n" * 100, "O/R"]:
        v.add("repo-ok-" + s[:24].replace("/", "_"), ["R39"], kind="repo", input=s, ok=True)
    for tag, s in [("empty", ""), ("no-slash", "owner"), ("two-slashes", "a/b/c"), ("empty-owner", "/b"),
                   ("empty-name", "a/"), ("owner-dash-first", "-a/b"), ("owner-underscore", "a_b/c"),
                   ("owner-dot", "a.b/c"), ("owner-40", "o" * 40 + "/r"), ("name-101", "o/" + "n" * 101),
                   ("total-141", "o" * 39 + "/" + "n" * 101), ("name-dot", "o/."), ("name-dotdot", "o/.."),
                   ("name-contains-dotdot", "o/a..b"), ("name-starts-dotdot", "o/..a"), ("name-ends-dotdot", "o/a.."),
                   ("url", "https://github.com/o/r"), ("host", "github.com/o/r"), ("scheme-relative", "//o/r"),
                   ("query", "o/r?x=1"), ("fragment", "o/r#x"), ("wildcard", "o/*"), ("space", "o/r r"),
                   ("newline", "o/r\n"), ("newline-inside", "o/r\nx/y"), ("non-ascii-owner", "ö/r"),
                   ("non-ascii-name", "o/ré"), ("backslash", "o\\r"), ("percent", "o/r%2e"), ("tilde", "~/r"),
                   ("colon", "o:r/x")]:
        v.add("repo-bad-" + tag, ["R39"], kind="repo", input=s, ok=False)
    # GitHub's owner rule: no hyphen at the end, none doubled. The reference's
    # regex accepts both; names GitHub cannot create are refused here.
    for tag, s in [("owner-dash-last", "o-/r"), ("owner-dash-double", "o--x/r"), ("owner-only-dash", "-/r"),
                   ("leading-space", " o/r"), ("trailing-space", "o/r ")]:
        ref = "accepted" if tag in ("owner-dash-last", "owner-dash-double") else None
        kw = dict(deviates_from_reference=True, reference=ref) if ref else {}
        v.add("repo-bad-" + tag, ["R39"], kind="repo", input=s, ok=False, **kw)
    # R40 scripts
    def script(id, ok, **kw):
        v.add("script-" + id, ["R40"], kind="script", ok=ok, **kw)
    script("empty", False, input="")
    script("one-byte", True, input="x")
    script("print", True, input="print(1)\n")
    script("nul-byte", True, input="a\u0000b")
    script("64k", True, input_parts=[{"text": "a", "repeat": 65536}])
    script("64k-plus-1", False, input_parts=[{"text": "a", "repeat": 65537}])
    script("64k-two-byte-chars", True, input_parts=[{"text": "é", "repeat": 32768}])
    script("64k-plus-1-multibyte", False, input_parts=[{"text": "é", "repeat": 32768}, {"text": "a", "repeat": 1}])
    script("invalid-utf8", False, input_hex="61ff62")
    script("encoded-surrogate", False, input_hex="eda080")
    script("truncated-utf8", False, input_hex="61c3")
    # R41 schema header
    def header(id, ok, h, decoded=None, **kw):
        case = dict(kind="header", input=h, ok=ok)
        if decoded is not None:
            case["decoded"] = decoded
        case.update(kw)
        v.add("header-" + id, ["R41"], **case)
    header("boolean", True, b64(BOOL), BOOL)
    header("url-alphabet", True, b64('{"type":"enum","values":["a>b?","~~~"]}'), '{"type":"enum","values":["a>b?","~~~"]}')
    header("4099-bytes", True, b64("a" * 4099), "a" * 4099)
    assert len(b64("a" * 4099)) == 5466
    header("5467-chars", False, b64("a" * 4099) + "A")
    header("4100-bytes", False, b64("a" * 4100))
    header("empty", False, "")
    header("padding", False, base64.urlsafe_b64encode(b"ab").decode())
    header("std-alphabet-plus", False, "ab+c")
    header("std-alphabet-slash", False, "ab/c")
    header("space", False, "ab c")
    header("length-mod-4-is-1", False, "abcde")
    header("non-zero-trailing-bits", False, "YR", deviates_from_reference=True, reference="accepted, decodes to \"a\"")
    header("invalid-utf8", False, b64(b"\xff\xfe"))
    header("not-json-still-decodes", True, b64("not json"), "not json")
    # R42 whole requests
    good_h, good_s = b64(BOOL), "print(1)"
    def req(id, repo, h, fails, script=good_s, **kw):
        case = dict(kind="request", repo=repo, schema_b64=h, failing=fails)
        case.update(field("script", script) if not isinstance(script, dict) else script)
        case.update(kw)
        v.add("request-" + id, ["R42"], **case)
    req("valid", "o/r", good_h, [])
    req("bad-repo", "o/..", good_h, ["repo"])
    req("bad-header", "o/r", "!!", ["schema"])
    req("bad-schema-json", "o/r", b64('{"type":"boolean"'), ["schema"])
    req("bad-schema-dsl", "o/r", b64('{"type":"bool"}'), ["schema"])
    req("schema-over-4096-compact", "o/r", b64(fields(16, '{"type":"enum","values":[%s]}' % ",".join('"%03d"' % i for i in range(45)))), ["schema"])
    req("empty-script", "o/r", good_h, ["script"], script="")
    req("all-three", "", "", ["repo", "schema", "script"], script="")
    req("script-and-repo", "a/b/c", good_h, ["repo", "script"], script={"script_hex": "ff"})
    # R43 sensitivities
    for name, bits, metered, okk in [("public", 0, False, True), ("internal", 64, True, True),
                                     ("confidential", 8, True, True), ("sealed", 0, True, True),
                                     ("Internal", 0, False, False), ("secret", 0, False, False), ("", 0, False, False)]:
        v.add("sensitivity-" + (name or "empty"), ["R43"], kind="sensitivity", name=name, ok=okk,
              metered=metered, budget_bits=bits)
    # R27 charge formula on bare cardinalities
    for name, card in [("1", 1), ("2", 2), ("3", 3), ("4", 4), ("5", 5), ("256", 256), ("257", 257),
                       ("2pow53", 2**53), ("2pow64", 2**64), ("2pow1024-minus-1", 2**1024 - 1),
                       ("2pow1024", 2**1024), ("2pow1024-plus-1", 2**1024 + 1), ("2pow2000", 2**2000)]:
        v.add("charge-card-" + name, ["R27"], kind="charge", cardinality=str(card), charge_bits=charge(card))
    # R44 constants
    for name, val in [("QueryProtocolVersion", 2), ("MaxSchemaBytes", 4096), ("MaxSchemaDepth", 6),
                      ("MaxSchemaNodes", 64), ("MaxEnumValues", 4096), ("MaxLiteralStringBytes", 64),
                      ("MaxIdentifierBytes", 64), ("MaxObjectFields", 16), ("MaxTupleItems", 16),
                      ("MaxArrayLength", 64), ("MaxUnionVariants", 16), ("MaxSafeInteger", MAX_SAFE),
                      ("MaxJSONBytes", 8192), ("MaxJSONDepth", 32), ("MaxResultBytes", 8192),
                      ("MaxScriptBytes", 65536), ("MaxRepoSlugLength", 140), ("MaxSchemaHeaderChars", 5466),
                      ("MaxSchemaHeaderBytes", 4099), ("ResultStatusBits", 1), ("TimingBucketBits", 3),
                      ("MinChargeBits", 4), ("MaxChargeBits", 1029), ("CardinalityCapBits", 1024),
                      ("TimingToleranceMS", 5), ("FinalBucketMarginMS", 60000), ("MaxQueryTimeoutSeconds", 540)]:
        v.add("constant-" + name, ["R44"], kind="constant", name=name, value=val)
    v.add("constant-TimingBucketsMS", ["R44"], kind="constant", name="TimingBucketsMS",
          value=[10, 100, 1000, 10000, 60000, 600000])
    return v


def main():
    total = 0
    for gen in (gen_json, gen_schema, gen_result, gen_request):
        vec = gen()
        n = vec.write()
        print("%s.jsonl: %d cases" % (vec.name, n))
        total += n
    print("total: %d cases" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
