package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxProfileBytes bounds the seccomp JSON import reads; Docker's default
// profile is about 20 KiB.
const maxProfileBytes = 4 << 20

// decodeStrict decodes one seccomp profile document of at most
// maxProfileBytes into v, as DecodeStrict does.
func decodeStrict(data []byte, v any) error {
	if len(data) > maxProfileBytes {
		return fmt.Errorf("profile is %d bytes; the limit is %d", len(data), maxProfileBytes)
	}
	return DecodeStrict(data, v)
}

// DecodeStrict decodes one JSON document into v, refusing unknown fields,
// duplicate object keys (encoding/json silently keeps the last one, so a
// reviewer reading the first would be misled) and trailing data. It is the
// one strict decoder of the reviewed JSON files awf reads (imported seccomp
// profiles here, the seed map in staging); it does not bound data, which is
// each caller's cap.
func DecodeStrict(data []byte, v any) error {
	if err := checkDuplicateKeys(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// checkDuplicateKeys walks the token stream and fails on the first object
// that names a key twice, giving the object's path.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool   // in an object: the next string token is a key
		key    string // in an object: the key whose value is being read
		index  int    // in an array: the index of the next element
		path   string
	}
	var stack []*frame
	// done marks that one value of the innermost container has been read.
	done := func() {
		if len(stack) == 0 {
			return
		}
		top := stack[len(stack)-1]
		if top.object {
			top.expect = true
		} else {
			top.index++
		}
	}
	childPath := func() string {
		if len(stack) == 0 {
			return "$"
		}
		top := stack[len(stack)-1]
		if top.object {
			return top.path + "." + top.key
		}
		return fmt.Sprintf("%s[%d]", top.path, top.index)
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, keys: map[string]bool{}, expect: true, path: childPath()})
			case '[':
				stack = append(stack, &frame{path: childPath()})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case string:
			if top != nil && top.object && top.expect {
				if top.keys[t] {
					return fmt.Errorf("duplicate key %q in %s", t, top.path)
				}
				top.keys[t], top.key, top.expect = true, t, false
				continue
			}
			done()
		default:
			done()
		}
	}
}
