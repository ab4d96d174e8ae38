package proto

// ErrorEnvelope is the one canonical failure body, identical for every failure.
const ErrorEnvelope = `{"status":"error"}`

// okPrefix starts every success body.
const okPrefix = `{"status":"ok","result":`

// OKEnvelope wraps a canonical value in the success envelope:
// {"status":"ok","result":<canonical>}, no whitespace, no trailing newline.
func OKEnvelope(canonical []byte) []byte {
	b := make([]byte, 0, len(okPrefix)+len(canonical)+1)
	b = append(b, okPrefix...)
	b = append(b, canonical...)
	return append(b, '}')
}
