package main

// cmdPolicy implements "awf policy". STUB: replaced by the owning work.
var cmdPolicy = notYet("policy")
