package main

// cmdIsolateRun implements "awf isolate run". STUB: replaced by the direct-sandbox work.
var cmdIsolateRun = notYet("isolate run")
