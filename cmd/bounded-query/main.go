// Command bounded-query is the agent's CLI: it sends one script and its finite
// schema to the broker and prints exactly one canonical line.
//
// STUB: the broker work replaces this.
package main

import "fmt"

func main() { fmt.Println(`{"status":"error"}`) }
