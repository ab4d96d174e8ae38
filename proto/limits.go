package proto

import "time"

// Protocol and DSL limits. CONTRACT.md cites each one by rule number.
const (
	// QueryProtocolVersion is the value of the X-AWF-Query-Version header.
	QueryProtocolVersion = 2
	// ContractVersion is the version of CONTRACT.md and the conformance vectors.
	ContractVersion = "1.0.0"

	// MaxSchemaBytes caps the compact re-serialisation of a schema.
	MaxSchemaBytes = 4096
	// MaxSchemaDepth is the depth of the deepest allowed schema node (root = 0).
	MaxSchemaDepth = 6
	// MaxSchemaNodes caps the number of schema nodes.
	MaxSchemaNodes = 64
	// MaxEnumValues caps enum members (unreachable under MaxSchemaBytes).
	MaxEnumValues = 4096
	// MaxLiteralStringBytes caps a string literal, in UTF-8 bytes.
	MaxLiteralStringBytes = 64
	// MaxIdentifierBytes caps a field name or union tag.
	MaxIdentifierBytes = 64
	// MaxObjectFields caps the fields of an object schema.
	MaxObjectFields = 16
	// MaxTupleItems caps the items of a tuple schema.
	MaxTupleItems = 16
	// MaxArrayLength caps the fixed length of an array schema.
	MaxArrayLength = 64
	// MaxUnionVariants caps the variants of a union schema.
	MaxUnionVariants = 16
	// MaxSafeInteger is 2^53-1; integers beyond ±MaxSafeInteger are rejected.
	MaxSafeInteger = 1<<53 - 1

	// MaxJSONBytes caps any input to the strict JSON parser.
	MaxJSONBytes = 8192
	// MaxJSONDepth is the most arrays/objects that may enclose one value.
	MaxJSONDepth = 32
	// MaxResultBytes caps a /query/out file.
	MaxResultBytes = 8192

	// MaxScriptBytes caps a query script.
	MaxScriptBytes = 65536
	// MaxRepoSlugLength caps an owner/name slug (implied by its shape).
	MaxRepoSlugLength = 140
	// MaxSchemaHeaderChars caps X-AWF-Schema-B64: ceil(4096*4/3)+4.
	MaxSchemaHeaderChars = 5466
	// MaxSchemaHeaderBytes is the most bytes a header of MaxSchemaHeaderChars decodes to.
	MaxSchemaHeaderBytes = MaxSchemaHeaderChars * 6 / 8

	// ResultStatusBits is the charge for the observable ok/error distinction.
	ResultStatusBits = 1
	// TimingBucketBits is ceil(log2(number of timing buckets)).
	TimingBucketBits = 3
	// MinChargeBits is the charge of a const schema.
	MinChargeBits = ResultStatusBits + TimingBucketBits
	// CardinalityCapBits: cardinalities above 2^CardinalityCapBits are charged
	// as 2^CardinalityCapBits+1, as the reference protocol does.
	CardinalityCapBits = 1024
	// MaxChargeBits is the largest charge any schema can have.
	MaxChargeBits = ResultStatusBits + CardinalityCapBits + 1 + TimingBucketBits
	// MaxExactCardinalityBits bounds the exact cardinality that is materialised;
	// above it Cardinality returns nil and CardinalityLog2 estimates.
	MaxExactCardinalityBits = 1 << 16

	// TimingToleranceMS is the public scheduler tolerance of a bucket wake-up.
	TimingToleranceMS = 5
	// FinalBucketMarginMS is reserved before the last bucket for cleanup.
	FinalBucketMarginMS = 60000
	// MaxQueryTimeoutSeconds is the largest configurable script timeout.
	MaxQueryTimeoutSeconds = 540
)

// TimingBuckets returns the six fixed response-time boundaries, shortest
// first: 10 ms, 100 ms, 1 s, 10 s, 60 s, 600 s. The caller owns the slice.
func TimingBuckets() []time.Duration {
	return []time.Duration{
		10 * time.Millisecond,
		100 * time.Millisecond,
		time.Second,
		10 * time.Second,
		60 * time.Second,
		600 * time.Second,
	}
}

// Sensitivity names, in order of decreasing budget.
const (
	SensitivityPublic       = "public"
	SensitivityInternal     = "internal"
	SensitivityConfidential = "confidential"
	SensitivitySealed       = "sealed"
)

// Sensitivities returns the sensitivity names in order of decreasing budget.
// The caller owns the slice.
func Sensitivities() []string {
	return []string{SensitivityPublic, SensitivityInternal, SensitivityConfidential, SensitivitySealed}
}

// SensitivityBudget returns the per-run bit budget of a sensitivity: public is
// unmetered (metered false, bits 0), internal 64, confidential 8, sealed 0.
// ok is false for an unknown name; names are case-sensitive.
func SensitivityBudget(name string) (bits int64, metered bool, ok bool) {
	switch name {
	case SensitivityPublic:
		return 0, false, true
	case SensitivityInternal:
		return 64, true, true
	case SensitivityConfidential:
		return 8, true, true
	case SensitivitySealed:
		return 0, true, true
	}
	return 0, false, false
}

// Affordable reports whether a fresh repository of the given sensitivity can
// fund one query of chargeBits, and how many such queries one run can fund
// (-1 when unmetered). Unknown sensitivities fund nothing.
func Affordable(sensitivity string, chargeBits int64) (ok bool, perRun int64) {
	bits, metered, known := SensitivityBudget(sensitivity)
	switch {
	case !known || chargeBits <= 0:
		return false, 0
	case !metered:
		return true, -1
	}
	n := bits / chargeBits
	return n > 0, n
}
