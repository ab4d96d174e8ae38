// Command gofloor is the start-up floor of any Go program on the bench's
// machine: it prints the agent CLI's refusal line and exits, with nothing
// else of the client. The bench runs it beside bounded-query so that the
// client's start-up can be read against the Go runtime's own.
package main

import "os"

func main() {
	_, _ = os.Stdout.WriteString(`{"status":"error"}` + "\n")
}
