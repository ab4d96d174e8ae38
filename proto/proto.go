// Package proto holds everything finite about awf: the schema DSL, cardinality
// and charge, the strict JSON parser, canonical serialisation, the envelopes
// and request validation. It does no I/O and imports nothing of awf's.
//
// STUB: the API below is the contract; the proto work replaces the bodies.
package proto

import (
	"errors"
	"math/big"
)

var errStub = errors.New("proto: not implemented yet")

// ErrorEnvelope is the one canonical failure body.
const ErrorEnvelope = `{"status":"error"}`

// Schema is a parsed, validated finite schema.
type Schema struct{}

// ParseSchema parses schema JSON text strictly and validates it.
func ParseSchema(src []byte) (*Schema, error) { return nil, errStub }

// Cardinality is the exact number of distinct values the schema admits.
func (s *Schema) Cardinality() *big.Int { return nil }

// ChargeBits is 1 + ceil(log2(cardinality)) + 3, capped as the reference caps it.
func (s *Schema) ChargeBits() int64 { return 0 }

// CheckResult parses a /query/out file strictly, validates it against s, and
// returns its canonical serialisation.
func (s *Schema) CheckResult(out []byte) ([]byte, error) { return nil, errStub }

// OKEnvelope wraps a canonical value in the success envelope.
func OKEnvelope(canonical []byte) []byte {
	b := []byte(`{"status":"ok","result":`)
	b = append(b, canonical...)
	return append(b, '}')
}

// ValidateRepoSlug checks an owner/name slug.
func ValidateRepoSlug(s string) error { return errStub }

// ValidateScript checks a script body.
func ValidateScript(b []byte) error { return errStub }

// DecodeSchemaHeader checks and decodes an X-AWF-Schema-B64 header value.
func DecodeSchemaHeader(h string) ([]byte, error) { return nil, errStub }
