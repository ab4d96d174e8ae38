package proto

import (
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ValidateRepoSlug checks a bare owner/name slug (R39): an owner of 1–39
// ASCII letters, digits and single inner '-' (GitHub's rule for account and
// organisation names), one '/', and a name of 1–100 ASCII letters, digits,
// '.', '_' and '-' that is not "." or ".." and contains no "..". No scheme,
// host, query, fragment, wildcard, white space or extra segment can pass.
// This is the only slug rule: the config loader, staging and the client all
// call it, so a slug one of them accepts is never refused by another.
// Errors wrap ErrRequest.
func ValidateRepoSlug(s string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: repo %q: %s", ErrRequest, s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return fmt.Errorf("%w: repo slug is empty", ErrRequest)
	}
	if len(s) > MaxRepoSlugLength {
		return fmt.Errorf("%w: repo slug is %d bytes; the maximum is %d", ErrRequest, len(s), MaxRepoSlugLength)
	}
	slash := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if slash >= 0 {
				return bad("must be owner/name with exactly one '/'")
			}
			slash = i
		}
	}
	if slash < 0 {
		return bad("must be owner/name")
	}
	owner, name := s[:slash], s[slash+1:]
	switch {
	case owner == "":
		return bad("owner is empty")
	case len(owner) > 39:
		return bad("owner is %d characters; the maximum is 39", len(owner))
	case !isAlnum(owner[0]):
		return bad("owner must start with an ASCII letter or digit")
	case owner[len(owner)-1] == '-':
		return bad("owner must not end with '-'")
	}
	for i := 1; i < len(owner); i++ {
		if !isAlnum(owner[i]) && owner[i] != '-' {
			return bad("owner may contain only ASCII letters, digits and '-'")
		}
		if owner[i] == '-' && owner[i-1] == '-' {
			return bad(`owner must not contain "--"`)
		}
	}
	switch {
	case name == "":
		return bad("name is empty")
	case len(name) > 100:
		return bad("name is %d characters; the maximum is 100", len(name))
	case name == "." || name == "..":
		return bad("name must not be %q", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return bad("name may contain only ASCII letters, digits, '.', '_' and '-'")
		}
		if c == '.' && i+1 < len(name) && name[i+1] == '.' {
			return bad(`name must not contain ".."`)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// ValidateScript checks a script body (R40): non-empty, valid UTF-8 and at
// most MaxScriptBytes bytes. Errors wrap ErrRequest.
func ValidateScript(b []byte) error {
	return validateScriptMax(b, MaxScriptBytes)
}

// validateScriptMax is ValidateScript with the cap of the job kind (a
// query's, or a sealed probe's).
func validateScriptMax(b []byte, max int) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%w: script is empty", ErrRequest)
	case len(b) > max:
		return fmt.Errorf("%w: script is %d bytes; the maximum is %d", ErrRequest, len(b), max)
	case !utf8.Valid(b):
		return fmt.Errorf("%w: script is not valid UTF-8 (byte %d)", ErrRequest, firstInvalidUTF8(b))
	}
	return nil
}

// DecodeSchemaHeader checks and decodes an X-AWF-Schema-B64 header value
// (R41): 1–MaxSchemaHeaderChars characters of the base64url alphabet without
// padding, canonically encoded, decoding to valid UTF-8. It does not parse the
// schema. Errors wrap ErrRequest.
func DecodeSchemaHeader(h string) ([]byte, error) {
	if h == "" {
		return nil, fmt.Errorf("%w: schema header is empty", ErrRequest)
	}
	if len(h) > MaxSchemaHeaderChars {
		return nil, fmt.Errorf("%w: schema header is %d characters; the maximum is %d", ErrRequest, len(h), MaxSchemaHeaderChars)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !isAlnum(c) && c != '-' && c != '_' {
			return nil, fmt.Errorf("%w: schema header byte %d is outside the base64url alphabet (A-Z a-z 0-9 - _, no padding)", ErrRequest, i)
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("%w: schema header is not canonical unpadded base64url: %w", ErrRequest, err)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: decoded schema is not valid UTF-8 (byte %d)", ErrRequest, firstInvalidUTF8(b))
	}
	return b, nil
}

// EncodeSchemaHeader encodes schema text as an X-AWF-Schema-B64 value.
func EncodeSchemaHeader(schema []byte) string {
	return base64.RawURLEncoding.EncodeToString(schema)
}

// Request is a validated query request.
type Request struct {
	// Repo is the owner/name slug as sent (the ledger lower-cases it).
	Repo string
	// SchemaText is the decoded schema header: the DSL text the agent sent.
	SchemaText []byte
	// Schema is the parsed schema.
	Schema *Schema
	// Script is the script body.
	Script []byte
}

// ValidateRequest validates the three parts of a query request (R39–R42)
// and reports every problem, not just the first: the returned error joins one
// error per failing part, each wrapping ErrRequest (and ErrSchema/ErrJSON for
// a bad schema). It is for the audit log; the caller only ever sees
// ErrorEnvelope.
func ValidateRequest(repo string, schemaB64 string, script []byte) (*Request, error) {
	var errs []error
	if err := ValidateRepoSlug(repo); err != nil {
		errs = append(errs, err)
	}
	text, err := DecodeSchemaHeader(schemaB64)
	var schema *Schema
	if err != nil {
		errs = append(errs, err)
	} else if schema, err = ParseSchema(text); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrRequest, err))
	}
	if err := ValidateScript(script); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Request{Repo: repo, SchemaText: text, Schema: schema, Script: script}, nil
}
