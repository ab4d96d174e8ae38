package broker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/awf-project/awf/broker/jsonfile"
)

// Caps of the HTTP layer, matching the reference server.
const (
	// MaxHeaderBytes caps the request line plus all headers.
	MaxHeaderBytes = 8 << 10
)

// errHeader marks a request whose head cannot be accepted: it is answered
// like a client error, counted and audited like every response.
var errHeader = errors.New("bad request head")

// readHead reads the request line and headers, at most MaxHeaderBytes in
// all. Lines must end in CRLF; folded lines and malformed names are refused.
func readHead(br *bufio.Reader) (*Request, error) {
	budget := MaxHeaderBytes
	line, err := readLine(br, &budget)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(line, " ")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return nil, fmt.Errorf("%w: request line", errHeader)
	}
	if parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0" {
		return nil, fmt.Errorf("%w: protocol %q", errHeader, jsonfile.Clip(parts[2], 16))
	}
	for _, c := range []byte(parts[0]) {
		if !isTokenChar(c) {
			return nil, fmt.Errorf("%w: method", errHeader)
		}
	}
	r := &Request{Method: parts[0], Target: parts[1]}
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return nil, err
		}
		if line == "" {
			return r, nil
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: header line without a name", errHeader)
		}
		for _, c := range []byte(name) {
			if !isTokenChar(c) {
				return nil, fmt.Errorf("%w: header name", errHeader)
			}
		}
		value = strings.Trim(value, " \t")
		for _, c := range []byte(value) {
			if (c < 0x20 && c != '\t') || c == 0x7f {
				return nil, fmt.Errorf("%w: control byte in header %s", errHeader, name)
			}
		}
		r.Headers = append(r.Headers, Header{Name: name, Value: value})
	}
}

// readLine reads one CRLF-terminated line, charging it to budget.
func readLine(br *bufio.Reader, budget *int) (string, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", fmt.Errorf("%w: truncated", errHeader)
			}
			return "", fmt.Errorf("%w: %w", errHeader, err)
		}
		*budget--
		if *budget < 0 {
			return "", fmt.Errorf("%w: head is larger than %d bytes", errHeader, MaxHeaderBytes)
		}
		if c == '\n' {
			if len(b) == 0 || b[len(b)-1] != '\r' {
				return "", fmt.Errorf("%w: bare LF", errHeader)
			}
			return string(b[:len(b)-1]), nil
		}
		if c == '\r' && len(b) > 0 && b[len(b)-1] == '\r' {
			return "", fmt.Errorf("%w: bare CR", errHeader)
		}
		b = append(b, c)
	}
}

func isTokenChar(c byte) bool {
	if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// header returns the single value of a header (case-insensitive), whether it
// appeared more than once, and whether it appeared at all.
func (r *Request) header(name string) (value string, repeated, present bool) {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			if present {
				repeated = true
			}
			value, present = h.Value, true
		}
	}
	return value, repeated, present
}

// bodyPlan is how the body is delimited.
type bodyPlan struct {
	chunked bool
	length  int64
}

// planBody decides how to read the body. Ambiguous framing (both
// Content-Length and Transfer-Encoding, repeated or malformed values, a
// transfer coding other than chunked) is a head error.
func planBody(r *Request) (bodyPlan, error) {
	te, teRep, hasTE := r.header("Transfer-Encoding")
	cl, clRep, hasCL := r.header("Content-Length")
	switch {
	case teRep || clRep:
		return bodyPlan{}, fmt.Errorf("%w: repeated body framing header", errHeader)
	case hasTE && hasCL:
		return bodyPlan{}, fmt.Errorf("%w: both Content-Length and Transfer-Encoding", errHeader)
	case hasTE:
		if !strings.EqualFold(te, "chunked") {
			return bodyPlan{}, fmt.Errorf("%w: transfer coding %q", errHeader, jsonfile.Clip(te, 16))
		}
		return bodyPlan{chunked: true}, nil
	case hasCL:
		if cl == "" || len(cl) > 18 || strings.Trim(cl, "0123456789") != "" {
			return bodyPlan{}, fmt.Errorf("%w: Content-Length", errHeader)
		}
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil {
			return bodyPlan{}, fmt.Errorf("%w: Content-Length", errHeader)
		}
		return bodyPlan{length: n}, nil
	}
	return bodyPlan{}, nil
}

// errBodyTooLarge is a body over the kind's cap.
var errBodyTooLarge = errors.New("body is larger than the cap")

// readBody reads the body under max bytes. It stops buffering as soon as
// the cap is exceeded.
func readBody(br *bufio.Reader, p bodyPlan, max int) ([]byte, error) {
	if !p.chunked {
		if p.length > int64(max) {
			return nil, fmt.Errorf("%w: Content-Length %d > %d", errBodyTooLarge, p.length, max)
		}
		b := make([]byte, p.length)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		return b, nil
	}
	var body bytes.Buffer
	budget := MaxHeaderBytes
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return nil, fmt.Errorf("chunk size: %w", err)
		}
		sizeText, _, _ := strings.Cut(line, ";")
		sizeText = strings.TrimRight(sizeText, " \t")
		if sizeText == "" || len(sizeText) > 8 || strings.Trim(strings.ToLower(sizeText), "0123456789abcdef") != "" {
			return nil, errors.New("chunk size: malformed")
		}
		size, err := strconv.ParseInt(sizeText, 16, 64)
		if err != nil {
			return nil, errors.New("chunk size: malformed")
		}
		if size == 0 {
			for {
				t, err := readLine(br, &budget)
				if err != nil {
					return nil, fmt.Errorf("trailer: %w", err)
				}
				if t == "" {
					return body.Bytes(), nil
				}
			}
		}
		if int64(body.Len())+size > int64(max) {
			return nil, fmt.Errorf("%w: chunked body > %d", errBodyTooLarge, max)
		}
		if _, err := io.CopyN(&body, br, size); err != nil {
			return nil, fmt.Errorf("chunk: %w", err)
		}
		crlf, err := readLine(br, &budget)
		if err != nil || crlf != "" {
			return nil, errors.New("chunk: missing CRLF")
		}
	}
}
