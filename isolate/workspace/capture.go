package workspace

import "sync"

// Capture is an io.Writer that keeps at most Max bytes and silently drops
// the rest, so that a chatty job can neither block nor exhaust the broker.
type Capture struct {
	Max int64

	mu  sync.Mutex
	buf []byte
}

// Write keeps what fits and always reports success.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.Max - int64(len(c.buf)); room > 0 {
		if int64(len(p)) < room {
			room = int64(len(p))
		}
		c.buf = append(c.buf, p[:room]...)
	}
	return len(p), nil
}

// Bytes returns a copy of what was kept.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}
