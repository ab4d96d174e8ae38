package host

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// TestOnlyRunShim is RunShim with the agent's view weakened by knobs, the
// JSON of the shim's TestOnly knobs (shimKnobs; an unknown name is an
// error). It exists only so that the weakened twins of other packages'
// tests (broker/agentcheck) can run the real shim with one control removed;
// no configuration, flag or environment variable of awf reaches it.
func TestOnlyRunShim(a ShimArgs, argv []string, knobs []byte) (int, error) {
	var k shimKnobs
	if len(knobs) > 0 {
		dec := json.NewDecoder(bytes.NewReader(knobs))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&k); err != nil {
			return 125, fmt.Errorf("agent shim: test knobs: %w", err)
		}
	}
	return runShim(a, argv, k)
}
