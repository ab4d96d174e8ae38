package enclave

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkNewClose is the enclave's own share of an invocation: both
// namespaces, the link, the listener, the link filter, the cgroup and its
// hooks, and removing all of it.
func BenchmarkNewClose(b *testing.B) {
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		e, err := New(ctx, Options{RunID: "bench", Name: fmt.Sprint(i)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.OwnCgroup(); err != nil {
			b.Fatal(err)
		}
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
