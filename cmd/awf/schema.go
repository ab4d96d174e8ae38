package main

// cmdSchema implements "awf schema". STUB: replaced by the owning work.
var cmdSchema = notYet("schema")
