package proto

import "strconv"

// The query framing headers (R41, R42), in lower case: header names are
// case-insensitive, the broker compares them lower-cased, and the client
// sends them as written here. proto owns them so that the broker and the
// client cannot drift apart.
const (
	HeaderQueryVersion = "x-awf-query-version"
	HeaderRepo         = "x-awf-repo"
	HeaderSchema       = "x-awf-schema-b64"
)

// QueryHeaderNames returns the framing headers a query carries, in the order
// the client sends them. It returns a fresh slice each call.
func QueryHeaderNames() []string {
	return []string{HeaderQueryVersion, HeaderRepo, HeaderSchema}
}

// QueryVersionValue is the X-AWF-Query-Version value: QueryProtocolVersion
// in decimal.
func QueryVersionValue() string { return strconv.Itoa(QueryProtocolVersion) }
