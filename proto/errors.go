package proto

import "errors"

// Error classes. Every error returned by this package wraps exactly one of
// them (ValidateRequest may join several, each wrapping ErrRequest too).
var (
	// ErrJSON: the input is not strict JSON within the parser's limits.
	ErrJSON = errors.New("malformed JSON")
	// ErrSchema: the schema text is not a valid finite schema.
	ErrSchema = errors.New("invalid schema")
	// ErrValue: a parsed value does not conform to its schema.
	ErrValue = errors.New("value does not conform to the schema")
	// ErrRequest: a query request (repo, schema header or script) is invalid.
	ErrRequest = errors.New("invalid request")
)
