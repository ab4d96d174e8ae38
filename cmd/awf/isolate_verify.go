package main

// cmdIsolateVerify implements "awf isolate verify". STUB: replaced by the verify work.
var cmdIsolateVerify = notYet("isolate verify")

// cmdIsolateMatrix implements "awf isolate matrix". STUB: replaced by the verify work.
var cmdIsolateMatrix = notYet("isolate matrix")
