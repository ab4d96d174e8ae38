package direct

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/opencontainers/runc/libcontainer/seccomp"
	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/isolate/cgroupfs"
)

// Probe implements isolate.Runtime: it checks that this host and this build
// can enforce every control the direct runtime promises.
func (r *Runtime) Probe(ctx context.Context) error {
	if err := r.Usable(); err != nil {
		return err
	}
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("not running as root"))
	}
	if !seccomp.Enabled {
		errs = append(errs, errors.New("built without seccomp support (needs cgo and -tags seccomp)"))
	}
	fsb, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fsb), "\toverlay\n") {
		errs = append(errs, errors.New("overlayfs is not available"))
	}
	if err := probeOpenat2(); err != nil {
		errs = append(errs, err)
	}
	mode, err := cgroupfs.Mode()
	if err != nil {
		errs = append(errs, err)
	} else if mode != r.cg.mode {
		errs = append(errs, fmt.Errorf("cgroup mode changed from %s to %s", r.cg.mode, mode))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("direct: probe: %w", err)
	}
	return nil
}

// probeOpenat2 checks that openat2 with RESOLVE_BENEATH works: the output
// reader depends on it.
func probeOpenat2() error {
	dir, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /: %w", err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return fmt.Errorf("openat2: %w", err)
	}
	return unix.Close(fd)
}
