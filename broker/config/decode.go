package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxConfigBytes caps the size of a configuration document.
const MaxConfigBytes = 1 << 20

// DecodeJSON parses one JSON document into a tree of map[string]any, []any,
// string, json.Number, bool and nil. Unlike encoding/json it rejects
// duplicate object keys and any content after the value, so that what the
// loader and the JSON Schema check is exactly what the operator wrote.
func DecodeJSON(src []byte) (any, error) {
	if len(src) > MaxConfigBytes {
		return nil, fmt.Errorf("config is larger than %d bytes", MaxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("config: unexpected content after the JSON document")
	}
	return v, nil
}

const maxDepth = 32

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("config: nesting deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config: empty or truncated document")
		}
		return nil, fmt.Errorf("config: invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("config: invalid JSON: %w", err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("config: invalid JSON object key")
				}
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("config: duplicate key %q", k)
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("config: invalid JSON: %w", err)
			}
			return m, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("config: invalid JSON: %w", err)
			}
			return a, nil
		default:
			return nil, fmt.Errorf("config: invalid JSON: unexpected %q", t)
		}
	default:
		return t, nil
	}
}
