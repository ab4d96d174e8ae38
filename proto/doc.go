// Package proto holds everything finite about awf: the schema DSL, cardinality
// and information charge, the strict JSON parser, schema-driven canonical
// serialisation, the two response envelopes and request validation.
//
// It does no I/O, keeps no state and imports nothing of awf's, so the broker,
// the CLIs and other implementations (through tests/conformance) share exactly
// one definition of what a bounded answer is. proto/CONTRACT.md is the
// normative description; every rule there has a number that the tests and
// conformance vectors cite.
//
// Error values wrap one of the class sentinels ErrJSON, ErrSchema, ErrValue
// and ErrRequest, so callers can pick an audit label with errors.Is. Messages
// are written for operators. Messages about a result (ErrJSON, ErrValue from
// CheckResult) never quote the result's content: they name byte offsets,
// schema-declared paths and JSON types only.
package proto
