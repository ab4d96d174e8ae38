package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/awf-project/awf/rootfs"
)

const rootfsUsage = `usage: awf rootfs build [--python PATH] --out DIR
       awf rootfs verify DIR [--digest sha256:HEX]

build   builds the minimal read-only Python root filesystem from the host
        interpreter (default /usr/bin/python3) into the new or empty DIR and
        prints its digest.
verify  recomputes DIR's digest and prints it; with --digest it exits 1
        unless the digest matches.
`

// rootfsBuild implements "awf rootfs build".
func rootfsBuild(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("awf rootfs build", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	python := fs.String("python", rootfs.DefaultPython, "host interpreter to copy")
	out := fs.String("out", "", "directory to create (must not exist or be empty)")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprint(e.stderr, rootfsUsage)
		return 2
	}
	d, err := rootfs.Build(ctx, rootfs.Options{Python: *python, Out: *out})
	if err != nil {
		fmt.Fprintf(e.stderr, "awf rootfs build: %v\n", err)
		return 1
	}
	fmt.Fprintln(e.stdout, d)
	return 0
}

// rootfsVerify implements "awf rootfs verify".
func rootfsVerify(ctx context.Context, e env) int {
	// Accept the directory before or after the flag.
	var dir string
	args := e.args
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		dir, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("awf rootfs verify", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	want := fs.String("digest", "", "expected digest (sha256:HEX)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	} else if fs.NArg() != 0 || dir == "" {
		fmt.Fprint(e.stderr, rootfsUsage)
		return 2
	}
	d, err := rootfs.Verify(ctx, dir, *want)
	if err != nil {
		fmt.Fprintf(e.stderr, "awf rootfs verify: %v\n", err)
		return 1
	}
	fmt.Fprintln(e.stdout, d)
	return 0
}
