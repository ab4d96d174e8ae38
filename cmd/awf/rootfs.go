package main

// cmdRootfs implements "awf rootfs". STUB: replaced by the owning work.
var cmdRootfs = notYet("rootfs")
