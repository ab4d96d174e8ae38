package main

// cmdRun implements "awf run". STUB: replaced by the owning work.
var cmdRun = notYet("run")
