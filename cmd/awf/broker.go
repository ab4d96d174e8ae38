package main

// cmdBroker implements "awf broker". STUB: replaced by the owning work.
var cmdBroker = notYet("broker")
