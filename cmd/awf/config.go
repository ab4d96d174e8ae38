package main

// cmdConfig implements "awf config". STUB: replaced by the owning work.
var cmdConfig = notYet("config")
